// createSessionPersistence: the deepseek-harness persistence seam
// (docs/sdk.md#typescript-dshqharness) on JetStream, on the same wire as the
// Go SDK's bus.Store and bus.Handle.

import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { type ConnectionOptions, type NatsConnection, connect } from "@nats-io/transport-node";

import {
  ConflictError,
  JsLeases,
  Lease,
  type LeaseKV,
  type LogReader,
  type OutRecord,
  Publisher,
  StreamReader,
  TenantLeases,
  TenantReader,
  claim,
  ensureStream,
  namespacePrefix,
  newLeaseValue,
  retry,
} from "./bus.js";
import {
  SessionAlreadyExistsError,
  SessionAlreadyOwnedError,
  SessionFormatUnsupportedError,
  SessionHandleClosedError,
  SessionMsgIdInUseError,
  SessionOwnershipLostError,
  SessionPersistenceCorruptionError,
  SessionPersistenceNotFoundError,
  SessionReadOnlyError,
  throwIfAborted,
} from "./errors.js";
import { type JsonValue, cloneJson, deepFreeze, parseRecord, stringifyJson } from "./json.js";
import {
  LeaseBucket,
  SessionStream,
  eventMsgId,
  headerMsgId,
  leaseKey,
  logKey,
  parseSubjectToken,
  sessionIdProblem,
  subjectToken,
  tenantInboxPrefix,
  tenantProblem,
} from "./names.js";
import {
  HeaderRecordError,
  type SessionEvent,
  type SessionHeader,
  encodeEvent,
  encodeHeaderRecord,
  envelopeProblem,
  headerProblem,
  isSafeCount,
  knownEventTypes,
  parseHeaderRecord,
} from "./records.js";

/** Defaults, the Go SDK's (bus/store.go, bus/stream.go). */
export const DefaultRetryMaxElapsedMs = 30_000;
export const DefaultAttemptTimeoutMs = 2_000;
export const DefaultLeaseTtlMs = 15_000;
export const DefaultDuplicatesMs = 120_000;
export const DefaultAtomicMin = 32;
const DefaultCloseTimeoutMs = 10_000;

/**
 * connectDefaults are the Go SDK's connection settings (bus.ConnectOptions)
 * for a long-running harness: reconnect forever, 250 ms apart, and leave a
 * server that stopped answering after 2 to 3 pings 2 s apart. Options given
 * override them.
 */
export const connectDefaults: ConnectionOptions = { maxReconnectAttempts: -1, reconnectTimeWait: 250, pingInterval: 2000, maxPingOut: 2 };

/**
 * Options of createSessionPersistence: nats.js's connection options
 * (servers, user/pass, token, authenticator, tls, name, …) plus dshq's.
 */
export interface SessionPersistenceOptions extends ConnectionOptions {
  /**
   * The tenant whose namespace the backend writes (dsh.log.<tenant>.<token>),
   * with a credential the server confines to it; absent = the untenanted
   * namespace (the trusted user, single-tenant setups). A tenant's
   * connection uses the inbox prefix _INBOX_<tenant> (set for you).
   */
  tenant?: string;
  /** An open connection to use instead of connecting (the backend does not close it). */
  connection?: NatsConnection;
  /** The session stream (default DSH_SESSIONS) and lease bucket (default DSH_LEASES), as provisioned. */
  stream?: string;
  leaseBucket?: string;
  /** The lease TTL: a tenant cannot read the bucket's, so it must match the deployment's (default 15 s). */
  leaseTtlMs?: number;
  /** Provisioning of the untenanted namespace: replicas (1) and duplicate window (2 min). */
  replicas?: number;
  duplicatesMs?: number;
  /** The event vocabulary reads and write opens accept (default the original's, knownEventTypes). */
  knownEventTypes?: ReadonlySet<string> | ((type: string) => boolean);
  /** Retries of transient failures per operation (30 s), each attempt bounded (2 s). */
  retryMaxElapsedMs?: number;
  attemptTimeoutMs?: number;
  /** The smallest append published as one atomic batch (32; 0 = never). */
  atomicMin?: number;
}

/** What stat and list report (docs/sdk.md#stat-and-list, bus.Snapshot). */
export interface SessionSnapshot {
  header: SessionHeader;
  inheritedEventCount: number;
  /** Opaque within this backend and id: the stream sequence of the session's last record ("0" before materialisation). */
  revision: string;
  /** The number of stored events. */
  eventCount: number;
  /** Whether a writer holds the session's write lease. */
  live: boolean;
}

export type SessionAccess = "read" | "write";

export interface SignalOptions {
  signal?: AbortSignal;
}

/** SessionHandle is the seam's per-session handle (docs/sdk.md#the-persistence-seam). */
export interface SessionHandle extends AsyncDisposable {
  readonly id: string;
  readonly header: SessionHeader;
  readonly inheritedEventCount: number;
  readonly access: SessionAccess;
  /** The stream sequence of the session's last record this handle knows: pass it as minGeneration to read your writes. */
  readonly generation: number;
  read(offset?: number, length?: number, options?: SignalOptions): Promise<SessionEvent[]>;
  append(events: readonly SessionEvent[], options?: SignalOptions): Promise<void>;
  flush(options?: SignalOptions): Promise<void>;
  close(): Promise<void>;
}

/** SessionPersistence is the seam's service (ctx.sessionPersistence). */
export interface SessionPersistence extends AsyncDisposable {
  create(header: SessionHeader, options?: SignalOptions & { inheritedEventCount?: number }): Promise<SessionHandle>;
  open(id: string, access: SessionAccess, options?: SignalOptions): Promise<SessionHandle>;
  flush(options?: SignalOptions): Promise<void>;
  stat(id: string, options?: SignalOptions): Promise<SessionSnapshot | undefined>;
  list(options?: SignalOptions): Promise<SessionSnapshot[]>;
  /** The connection (owned unless passed as options.connection). */
  readonly connection: NatsConnection;
  /** Closes every write handle, then the connection when the backend opened it. */
  close(): Promise<void>;
}

/**
 * createSessionPersistence connects (or takes options.connection), checks
 * the namespace (untenanted: provisions or verifies the stream and lease
 * bucket as bus.NewStore does; a tenant: checks that both answer it) and
 * returns the backend.
 */
export async function createSessionPersistence(options: SessionPersistenceOptions = {}): Promise<SessionPersistence> {
  const tenant = options.tenant ?? "";
  if (tenant !== "") {
    const p = tenantProblem(tenant);
    if (p) throw new TypeError(`tenant: ${p}`);
    if (options.inboxPrefix !== undefined && options.inboxPrefix !== tenantInboxPrefix(tenant)) {
      throw new TypeError(`tenant ${JSON.stringify(tenant)}: inboxPrefix is ${JSON.stringify(options.inboxPrefix)}, want ${JSON.stringify(tenantInboxPrefix(tenant))}: the server delivers a tenant nothing else`);
    }
  }
  const { connection, tenant: _t, stream: _s, leaseBucket: _l, leaseTtlMs: _lt, replicas: _r, duplicatesMs: _d, knownEventTypes: _k, retryMaxElapsedMs: _re, attemptTimeoutMs: _a, atomicMin: _am, ...conn } = options;
  const owned = connection === undefined;
  const nc = connection ?? (await connect({ ...connectDefaults, ...conn, ...(tenant ? { inboxPrefix: tenantInboxPrefix(tenant) } : {}) }));
  try {
    const b = new Backend(nc, owned, options);
    await b.init();
    return b;
  } catch (err) {
    if (owned) await nc.close();
    throw err;
  }
}

type Known = (type: string) => boolean;

class Backend implements SessionPersistence {
  readonly tenant: string;
  readonly streamName: string;
  readonly bucket: string;
  readonly maxElapsedMs: number;
  readonly attemptMs: number;
  readonly atomicMin: number;
  readonly known: Known;
  leaseTtlMs: number;
  js!: JetStreamClient;
  jsm!: JetStreamManager;
  reader!: LogReader;
  kv!: LeaseKV;
  pub!: Publisher;
  /** Sessions created here and not materialised yet, by id. */
  readonly pending = new Map<string, Handle>();
  /** Open write handles (Store.flush's set). */
  readonly writers = new Set<Handle>();
  /** Lease values this backend may have left on a key with no handle holding it, by key (bus.Store.unsettled). */
  private readonly unsettled = new Map<string, { value: Uint8Array; at: number }>();
  private closed = false;

  constructor(
    readonly connection: NatsConnection,
    private readonly owned: boolean,
    o: SessionPersistenceOptions,
  ) {
    this.tenant = o.tenant ?? "";
    this.streamName = o.stream ?? SessionStream;
    this.bucket = o.leaseBucket ?? LeaseBucket;
    this.maxElapsedMs = o.retryMaxElapsedMs ?? DefaultRetryMaxElapsedMs;
    this.attemptMs = o.attemptTimeoutMs ?? DefaultAttemptTimeoutMs;
    this.atomicMin = o.atomicMin ?? DefaultAtomicMin;
    this.leaseTtlMs = o.leaseTtlMs ?? DefaultLeaseTtlMs;
    const k = o.knownEventTypes ?? knownEventTypes;
    this.known = typeof k === "function" ? k : (t) => k.has(t);
    this.opts = o;
  }
  private readonly opts: SessionPersistenceOptions;

  async init(): Promise<void> {
    const nc = this.connection;
    this.js = jetstream(nc, { timeout: this.attemptMs });
    this.jsm = await jetstreamManager(nc, { checkAPI: false, timeout: this.attemptMs });
    if (this.tenant === "") {
      const { kv, leaseTtlMs } = await retry(this.maxElapsedMs, () =>
        ensureStream(nc, this.jsm, {
          stream: this.streamName,
          leaseBucket: this.bucket,
          replicas: this.opts.replicas ?? 1,
          duplicatesMs: this.opts.duplicatesMs ?? DefaultDuplicatesMs,
          leaseTtlMs: this.leaseTtlMs,
        }),
      );
      this.leaseTtlMs = leaseTtlMs;
      this.reader = new StreamReader(this.jsm, this.streamName);
      this.kv = new JsLeases(kv);
    } else {
      this.reader = new TenantReader(nc, this.jsm, this.streamName, this.attemptMs, tenantInboxPrefix(this.tenant));
      this.kv = new TenantLeases(this.js, this.jsm, this.bucket);
      await retry(this.maxElapsedMs, async () => {
        try {
          await this.reader.last(`${namespacePrefix(this.tenant)}>`);
        } catch (err) {
          throw new Error(`stream ${this.streamName} does not answer tenant ${JSON.stringify(this.tenant)} (it must be provisioned, with allow_direct, by the trusted side): ${(err as Error).message}`, { cause: err });
        }
        try {
          await this.kv.entry(`${this.tenant}.>`);
        } catch (err) {
          throw new Error(`lease bucket ${this.bucket} does not answer tenant ${JSON.stringify(this.tenant)} (it must be provisioned by the trusted side): ${(err as Error).message}`, { cause: err });
        }
      });
    }
    this.pub = new Publisher(this.js, this.reader, this.maxElapsedMs, this.attemptMs);
  }

  subjectOf(tok: string): string {
    return namespacePrefix(this.tenant) + tok;
  }
  logKeyOf(tok: string): string {
    return logKey(this.tenant, tok);
  }
  leaseKeyOf(tok: string): string {
    return leaseKey(this.tenant, tok);
  }
  retry<T>(op: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return retry(this.maxElapsedMs, op, signal);
  }

  // ---- create ------------------------------------------------------------

  async create(header: SessionHeader, options: SignalOptions & { inheritedEventCount?: number } = {}): Promise<SessionHandle> {
    const { signal } = options;
    throwIfAborted(signal);
    if (header === null || typeof header !== "object" || Array.isArray(header)) throw new TypeError("create: header must be a plain object");
    // A deep lossless snapshot (TypeError otherwise), frozen.
    const text = stringifyJson(header, "session header");
    const h = deepFreeze(parseRecord(text) as unknown as SessionHeader);
    const p = headerProblem(h as unknown as Record<string, unknown>);
    if (p) throw new TypeError(`create session ${JSON.stringify(String(h.id))}: ${p}`);
    const id = h.id;
    const inherited = options.inheritedEventCount;
    if (inherited !== undefined && !isSafeCount(inherited)) {
      throw new TypeError(`create session ${JSON.stringify(id)}: inheritedEventCount must be a non-negative safe integer, got ${String(inherited)}`);
    }
    if (h.isSeeded && inherited === undefined) throw new TypeError(`create session ${JSON.stringify(id)}: a seeded header requires inheritedEventCount`);
    if (!h.isSeeded && inherited !== undefined && inherited !== 0) {
      throw new TypeError(`create session ${JSON.stringify(id)}: inheritedEventCount ${inherited} on a header that is not seeded`);
    }
    this.checkOpen();
    const tok = subjectToken(id);
    const hd = new Handle(this, h, inherited ?? 0, tok, "write");
    hd.headerText = encodeHeaderRecord(h, inherited ?? 0);
    if (this.pending.has(id)) throw alreadyExists(id);
    this.pending.set(id, hd); // reserved; removed again on failure
    try {
      await this.claimNew(hd, signal);
    } catch (err) {
      if (this.pending.get(id) === hd) this.pending.delete(id);
      throw err;
    }
    this.writers.add(hd);
    return hd;
  }

  private async claimNew(hd: Handle, signal?: AbortSignal): Promise<void> {
    const id = hd.id;
    if (await this.headerExists(hd.subject, signal)) throw alreadyExists(id);
    throwIfAborted(signal);
    const l = await this.acquire(id, hd.token);
    if (l === "held") throw alreadyExists(id);
    // The previous owner may have materialised and closed between the check and the claim.
    let exists: boolean;
    try {
      exists = await this.headerExists(hd.subject);
    } catch (err) {
      await this.releaseQuietly(l);
      throw err;
    }
    if (exists || signal?.aborted) {
      await this.releaseQuietly(l);
      if (exists) throw alreadyExists(id);
      throwIfAborted(signal);
    }
    hd.lease = l;
  }

  async headerExists(subject: string, signal?: AbortSignal): Promise<boolean> {
    return (await this.retry(() => this.reader.first(subject, 1), signal)) !== null;
  }

  /** acquire takes the write lease of id (token tok), or reports it held by someone else. */
  async acquire(id: string, tok: string): Promise<Lease | "held"> {
    const key = this.leaseKeyOf(tok);
    let v = this.takeUnsettled(key);
    v ??= newLeaseValue(id);
    let rev: number | "held";
    try {
      rev = await this.retry(() => claim(this.kv, key, v));
    } catch (err) {
      this.unsettle(key, v); // an attempt's create may have been stored
      throw err;
    }
    if (rev === "held") return "held";
    return new Lease(this.kv, key, v, this.leaseTtlMs, rev, this.maxElapsedMs);
  }

  /** releaseQuietly releases a lease a failed operation took; one it could not release is remembered as unsettled. */
  async releaseQuietly(l: Lease): Promise<void> {
    await l.release().catch(() => this.unsettle(l.key, l.value));
  }

  private takeUnsettled(key: string): Uint8Array | undefined {
    const u = this.unsettled.get(key);
    this.unsettled.delete(key);
    return u && Date.now() - u.at < this.leaseTtlMs ? u.value : undefined;
  }

  unsettle(key: string, value: Uint8Array): void {
    const now = Date.now();
    for (const [k, u] of this.unsettled) if (now - u.at >= this.leaseTtlMs) this.unsettled.delete(k);
    this.unsettled.set(key, { value, at: now });
  }

  // ---- open --------------------------------------------------------------

  async open(id: string, access: SessionAccess, options: SignalOptions = {}): Promise<SessionHandle> {
    const { signal } = options;
    throwIfAborted(signal);
    if (access !== "read" && access !== "write") {
      throw new TypeError(`open session ${JSON.stringify(id)}: access must be "read" or "write", got ${JSON.stringify(access)}`);
    }
    const idp = sessionIdProblem(id);
    if (idp) throw new TypeError(`open session: ${idp}`);
    this.checkOpen();
    const tok = subjectToken(id);
    const p = this.pending.get(id);
    if (p) {
      if (access === "write") throw alreadyOwned(id);
      return p.readView();
    }
    const { header, inherited, seq } = await this.loadHeader(id, tok, signal);
    const hd = new Handle(this, header, inherited, tok, access);
    hd.materialised = true;
    hd.lastStreamSeq = seq;
    hd.headerSeq = seq;
    if (access === "read") return hd;
    throwIfAborted(signal);
    const l = await this.acquire(id, tok);
    if (l === "held") throw alreadyOwned(id);
    hd.lease = l;
    try {
      throwIfAborted(signal);
      await hd.loadForWrite(signal);
    } catch (err) {
      await this.releaseQuietly(l);
      throw err;
    }
    this.writers.add(hd);
    return hd;
  }

  /** loadHeader reads and validates a session's header record. */
  async loadHeader(id: string, tok: string, signal?: AbortSignal): Promise<{ header: SessionHeader; inherited: number; seq: number; count?: number }> {
    const m = await this.retry(() => this.reader.first(this.subjectOf(tok), 1), signal);
    throwIfAborted(signal);
    if (!m) throw new SessionPersistenceNotFoundError(`session ${JSON.stringify(id)} not found`, { sessionId: id });
    let rec: ReturnType<typeof parseHeaderRecord>;
    try {
      rec = parseHeaderRecord(decodeRecord(m.data));
    } catch (err) {
      if (err instanceof HeaderRecordError && err.unsupported) {
        throw new SessionFormatUnsupportedError(`stored session ${JSON.stringify(id)}: ${err.message}`, { sessionId: id, cause: err });
      }
      throw new SessionPersistenceCorruptionError(`stored session ${JSON.stringify(id)} failed validation: ${(err as Error).message}`, { sessionId: id, cause: err });
    }
    if (rec.header.id !== id) {
      throw new SessionPersistenceCorruptionError(`stored session identity mismatch: requested ${JSON.stringify(id)}, header has ${JSON.stringify(rec.header.id)}`, { sessionId: id });
    }
    return { header: deepFreeze(rec.header), inherited: rec.inheritedEventCount, seq: m.seq };
  }

  // ---- stat, list, flush ---------------------------------------------------

  async stat(id: string, options: SignalOptions = {}): Promise<SessionSnapshot | undefined> {
    const { signal } = options;
    throwIfAborted(signal);
    const idp = sessionIdProblem(id);
    if (idp) throw new TypeError(`stat session: ${idp}`);
    this.checkOpen();
    const p = this.pending.get(id);
    if (p) return p.snapshot();
    const tok = subjectToken(id);
    let hdr: Awaited<ReturnType<Backend["loadHeader"]>>;
    try {
      hdr = await this.loadHeader(id, tok, signal);
    } catch (err) {
      if (err instanceof SessionPersistenceNotFoundError) return undefined;
      throw err;
    }
    return this.snapshotOf(hdr.header, hdr.inherited, tok, undefined, signal);
  }

  private async snapshotOf(header: SessionHeader, inherited: number, tok: string, known: number | undefined, signal?: AbortSignal): Promise<SessionSnapshot> {
    const subject = this.subjectOf(tok);
    // The count first: a record appended in between makes the revision newer than the count, never the count ahead.
    const count = known ?? (await this.retry(() => this.reader.count(subject), signal));
    const last = await this.retry(() => this.reader.last(subject), signal);
    const live = await this.live(tok, signal);
    throwIfAborted(signal);
    return { header: cloneJson(header as unknown as JsonValue) as unknown as SessionHeader, inheritedEventCount: inherited, revision: String(last?.seq ?? 0), eventCount: Math.max(0, count - 1), live };
  }

  private async live(tok: string, signal?: AbortSignal): Promise<boolean> {
    const e = await this.retry(() => this.kv.entry(this.leaseKeyOf(tok)), signal);
    return e !== null && e.put;
  }

  async list(options: SignalOptions = {}): Promise<SessionSnapshot[]> {
    const { signal } = options;
    throwIfAborted(signal);
    this.checkOpen();
    const prefix = namespacePrefix(this.tenant);
    const subjects = await this.retry(() => this.reader.subjects(prefix), signal);
    const out: SessionSnapshot[] = [];
    const seen = new Set<string>();
    for (const [subject, count] of subjects) {
      throwIfAborted(signal);
      const tok = subject.slice(prefix.length);
      if (tok.includes(".")) continue;
      const id = parseSubjectToken(tok);
      if (id === undefined) continue;
      let hdr: Awaited<ReturnType<Backend["loadHeader"]>>;
      try {
        hdr = await this.loadHeader(id, tok, signal);
      } catch (err) {
        if (err instanceof SessionPersistenceCorruptionError || err instanceof SessionFormatUnsupportedError || err instanceof SessionPersistenceNotFoundError) continue;
        throw err;
      }
      out.push(await this.snapshotOf(hdr.header, hdr.inherited, tok, count, signal));
      seen.add(id);
    }
    for (const [id, p] of this.pending) if (!seen.has(id)) out.push(p.snapshot());
    return out;
  }

  async flush(options: SignalOptions = {}): Promise<void> {
    throwIfAborted(options.signal);
    const hs = [...this.writers];
    const failed: { id: string; err: unknown }[] = [];
    await Promise.all(
      hs.map(async (h) => {
        try {
          await h.flush(options);
        } catch (err) {
          if (!(err instanceof SessionHandleClosedError)) failed.push({ id: h.id, err });
        }
      }),
    );
    throwIfAborted(options.signal);
    if (failed.length > 0) {
      failed.sort((a, b) => (a.id < b.id ? -1 : 1));
      throw new AggregateError(
        failed.map((f) => f.err),
        `flush failed for ${failed.length} session(s): ${failed.map((f) => `${JSON.stringify(f.id)}: ${(f.err as Error).message}`).join("; ")}`,
      );
    }
  }

  forget(h: Handle): void {
    this.writers.delete(h);
    if (this.pending.get(h.id) === h) this.pending.delete(h.id);
  }

  materialised(h: Handle): void {
    if (this.pending.get(h.id) === h) this.pending.delete(h.id);
  }

  private checkOpen(): void {
    if (this.closed) throw new Error("session persistence is closed");
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.writers].map((h) => h.close()));
    if (this.owned) await this.connection.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

function alreadyExists(id: string): SessionAlreadyExistsError {
  return new SessionAlreadyExistsError(`session ${JSON.stringify(id)} already exists`, { sessionId: id });
}
function alreadyOwned(id: string): SessionAlreadyOwnedError {
  return new SessionAlreadyOwnedError(`session ${JSON.stringify(id)} is already owned by another writer`, { sessionId: id });
}

const dec = new TextDecoder("utf-8", { fatal: true });
const enc = new TextEncoder();

function decodeRecord(b: Uint8Array): string {
  return dec.decode(b);
}

/** Mutex serialises a handle's operations. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const r = this.tail.then(fn);
    this.tail = r.then(
      () => {},
      () => {},
    );
    return r;
  }
}

/** An append whose outcome is unknown (its publish failed after retries): settled by the next write. */
interface Unsure {
  recs: OutRecord[];
  events: SessionEvent[];
  off: number;
}

class Handle implements SessionHandle {
  readonly subject: string;
  readonly key: string;
  headerText = "";
  materialised = false;
  lease: Lease | undefined;
  lastStreamSeq = 0;
  headerSeq = 0;
  /** The number of events stored (write handle) or validated so far (read handle). */
  nextSeq = 0;
  /** index[i] is the stream sequence of event i, 0 where not known exactly. */
  index: number[] = [];
  private closed = false;
  private unsure: Unsure | undefined;
  private readonly mu = new Mutex();

  constructor(
    private readonly b: Backend,
    readonly header: SessionHeader,
    readonly inheritedEventCount: number,
    readonly token: string,
    readonly access: SessionAccess,
  ) {
    this.subject = b.subjectOf(token);
    this.key = b.logKeyOf(token);
  }

  get id(): string {
    return this.header.id;
  }

  get generation(): number {
    return this.lastStreamSeq;
  }

  readView(): Handle {
    const r = new Handle(this.b, this.header, this.inheritedEventCount, this.token, "read");
    r.headerText = this.headerText;
    return r;
  }

  snapshot(): SessionSnapshot {
    return {
      header: cloneJson(this.header as unknown as JsonValue) as unknown as SessionHeader,
      inheritedEventCount: this.inheritedEventCount,
      revision: String(this.lastStreamSeq),
      eventCount: this.nextSeq,
      live: !this.closed,
    };
  }

  private closedErr(op: string): SessionHandleClosedError {
    return new SessionHandleClosedError(`session ${JSON.stringify(this.id)}: ${op} on a closed handle`, { sessionId: this.id });
  }

  private async writable(op: string, signal?: AbortSignal): Promise<void> {
    if (this.closed) throw this.closedErr(op);
    if (this.access !== "write") {
      throw new SessionReadOnlyError(`session ${JSON.stringify(this.id)} is open read-only: ${op} refused`, { sessionId: this.id });
    }
    throwIfAborted(signal);
    if (!this.lease || !(await this.lease.ensure())) {
      throw new SessionOwnershipLostError(`session ${JSON.stringify(this.id)}: write ownership lost (the lease lapsed and another writer took it)`, { sessionId: this.id });
    }
    if (this.unsure) await this.resync();
  }

  append(events: readonly SessionEvent[], options: SignalOptions = {}): Promise<void> {
    // Checked before queueing, so a closed or read-only handle refuses at once and nothing is stored.
    if (this.closed) return Promise.reject(this.closedErr("append"));
    return this.mu.run(async () => {
      const { signal } = options;
      await this.writable("append", signal);
      if (!Array.isArray(events)) throw new TypeError(`append to session ${JSON.stringify(this.id)}: events must be an array`);
      if (events.length === 0) return;
      const recs: OutRecord[] = [];
      const valid: SessionEvent[] = [];
      if (!this.materialised) recs.push({ msgId: headerMsgId(this.key), data: enc.encode(this.headerText) });
      for (let i = 0; i < events.length; i++) {
        if (!(i in events)) throw new TypeError(`append to session ${JSON.stringify(this.id)}: events is not losslessly JSON-serializable: index ${i} is a hole of a sparse array`);
        const e = events[i]!;
        const where = `append to session ${JSON.stringify(this.id)}: event at index ${i}`;
        const text = encodeEvent(e, where);
        const want = this.nextSeq + i;
        if (e.seq !== want) throw new RangeError(`append seq mismatch for ${JSON.stringify(this.id)}: expected ${want} at index ${i}, got ${String(e.seq)}`);
        const data = enc.encode(text);
        const max = this.b.connection.info?.max_payload ?? 1 << 20;
        if (data.length + 1024 > max) {
          throw new RangeError(`${where} is ${data.length} bytes, over the bus's maximum payload of ${max - 1024} bytes`);
        }
        recs.push({ msgId: eventMsgId(this.key, want), data });
        valid.push(e);
      }
      throwIfAborted(signal);
      await this.publish(recs, valid, signal);
    });
  }

  /** publish stores recs after the handle's last record and advances the books for every record stored. */
  private async publish(recs: OutRecord[], events: SessionEvent[], signal?: AbortSignal): Promise<void> {
    const off = recs.length - events.length;
    let done = 0;
    try {
      await this.b.pub.publish(this.subject, this.lastStreamSeq, recs, this.b.atomicMin, (i, seq) => {
        this.commit(off, events, i, seq);
        done = i + 1;
      }, signal);
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      if (err instanceof ConflictError && err.duplicate) {
        throw new SessionMsgIdInUseError(
          `append to session ${JSON.stringify(this.id)}: the stream already holds a record with msg id ${recs[done]?.msgId} (or another of this append's) that is not this session's: nothing was stored; the id is free again after the stream's duplicate window`,
          { sessionId: this.id, cause: err },
        );
      }
      if (err instanceof ConflictError) {
        this.lease?.markLost();
        throw new SessionOwnershipLostError(`session ${JSON.stringify(this.id)}: write ownership lost: the log changed under this writer (${err.message})`, { sessionId: this.id, cause: err });
      }
      // The rest may or may not be stored: find out before the next write.
      this.unsure = { recs: recs.slice(done), events: events.slice(Math.max(0, done - off)), off: Math.max(0, off - done) };
      throw new Error(`append to session ${JSON.stringify(this.id)}: ${(err as Error).message}`, { cause: err });
    }
  }

  private commit(off: number, events: SessionEvent[], i: number, seq: number): void {
    if (i < off) {
      this.materialised = true;
      this.headerSeq = seq;
      this.b.materialised(this);
    } else {
      void events[i - off];
      this.nextSeq++;
      this.index.push(seq);
    }
    if (seq !== 0) this.lastStreamSeq = seq;
  }

  /** resync settles an append whose outcome was unknown from the subject's last record. */
  private async resync(): Promise<void> {
    const pa = this.unsure!;
    const last = await this.b.retry(() => this.b.reader.last(this.subject));
    this.unsure = undefined;
    if (!last || last.seq === this.lastStreamSeq) return;
    for (let j = 0; j < pa.recs.length; j++) {
      const r = pa.recs[j]!;
      if (r.msgId === last.msgId && Buffer.from(r.data).equals(Buffer.from(last.data))) {
        for (let i = 0; i <= j; i++) this.commit(pa.off, pa.events, i, i === j ? last.seq : 0);
        return;
      }
    }
    this.lease?.markLost();
    throw new SessionOwnershipLostError(`session ${JSON.stringify(this.id)}: write ownership lost: the log changed under this writer`, { sessionId: this.id });
  }

  flush(options: SignalOptions = {}): Promise<void> {
    if (this.closed) return Promise.reject(this.closedErr("flush"));
    return this.mu.run(async () => {
      await this.writable("flush", options.signal);
      if (this.materialised) return;
      await this.publish([{ msgId: headerMsgId(this.key), data: enc.encode(this.headerText) }], [], options.signal);
    });
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return this.mu.run(async () => {
      if (this.access !== "write") return;
      this.b.forget(this);
      const l = this.lease;
      if (!l) return;
      const t = new Promise<void>((r) => setTimeout(r, DefaultCloseTimeoutMs).unref());
      await Promise.race([this.b.releaseQuietly(l), t]);
    });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  read(offset = 0, length?: number, options: SignalOptions = {}): Promise<SessionEvent[]> {
    if (this.closed) return Promise.reject(this.closedErr("read"));
    if (!isSafeCount(offset)) return Promise.reject(new RangeError(`read offset must be a non-negative safe integer, got ${String(offset)}`));
    if (length !== undefined && !isSafeCount(length)) return Promise.reject(new RangeError(`read length must be a non-negative safe integer, got ${String(length)}`));
    return this.mu.run(async () => {
      if (this.closed) throw this.closedErr("read");
      const { signal } = options;
      throwIfAborted(signal);
      if (length === 0) return [];
      const last = await this.tail(signal);
      const out: SessionEvent[] = [];
      if (last === 0) return out;
      await this.scan(offset, last, (e) => {
        if (e.seq >= offset) out.push(e);
        return length === undefined || out.length < length;
      }, signal);
      throwIfAborted(signal);
      return out;
    });
  }

  /** tail is the stream sequence of the subject's last record: a write handle knows it, a read handle asks. */
  private async tail(signal?: AbortSignal): Promise<number> {
    if (this.access === "write") return this.lastStreamSeq;
    const m = await this.b.retry(() => this.b.reader.last(this.subject), signal);
    const last = m?.seq ?? 0;
    if (last > this.lastStreamSeq) this.lastStreamSeq = last;
    return Math.max(last, this.lastStreamSeq);
  }

  /** scan delivers the events from about offset through stream sequence last, validating each as it passes in log order. */
  private async scan(offset: number, last: number, fn: (e: SessionEvent) => boolean, signal?: AbortSignal): Promise<void> {
    const from = Math.min(offset, this.nextSeq, this.index.length - 1);
    let start = this.headerSeq + 1;
    let want = 0;
    for (let i = from; i >= 0; i--) {
      if (this.index[i]) {
        start = this.index[i]!;
        want = i;
        break;
      }
    }
    let skipHeader = this.headerSeq === 0;
    if (skipHeader) start = 1;
    let failure: unknown;
    await this.b.retry(async () => {
      await this.b.reader.range(this.subject, start, last, (r) => {
        if (signal?.aborted) return false;
        if (skipHeader) {
          skipHeader = false;
          this.headerSeq = r.seq;
          return true;
        }
        try {
          const e = this.accept(r.data, want, r.seq);
          want++;
          start = r.seq + 1;
          return fn(e);
        } catch (err) {
          failure = err;
          return false;
        }
      });
    }, signal);
    if (failure) throw failure;
  }

  /** accept parses and checks the record of event want at stream sequence seq, and indexes it. */
  private accept(raw: Uint8Array, want: number, seq: number): SessionEvent {
    const id = JSON.stringify(this.id);
    let e: Record<string, unknown>;
    try {
      const v = parseRecord(decodeRecord(raw));
      if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
      e = v as Record<string, unknown>;
    } catch (err) {
      throw new SessionPersistenceCorruptionError(`stored session ${id} failed validation: record at stream sequence ${seq}: ${(err as Error).message}`, { sessionId: this.id, cause: err });
    }
    const p = envelopeProblem(e);
    if (p) throw new SessionPersistenceCorruptionError(`stored session ${id} failed validation: record at stream sequence ${seq}: ${p}`, { sessionId: this.id });
    const ev = e as unknown as SessionEvent;
    if (ev.seq !== want) {
      throw new SessionPersistenceCorruptionError(`stored session ${id} failed validation: event at stream sequence ${seq} has seq ${ev.seq}, expected ${want}`, { sessionId: this.id });
    }
    if (ev.ignorable !== true && !this.b.known(ev.type)) {
      throw new SessionFormatUnsupportedError(`stored session ${id} has event type ${JSON.stringify(ev.type)} at seq ${ev.seq} that this harness does not know (not ignorable)`, { sessionId: this.id });
    }
    if (ev.type === "request/header" && (ev.data as { reason?: unknown } | null)?.reason === "fallback") {
      throw new SessionFormatUnsupportedError(`stored session ${id} has a request/header at seq ${ev.seq} with the legacy reason "fallback" that this harness no longer reads`, { sessionId: this.id });
    }
    if (ev.seq === this.nextSeq) this.nextSeq++;
    while (this.index.length <= ev.seq) this.index.push(0);
    this.index[ev.seq] = seq;
    return ev;
  }

  /** loadForWrite validates the whole stored log of a freshly opened write handle and positions it at its end. */
  async loadForWrite(signal?: AbortSignal): Promise<void> {
    const m = await this.b.retry(() => this.b.reader.last(this.subject), signal);
    const last = m?.seq ?? this.headerSeq;
    this.lastStreamSeq = last;
    if (last === this.headerSeq) return;
    await this.scan(0, last, () => true, signal);
  }
}
