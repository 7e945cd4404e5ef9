// The NATS side of the persistence backend: how records are read, published
// and leased, on the same wire as the Go SDK (bus/: access.go, tenantread.go,
// publish.go, lease.go, leasekv.go). Everything goes through the official
// clients (@nats-io/transport-node, @nats-io/jetstream, @nats-io/kv).

import {
  type JetStreamClient,
  type JetStreamManager,
  JetStreamApiError,
  AckPolicy,
  DeliverPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { type MsgHdrs, type NatsConnection, headers as newHeaders, nanos, nuid, errors as natsErrors } from "@nats-io/transport-node";
import { randomBytes } from "node:crypto";

import { SessionStreamConflictError } from "./errors.js";
import { LogSubjectPrefix, LogSubjects } from "./names.js";

/** One record of a session subject, as stored. */
export interface StoredRecord {
  data: Uint8Array;
  seq: number;
  msgId: string;
  header?: MsgHdrs;
}

const hdrMsgId = "Nats-Msg-Id";
const hdrExpectedSubjSeq = "Nats-Expected-Last-Subject-Sequence";

// JetStream error codes the backend reacts to (bus/publish.go).
export const codeWrongLastSequence = 10071;
const codeWrongLastSequenceInFlight = 10164;
const codeBatchDuplicate = 10201;
const codeDupInProcess = 10158;
const codeBatchIncomplete = 10176;

export function apiCode(err: unknown): number | undefined {
  return err instanceof JetStreamApiError ? err.code : undefined;
}

export function isWrongLastSequence(err: unknown): boolean {
  return apiCode(err) === codeWrongLastSequence;
}

/** isTransient: worth retrying (a timeout, no responders, a server or leader that is away for a moment). */
export function isTransient(err: unknown): boolean {
  if (err instanceof natsErrors.TimeoutError || err instanceof natsErrors.NoRespondersError) return true;
  if (err instanceof natsErrors.RequestError) return err.isNoResponders() || err.cause instanceof natsErrors.TimeoutError;
  if (err instanceof natsErrors.ConnectionError) return true;
  const c = apiCode(err);
  if (c === codeDupInProcess || c === codeBatchIncomplete || c === codeWrongLastSequenceInFlight) return true;
  if (err instanceof JetStreamApiError && (err.status === 503 || err.status === 408)) return true;
  if (err instanceof Error && /no responders|timeout|TIMEOUT|503/.test(err.message) && !(err instanceof JetStreamApiError)) return true;
  return false;
}

/** Retry pacing (bus/publish.go): 20 ms growing to 500 ms, for at most maxElapsedMs. */
export async function retry<T>(maxElapsedMs: number, op: () => Promise<T>, signal?: AbortSignal): Promise<T> {
  const deadline = Date.now() + maxElapsedMs;
  let wait = 20;
  for (;;) {
    try {
      return await op();
    } catch (err) {
      if (!isTransient(err) || Date.now() + wait > deadline || signal?.aborted) throw err;
      await new Promise((r) => setTimeout(r, wait));
      wait = Math.min(wait * 2, 500);
    }
  }
}

/** How a store reads its namespace's log subjects (bus/access.go's logReader). */
export interface LogReader {
  /** The first record of subject at or after stream sequence seq, or null. */
  first(subject: string, seq: number): Promise<StoredRecord | null>;
  /** The last record of subject, or null. */
  last(subject: string): Promise<StoredRecord | null>;
  /** How many records subject holds. */
  count(subject: string): Promise<number>;
  /** The namespace's log subjects (those under prefix, one token) with their record counts. */
  subjects(prefix: string): Promise<Map<string, number>>;
  /** Delivers subject's records from start through upTo, in order, until fn returns false. */
  range(subject: string, start: number, upTo: number, fn: (r: StoredRecord) => boolean | void): Promise<void>;
}

function storedOf(m: { data: Uint8Array; seq: number; header?: MsgHdrs }): StoredRecord {
  return { data: m.data, seq: m.seq, msgId: m.header?.get(hdrMsgId) ?? "", header: m.header };
}

/**
 * StreamReader is the untenanted store's reader: the stream's own API (a
 * subject's first and last record from the stream's leader with the message
 * get API, ranges with batched direct gets, counts from stream info).
 */
export class StreamReader implements LogReader {
  constructor(
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
  ) {}

  async first(subject: string, seq: number): Promise<StoredRecord | null> {
    const m = await this.jsm.streams.getMessage(this.stream, { seq, next_by_subj: subject } as never);
    return m ? storedOf(m) : null;
  }

  async last(subject: string): Promise<StoredRecord | null> {
    const m = await this.jsm.streams.getMessage(this.stream, { last_by_subj: subject });
    return m ? storedOf(m) : null;
  }

  async count(subject: string): Promise<number> {
    const info = await this.jsm.streams.info(this.stream, { subjects_filter: subject });
    return info.state.subjects?.[subject] ?? 0;
  }

  async subjects(prefix: string): Promise<Map<string, number>> {
    const info = await this.jsm.streams.info(this.stream, { subjects_filter: prefix + "*" });
    return new Map(Object.entries(info.state.subjects ?? {}));
  }

  async range(subject: string, start: number, upTo: number, fn: (r: StoredRecord) => boolean | void): Promise<void> {
    let next = start;
    while (next <= upTo) {
      const iter = await this.jsm.direct.getBatch(this.stream, { seq: next, next_by_subj: subject, batch: 256, up_to_seq: upTo } as never);
      let n = 0;
      for await (const m of iter) {
        n++;
        next = m.seq + 1;
        if (m.seq > upTo) return;
        if (fn(storedOf(m)) === false) return;
      }
      if (n === 0) return;
    }
  }
}

/** consumerWindow bounds one read's unacknowledged deliveries; consumerIdleMs how long the server keeps an abandoned one. */
const consumerWindow = 256;
const consumerIdleMs = 5000;

/**
 * TenantReader reads only the tenant's own log subjects, in the two forms its
 * permissions allow (docs/protocol.md#2-the-session-log-stream): the subject
 * form of direct get for a subject's last record, and push consumers created
 * on the filtered create subject, delivering to the tenant's inbox, for
 * everything else (bus/tenantread.go).
 */
export class TenantReader implements LogReader {
  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    private readonly attemptMs: number,
    private readonly inboxPrefix: string,
  ) {}

  async last(subject: string): Promise<StoredRecord | null> {
    const m = await this.jsm.direct.getMessage(this.stream, { last_by_subj: subject });
    return m ? storedOf(m) : null;
  }

  async first(subject: string, seq: number): Promise<StoredRecord | null> {
    let out: StoredRecord | null = null;
    await this.consume({ filter: subject, start: seq, window: 1 }, (r) => {
      out = r;
      return false;
    });
    return out;
  }

  async count(subject: string): Promise<number> {
    return this.consume({ filter: subject, start: 1, window: 1, headersOnly: true, countOnly: true });
  }

  async subjects(prefix: string): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    const seen: string[] = [];
    await this.consume({ filter: prefix + "*", start: 0, lastPerSubject: true, window: consumerWindow, headersOnly: true }, (r) => {
      seen.push(r.subject!);
    });
    for (const s of seen) out.set(s, await this.count(s));
    return out;
  }

  async range(subject: string, start: number, upTo: number, fn: (r: StoredRecord) => boolean | void): Promise<void> {
    await this.consume({ filter: subject, start, window: consumerWindow }, (r) => {
      if (r.seq > upTo) return false;
      return fn(r) !== false && r.seq < upTo;
    });
  }

  /**
   * consume creates an ephemeral push consumer (128 random bits of name,
   * memory storage, reaped by the server consumerIdleMs after its reader
   * stops listening) and hands fn every delivery until it declines or every
   * record pending at creation was delivered. It returns that pending count.
   */
  private async consume(
    c: { filter: string; start: number; window: number; lastPerSubject?: boolean; headersOnly?: boolean; countOnly?: boolean },
    fn?: (r: StoredRecord & { subject?: string }) => boolean | void,
  ): Promise<number> {
    const inbox = `${this.inboxPrefix}.${nuid.next()}`;
    const sub = this.nc.subscribe(inbox);
    try {
      const name = randomBytes(16).toString("hex");
      const ci = await this.jsm.consumers.add(this.stream, {
        name,
        filter_subject: c.filter,
        deliver_subject: inbox,
        deliver_policy: c.lastPerSubject ? DeliverPolicy.LastPerSubject : DeliverPolicy.StartSequence,
        ...(c.lastPerSubject ? {} : { opt_start_seq: c.start }),
        ack_policy: AckPolicy.All,
        ack_wait: nanos(30_000),
        max_ack_pending: c.window,
        headers_only: c.headersOnly ?? false,
        inactive_threshold: nanos(consumerIdleMs),
        num_replicas: 1,
        mem_storage: true,
      });
      const pending = ci.num_pending;
      if (c.countOnly || pending === 0 || !fn) return pending;
      let delivered = 0;
      let unacked = 0;
      let lastSeq = 0;
      const it = sub[Symbol.asyncIterator]();
      while (delivered < pending) {
        const next = await Promise.race([
          it.next(),
          new Promise<"timeout">((r) => setTimeout(() => r("timeout"), this.attemptMs).unref()),
        ]);
        if (next === "timeout") throw new natsErrors.TimeoutError();
        if (next.done) throw new Error(`read ${c.filter}: subscription closed`);
        const m = next.value;
        const status = m.headers?.code ?? 0;
        if (m.headers && status !== 0) {
          if (status === 100) continue; // heartbeat or flow control
          throw new natsErrors.TimeoutError();
        }
        const seq = ackStreamSeq(m.reply);
        if (!onFilter(m.subject, c.filter)) throw new Error(`read ${c.filter}: the server delivered a record of ${m.subject}`);
        if (seq <= lastSeq) continue;
        lastSeq = seq;
        delivered++;
        if (++unacked * 2 >= c.window && delivered < pending) {
          m.respond();
          unacked = 0;
        }
        const more = fn({ data: m.data, seq, msgId: m.headers?.get(hdrMsgId) ?? "", header: m.headers, subject: m.subject });
        if (more === false) break;
      }
      return pending;
    } finally {
      sub.unsubscribe();
    }
  }
}

/** ackStreamSeq reads the stream sequence from a delivery's ack subject ($JS.ACK.<stream>.<consumer>.<n>.<sseq>.<dseq>.…). */
function ackStreamSeq(reply: string | undefined): number {
  const t = (reply ?? "").split(".");
  // $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending> (v1), or with domain and hash (v2).
  const i = t.length === 9 ? 5 : t.length >= 12 ? 8 : -1;
  const n = i >= 0 ? Number(t[i]) : NaN;
  if (!Number.isSafeInteger(n)) throw new Error(`delivery with an unexpected ack subject ${JSON.stringify(reply)}`);
  return n;
}

function onFilter(subject: string, filter: string): boolean {
  if (filter.endsWith("*")) {
    const prefix = filter.slice(0, -1);
    return subject.startsWith(prefix) && subject.length > prefix.length && !subject.slice(prefix.length).includes(".");
  }
  return subject === filter;
}

// ---------------------------------------------------------------------------
// Leases.

/** A key's last record: a put, or a deletion (delete, purge, or a lapse marker). */
export interface LeaseEntry {
  value: Uint8Array;
  revision: number;
  put: boolean;
}

/** What leases need of the lease bucket (bus/leasekv.go's leaseKV). */
export interface LeaseKV {
  create(key: string, v: Uint8Array): Promise<number>;
  update(key: string, v: Uint8Array, rev: number): Promise<number>;
  deleteAt(key: string, rev: number): Promise<void>;
  entry(key: string): Promise<LeaseEntry | null>;
}

/** JsLeases is the untenanted store's bucket, through @nats-io/kv. */
export class JsLeases implements LeaseKV {
  constructor(private readonly kv: KV) {}
  create(key: string, v: Uint8Array): Promise<number> {
    return this.kv.create(key, v);
  }
  update(key: string, v: Uint8Array, rev: number): Promise<number> {
    return this.kv.update(key, v, rev);
  }
  async deleteAt(key: string, rev: number): Promise<void> {
    await this.kv.delete(key, { previousSeq: rev });
  }
  async entry(key: string): Promise<LeaseEntry | null> {
    const e = await this.kv.get(key);
    if (!e) return null;
    return { value: e.value, revision: e.revision, put: e.operation === "PUT" };
  }
}

/**
 * TenantLeases is a tenant's bucket: its keys ($KV.<bucket>.<tenant>.<token>)
 * are written by publishing, as the key-value client does, and read by the
 * subject form of direct get on the bucket's stream, which is all a tenant's
 * permissions allow (the key-value client needs the stream's info).
 */
export class TenantLeases implements LeaseKV {
  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly bucket: string,
  ) {}
  private subject(key: string): string {
    return `$KV.${this.bucket}.${key}`;
  }
  private async put(key: string, v: Uint8Array, rev: number, op?: string): Promise<number> {
    const h = newHeaders();
    if (op) h.set("KV-Operation", op);
    const ack = await this.js.publish(this.subject(key), v, { headers: h, expect: { lastSubjectSequence: rev } });
    return ack.seq;
  }
  async create(key: string, v: Uint8Array): Promise<number> {
    try {
      return await this.put(key, v, 0);
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
      const e = await this.entry(key);
      if (e && !e.put) return this.put(key, v, e.revision);
      throw err;
    }
  }
  update(key: string, v: Uint8Array, rev: number): Promise<number> {
    return this.put(key, v, rev);
  }
  async deleteAt(key: string, rev: number): Promise<void> {
    await this.put(key, new Uint8Array(), rev, "DEL");
  }
  async entry(key: string): Promise<LeaseEntry | null> {
    const m = await this.jsm.direct.getMessage(`KV_${this.bucket}`, { last_by_subj: this.subject(key) });
    if (!m) return null;
    const op = m.header.get("KV-Operation");
    const marker = m.header.get("Nats-Marker-Reason");
    return { value: m.data, revision: m.seq, put: op === "" && marker === "" };
  }
}

const enc = new TextEncoder();

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** A claim that raced with another change of the key: tried again. */
class LeaseChangedError extends Error {}

/** newLeaseValue is one acquisition's value {"sessionId","owner","acquiredAt"}: unique, so a retried claim finds its own key. */
export function newLeaseValue(id: string): Uint8Array {
  return enc.encode(JSON.stringify({ sessionId: id, owner: nuid.next(), acquiredAt: Date.now() }));
}

/**
 * claim creates key with v and returns its revision; a key holding v is
 * ours (adopted); a deleted or lapsed key is taken at its revision; one
 * holding anything else is "held" (bus/lease.go's claim).
 */
export async function claim(kv: LeaseKV, key: string, v: Uint8Array): Promise<number | "held"> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      return await kv.create(key, v);
    } catch (err) {
      if (!isWrongLastSequence(err) && !(err instanceof Error && /wrong last sequence|key exists/i.test(err.message))) throw err;
    }
    const e = await kv.entry(key);
    if (!e) continue;
    if (!e.put) {
      try {
        return await kv.update(key, v, e.revision);
      } catch (err) {
        if (isWrongLastSequence(err)) continue;
        throw err;
      }
    }
    if (sameBytes(e.value, v)) return e.revision;
    return "held";
  }
  throw new LeaseChangedError(`lease ${key}: the key kept changing during the claim`);
}

/**
 * Lease is one held write lease; its heartbeat rewrites the key every TTL/3
 * (an unref'd timer owned by the lease, stopped by release).
 */
export class Lease {
  private rev: number;
  private lost = false;
  private lastBeat = Date.now();
  private timer: NodeJS.Timeout;
  private beating: Promise<void> = Promise.resolve();

  constructor(
    private readonly kv: LeaseKV,
    readonly key: string,
    readonly value: Uint8Array,
    private readonly ttlMs: number,
    rev: number,
    private readonly maxElapsedMs: number,
  ) {
    this.rev = rev;
    this.timer = setInterval(() => void this.beat(), Math.max(1, Math.floor(ttlMs / 3)));
    this.timer.unref();
  }

  /** beat rewrites the key at its known revision; a key another writer holds makes the lease lost. */
  beat(): Promise<void> {
    this.beating = this.beating.then(async () => {
      if (this.lost) return;
      try {
        let nrev: number;
        try {
          nrev = await this.kv.update(this.key, this.value, this.rev);
        } catch (err) {
          if (!isWrongLastSequence(err)) throw err;
          const r = await claim(this.kv, this.key, this.value);
          if (r === "held") {
            this.markLost();
            return;
          }
          nrev = r;
        }
        this.rev = nrev;
        this.lastBeat = Date.now();
      } catch {
        // Transient: the next beat tries again.
      }
    });
    return this.beating;
  }

  markLost(): void {
    this.lost = true;
    clearInterval(this.timer);
  }

  /** ensure reports whether the lease is held, refreshing it first when no beat succeeded within the TTL. */
  async ensure(): Promise<boolean> {
    if (this.lost) return false;
    if (Date.now() - this.lastBeat < this.ttlMs) return true;
    await this.beat();
    return !this.lost && Date.now() - this.lastBeat < this.ttlMs;
  }

  /** release stops the heartbeat and deletes the key if it still holds this lease's value. */
  async release(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    if (this.lost) return;
    this.lost = true;
    let rev = this.rev;
    await retry(this.maxElapsedMs, async () => {
      try {
        await this.kv.deleteAt(this.key, rev);
      } catch (err) {
        if (!isWrongLastSequence(err)) throw err;
        const e = await this.kv.entry(this.key);
        if (!e || !e.put || !sameBytes(e.value, this.value)) return;
        rev = e.revision;
        throw new natsErrors.TimeoutError(); // retried at the new revision
      }
    });
  }
}

// ---------------------------------------------------------------------------
// Provisioning (bus/stream.go).

export interface StreamSettings {
  stream: string;
  leaseBucket: string;
  replicas: number;
  duplicatesMs: number;
  leaseTtlMs: number;
}

/** streamConfig is the session log stream dshq needs (bus/stream.go's jsConfig). */
function streamConfig(s: StreamSettings): Partial<StreamConfig> & { name: string } {
  return {
    name: s.stream,
    subjects: [LogSubjects],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_msgs: -1,
    max_bytes: -1,
    max_age: 0,
    max_msgs_per_subject: -1,
    max_msg_size: -1,
    num_replicas: s.replicas,
    duplicate_window: nanos(s.duplicatesMs),
    deny_delete: true,
    deny_purge: true,
    allow_direct: true,
    allow_atomic: true,
  } as Partial<StreamConfig> & { name: string };
}

/**
 * ensureStream creates the stream and the lease bucket with dshq's exact
 * configuration, or verifies existing ones: a conflicting configuration is
 * a SessionStreamConflictError naming every difference, never changed. It
 * returns the lease bucket and its TTL (the bucket's max age).
 */
export async function ensureStream(nc: NatsConnection, jsm: JetStreamManager, s: StreamSettings): Promise<{ kv: KV; leaseTtlMs: number }> {
  const want = streamConfig(s);
  try {
    await jsm.streams.add(want);
  } catch (err) {
    if (apiCode(err) !== 10058) throw err; // stream name already in use
    const got = (await jsm.streams.info(s.stream)).config as StreamConfig & { allow_atomic?: boolean };
    const diffs: string[] = [];
    const d = (f: string, g: unknown, w: unknown) => diffs.push(`${f} is ${String(g)}, want ${String(w)}`);
    if ([...got.subjects].sort().join(",") !== LogSubjects) d("subjects", got.subjects, LogSubjects);
    if (got.storage !== StorageType.File) d("storage", got.storage, StorageType.File);
    if (got.retention !== RetentionPolicy.Limits) d("retention", got.retention, RetentionPolicy.Limits);
    for (const [f, v] of [["max_msgs", got.max_msgs], ["max_bytes", got.max_bytes], ["max_msgs_per_subject", got.max_msgs_per_subject]] as const) {
      if (v > 0) d(f, v, "unlimited");
    }
    if (got.max_age !== 0) d("max_age", got.max_age, "unlimited");
    if (got.num_replicas !== s.replicas) d("replicas", got.num_replicas, s.replicas);
    if (got.duplicate_window < nanos(s.duplicatesMs)) d("duplicate_window", got.duplicate_window, `at least ${nanos(s.duplicatesMs)}`);
    if (!got.allow_atomic) d("allow_atomic", false, true);
    if (!got.allow_direct) d("allow_direct", false, true);
    if (!got.deny_delete) d("deny_delete", false, true);
    if (!got.deny_purge) d("deny_purge", false, true);
    if (got.sealed) d("sealed", true, false);
    if (got.mirror) d("mirror", got.mirror.name, "none");
    if (diffs.length > 0) {
      throw new SessionStreamConflictError(`stream ${s.stream} exists with a conflicting configuration: ${diffs.join("; ")}`);
    }
  }
  const kvm = new Kvm(nc);
  let kv: KV;
  try {
    const status = await (await kvm.open(s.leaseBucket)).status();
    kv = await kvm.open(s.leaseBucket);
    const diffs: string[] = [];
    if (status.history !== 1) diffs.push(`history is ${status.history}, want 1`);
    if (diffs.length > 0) {
      throw new SessionStreamConflictError(`lease bucket ${s.leaseBucket} exists with a conflicting configuration: ${diffs.join("; ")}`);
    }
    return { kv, leaseTtlMs: status.ttl };
  } catch (err) {
    if (err instanceof SessionStreamConflictError) throw err;
    if (!/not found|10059/i.test(String((err as Error).message)) && apiCode(err) !== 10059) throw err;
  }
  kv = await kvm.create(s.leaseBucket, {
    description: "dshq session write leases",
    history: 1,
    ttl: s.leaseTtlMs,
    storage: StorageType.File,
    replicas: s.replicas,
    markerTTL: s.leaseTtlMs,
  });
  return { kv, leaseTtlMs: s.leaseTtlMs };
}

/** The tenant's log subject prefix, dsh.log.<tenant>., or dsh.log. */
export function namespacePrefix(tenant: string): string {
  return tenant === "" ? LogSubjectPrefix : `${LogSubjectPrefix}${tenant}.`;
}

// ---------------------------------------------------------------------------
// Publishing (bus/publish.go).

export { hdrMsgId, hdrExpectedSubjSeq };

/** One record to publish on a session subject. */
export interface OutRecord {
  msgId: string;
  data: Uint8Array;
}

/** The largest atomic batch the server accepts by default. */
export const MaxAtomicBatch = 1000;

/** A publish conflict that the subject's tail does not confirm as this writer's. */
export class ConflictError extends Error {
  constructor(
    message: string,
    readonly duplicate: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * Publisher stores a session's records with the contract's msg ids and
 * expected last subject sequences, retrying transient failures, and
 * confirms a conflict against the subject's tail: a retried record whose
 * first attempt was stored is recognised as stored.
 */
export class Publisher {
  constructor(
    private readonly js: JetStreamClient,
    private readonly reader: LogReader,
    private readonly maxElapsedMs: number,
    private readonly attemptMs: number,
  ) {}

  /**
   * publish stores recs on subject after the record at stream sequence prev,
   * one by one below atomicMin records, else in atomic batches; stored(i,
   * seq) is called for each record once it is stored (seq 0 inside a batch
   * but for its last record).
   */
  async publish(subject: string, prev: number, recs: OutRecord[], atomicMin: number, stored: (i: number, seq: number) => void, signal?: AbortSignal): Promise<void> {
    if (atomicMin <= 0 || recs.length < atomicMin) {
      for (let i = 0; i < recs.length; i++) {
        if (signal?.aborted) throw signal.reason;
        const seq = await this.chunk(subject, prev, recs.slice(i, i + 1));
        stored(i, seq);
        prev = seq;
      }
      return;
    }
    for (let off = 0; off < recs.length; off += MaxAtomicBatch) {
      if (signal?.aborted) throw signal.reason;
      const chunk = recs.slice(off, off + MaxAtomicBatch);
      const last = await this.chunk(subject, prev, chunk);
      for (let j = 0; j < chunk.length; j++) stored(off + j, j === chunk.length - 1 ? last : 0);
      prev = last;
    }
  }

  private async chunk(subject: string, prev: number, recs: OutRecord[]): Promise<number> {
    return retry(this.maxElapsedMs, async () => {
      try {
        return await this.send(subject, prev, recs);
      } catch (err) {
        const dup = err instanceof DuplicateAck || apiCode(err) === codeBatchDuplicate;
        if (!dup && !isWrongLastSequence(err)) throw err;
        const seq = await this.confirm(subject, prev, recs);
        if (seq > 0) return seq;
        throw new ConflictError(String((err as Error).message), dup, { cause: err });
      }
    });
  }

  private async send(subject: string, prev: number, recs: OutRecord[]): Promise<number> {
    const hdrs = (i: number) => {
      const h = newHeaders();
      h.set(hdrMsgId, recs[i]!.msgId);
      return h;
    };
    if (recs.length === 1) {
      const ack = await this.js.publish(subject, recs[0]!.data, {
        msgID: recs[0]!.msgId,
        expect: { lastSubjectSequence: prev },
        timeout: this.attemptMs,
      });
      if (ack.duplicate) throw new DuplicateAck(ack.seq);
      return ack.seq;
    }
    // The first record carries the expected sequence; the batch commits all
    // or nothing, in isolation, so it guards the rest.
    const h0 = hdrs(0);
    h0.set(hdrExpectedSubjSeq, String(prev));
    const batch = await this.js.startBatch(subject, recs[0]!.data, { headers: h0, timeout: this.attemptMs });
    for (let i = 1; i < recs.length - 1; i++) batch.add(subject, recs[i]!.data, { headers: hdrs(i) });
    const ack = await batch.commit(subject, recs[recs.length - 1]!.data, { headers: hdrs(recs.length - 1), timeout: this.attemptMs });
    return ack.seq;
  }

  /** confirm returns the stream sequence of recs' last record when the subject ends with exactly them right after prev, else 0. */
  private async confirm(subject: string, prev: number, recs: OutRecord[]): Promise<number> {
    const last = await this.reader.last(subject);
    if (!last) return 0;
    const want = recs[recs.length - 1]!;
    if (last.msgId !== want.msgId || !sameBytes(last.data, want.data)) return 0;
    if (recs.length > 1 || prev > 0) {
      const first = await this.reader.first(subject, prev + 1);
      if (!first || first.msgId !== recs[0]!.msgId || !sameBytes(first.data, recs[0]!.data)) return 0;
    }
    return last.seq;
  }
}

/** A publish acknowledged as a duplicate of a stored msg id. */
export class DuplicateAck extends Error {
  constructor(readonly seq: number) {
    super(`publish acknowledged as duplicate (the stored record's sequence is ${seq})`);
  }
}
