// The persistence seam's contract suite, written from the original's G2
// contract (docs/sdk.md#the-persistence-seam: create, open, flush, stat, list
// and the handle, with the persistence edge cases of its tests), not from this
// backend: it runs against any backend a ContractFactory opens. Each rule is
// its own test; error texts are the original's wording where it has one. Ids are unique per test, so the tests share one store.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";

import type { SessionEvent, SessionHeader } from "../src/records.js";

/** What the suite needs of a backend: the seam's five methods. */
export interface SeamPersistence {
  create(header: SessionHeader, options?: { signal?: AbortSignal; inheritedEventCount?: number }): Promise<SeamHandle>;
  open(id: string, access: "read" | "write", options?: { signal?: AbortSignal }): Promise<SeamHandle>;
  flush(options?: { signal?: AbortSignal }): Promise<void>;
  stat(id: string, options?: { signal?: AbortSignal }): Promise<SeamSnapshot | undefined>;
  list(options?: { signal?: AbortSignal }): Promise<SeamSnapshot[]>;
}
export interface SeamHandle {
  readonly id: string;
  readonly header: SessionHeader;
  readonly inheritedEventCount: number;
  readonly access: "read" | "write";
  read(offset?: number, length?: number, options?: { signal?: AbortSignal }): Promise<SessionEvent[]>;
  append(events: readonly SessionEvent[], options?: { signal?: AbortSignal }): Promise<unknown>;
  flush(options?: { signal?: AbortSignal }): Promise<void>;
  close(): Promise<void>;
}
export interface SeamSnapshot {
  header: SessionHeader;
  revision: string;
  eventCount?: number;
  sizeBytes?: number;
}

/** A backend under test. */
export interface ContractFactory {
  /** A fresh instance on the same store: what another process or machine sees. */
  open(): Promise<SeamPersistence>;
  /** Closes an instance (its handles and connection). */
  close(p: SeamPersistence): Promise<void>;
  /** Optional: stores raw record texts (header record first) for a session, bypassing the backend's checks. */
  injectRaw?(tenantless: { id: string; records: string[] }): Promise<void>;
  /** Optional: ends an instance as a crash would (no close of its handles). */
  crash?(p: SeamPersistence): Promise<void>;
  /** How long a crashed writer's ownership outlives it (the lease TTL). */
  ownershipTtlMs?: number;
}

const uid = (what: string) => `${what}-${randomUUID()}`;

export function header(id: string, extra: Partial<SessionHeader> = {}): SessionHeader {
  return { version: 2, id, createdAt: 1788000000000, cwd: "/home/u/proj", isSeeded: false, ...extra };
}

export function userMessage(seq: number, text = `message ${seq}`): SessionEvent {
  return {
    type: "user/message",
    seq,
    time: 1788000000100 + seq,
    data: { id: `m-${seq}`, role: "user", source: { kind: "user" }, content: [{ type: "text", text }] },
    surfaceOp: "append",
  };
}

const events = (from: number, n: number) => Array.from({ length: n }, (_, i) => userMessage(from + i));

async function rejectsNamed(p: Promise<unknown>, name: string, message?: string | RegExp): Promise<Error> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof Error, `expected ${name}, got ${err === undefined ? "success" : String(err)}`);
  assert.equal(err.name, name, `expected ${name}, got ${err.name}: ${err.message}`);
  if (typeof message === "string") assert.equal(err.message, message);
  else if (message) assert.match(err.message, message);
  return err;
}

/**
 * persistenceContract registers the suite. open() instances are closed at
 * the end of each test that opened them.
 */
export function persistenceContract(name: string, f: ContractFactory): void {
  describe(`persistence contract: ${name}`, () => {
    // with runs a test body with n instances of the backend, closing them after.
    const with_ = (n: number, body: (...ps: SeamPersistence[]) => Promise<void>) => async () => {
      const ps: SeamPersistence[] = [];
      try {
        for (let i = 0; i < n; i++) ps.push(await f.open());
        await body(...ps);
      } finally {
        for (const p of ps) await f.close(p).catch(() => {});
      }
    };

    describe("create", () => {
      it("returns a write handle with the header, the inherited count and write access", with_(1, async (p) => {
        const id = uid("create");
        const h = await p.create(header(id));
        assert.equal(h.id, id);
        assert.equal(h.access, "write");
        assert.equal(h.inheritedEventCount, 0);
        assert.deepEqual(h.header, header(id));
        await h.close();
      }));

      it("deep-snapshots the header: later changes to the caller's object do not reach the handle", with_(1, async (p) => {
        const id = uid("snapshot");
        const hdr = header(id, { agentPreset: "default" });
        const h = await p.create(hdr);
        hdr.agentPreset = "changed";
        hdr.cwd = "/elsewhere";
        assert.equal(h.header.agentPreset, "default");
        assert.equal(h.header.cwd, "/home/u/proj");
        await h.close();
      }));

      it("refuses a header that is not lossless JSON with a TypeError", with_(1, async (p) => {
        const id = uid("lossy");
        await assert.rejects(p.create({ ...header(id), agentPreset: undefined } as unknown as SessionHeader), TypeError);
        await assert.rejects(p.create({ ...header(id), createdAt: 10n } as unknown as SessionHeader), TypeError);
        await assert.rejects(p.create({ ...header(id), cwd: new Date() } as unknown as SessionHeader), TypeError);
        assert.equal(await p.stat(id), undefined);
      }));

      it("refuses a createdAt that is not a non-negative safe integer with a TypeError", with_(1, async (p) => {
        for (const createdAt of [-1, 1.5, 2 ** 53, Number.NaN]) {
          await assert.rejects(p.create(header(uid("created"), { createdAt })), TypeError, `createdAt ${createdAt}`);
        }
      }));

      it("requires inheritedEventCount for a seeded header and refuses a non-zero one otherwise", with_(1, async (p) => {
        await assert.rejects(p.create(header(uid("seeded"), { isSeeded: true })));
        await assert.rejects(p.create(header(uid("unseeded")), { inheritedEventCount: 3 }));
        const h = await p.create(header(uid("seeded-ok"), { isSeeded: true }), { inheritedEventCount: 2 });
        assert.equal(h.inheritedEventCount, 2);
        await h.close();
      }));

      it("refuses an id pending in this instance: SessionAlreadyExistsError", with_(1, async (p) => {
        const id = uid("pending");
        const h = await p.create(header(id));
        await rejectsNamed(p.create(header(id)), "SessionAlreadyExistsError", `session "${id}" already exists`);
        await h.close();
      }));

      it("refuses an id materialised, in the same and in a fresh instance: SessionAlreadyExistsError", with_(2, async (p, q) => {
        const id = uid("materialised");
        const h = await p.create(header(id));
        await h.append(events(0, 1));
        await h.close();
        await rejectsNamed(p.create(header(id)), "SessionAlreadyExistsError", `session "${id}" already exists`);
        await rejectsNamed(q!.create(header(id)), "SessionAlreadyExistsError", `session "${id}" already exists`);
      }));

      it("lets exactly one of two concurrent creates of one id win (one instance)", with_(1, async (p) => {
        const id = uid("concurrent");
        const rs = await Promise.allSettled([p.create(header(id)), p.create(header(id))]);
        const won = rs.filter((r) => r.status === "fulfilled");
        const lost = rs.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
        assert.equal(won.length, 1);
        assert.equal((lost[0]!.reason as Error).name, "SessionAlreadyExistsError");
        await (won[0] as PromiseFulfilledResult<SeamHandle>).value.close();
      }));

      it("lets exactly one of two concurrent creates of one id win (two instances)", with_(2, async (p, q) => {
        const id = uid("concurrent2");
        const rs = await Promise.allSettled([p.create(header(id)), q!.create(header(id))]);
        const won = rs.filter((r) => r.status === "fulfilled");
        const lost = rs.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
        assert.equal(won.length, 1, JSON.stringify(lost.map((l) => String(l.reason))));
        assert.equal((lost[0]!.reason as Error).name, "SessionAlreadyExistsError");
        await (won[0] as PromiseFulfilledResult<SeamHandle>).value.close();
      }));

      it("makes a created session visible in-process (stat, list, read open) as soon as it resolves", with_(1, async (p) => {
        const id = uid("visible");
        const h = await p.create(header(id));
        const s = await p.stat(id);
        assert.deepEqual(s?.header, header(id));
        assert.ok((await p.list()).some((x) => x.header.id === id));
        const r = await p.open(id, "read");
        assert.deepEqual(await r.read(), []);
        await r.close();
        await h.close();
      }));

      it("materialises lazily: another instance sees a created session only after its first append or flush", with_(2, async (p, q) => {
        const a = uid("lazy-append");
        const b = uid("lazy-flush");
        const ha = await p.create(header(a));
        const hb = await p.create(header(b));
        assert.equal(await q!.stat(a), undefined);
        assert.ok(!(await q!.list()).some((x) => x.header.id === a));
        await ha.append(events(0, 1));
        await hb.flush();
        assert.deepEqual((await q!.stat(a))?.header, header(a));
        assert.deepEqual((await q!.stat(b))?.header, header(b));
        await ha.close();
        await hb.close();
      }));

      it("erases a created session closed without an append or flush: the id is free again", with_(2, async (p, q) => {
        const id = uid("erased");
        const h = await p.create(header(id));
        await h.close();
        assert.equal(await p.stat(id), undefined);
        assert.equal(await q!.stat(id), undefined);
        await rejectsNamed(p.open(id, "read"), "SessionPersistenceNotFoundError");
        const again = await q!.create(header(id));
        await again.close();
      }));

      it("treats an empty append as a no-op: it does not materialise", with_(2, async (p, q) => {
        const id = uid("empty");
        const h = await p.create(header(id));
        await h.append([]);
        assert.equal(await q!.stat(id), undefined);
        await h.close();
        assert.equal(await p.stat(id), undefined);
      }));
    });

    describe("open", () => {
      it("reports an absent id as SessionPersistenceNotFoundError for both accesses", with_(1, async (p) => {
        const id = uid("absent");
        await rejectsNamed(p.open(id, "read"), "SessionPersistenceNotFoundError", `session "${id}" not found`);
        await rejectsNamed(p.open(id, "write"), "SessionPersistenceNotFoundError", `session "${id}" not found`);
      }));

      it("refuses a write open while the creator holds the session, even before materialisation: SessionAlreadyOwnedError", with_(2, async (p, q) => {
        const id = uid("owned");
        const h = await p.create(header(id));
        await rejectsNamed(p.open(id, "write"), "SessionAlreadyOwnedError");
        await h.flush();
        await rejectsNamed(p.open(id, "write"), "SessionAlreadyOwnedError");
        await rejectsNamed(q!.open(id, "write"), "SessionAlreadyOwnedError");
        await h.close();
      }));

      it("opens for reading while another handle, in another instance, writes", with_(2, async (p, q) => {
        const id = uid("readwhile");
        const w = await p.create(header(id));
        await w.append(events(0, 2));
        const r = await q!.open(id, "read");
        assert.equal(r.access, "read");
        assert.deepEqual((await r.read()).map((e) => e.seq), [0, 1]);
        await w.append(events(2, 1));
        assert.deepEqual((await r.read()).map((e) => e.seq), [0, 1, 2]);
        await r.close();
        await w.close();
      }));

      it("continues a session after its writer closed at the stored next seq, in a fresh instance", with_(2, async (p, q) => {
        const id = uid("continue");
        const w = await p.create(header(id));
        await w.append(events(0, 3));
        await w.close();
        const w2 = await q!.open(id, "write");
        await rejectsNamed(w2.append([userMessage(0)]), "RangeError", `append seq mismatch for "${id}": expected 3 at index 0, got 0`);
        await w2.append(events(3, 2));
        assert.deepEqual((await w2.read()).map((e) => e.seq), [0, 1, 2, 3, 4]);
        await w2.close();
      }));

      it("refuses a write open of a log with an unknown event type, naming it, and the retry gives the same refusal", with_(1, async (p) => {
        const id = uid("unknown-type");
        const w = await p.create(header(id));
        await w.append([{ type: "future/thing", seq: 0, time: 1, data: {} }]); // the append side is permissive
        await w.close();
        const e1 = await rejectsNamed(p.open(id, "write"), "SessionFormatUnsupportedError");
        assert.match(e1.message, /future\/thing/);
        assert.match(e1.message, /seq 0/);
        await rejectsNamed(p.open(id, "write"), "SessionFormatUnsupportedError");
      }));

      it("refuses an unknown event type at the first read of a read handle", with_(1, async (p) => {
        const id = uid("unknown-read");
        const w = await p.create(header(id));
        await w.append([userMessage(0), { type: "future/thing", seq: 1, time: 1, data: {} }]);
        await w.close();
        const r = await p.open(id, "read");
        await rejectsNamed(r.read(), "SessionFormatUnsupportedError", /future\/thing/);
        await r.close();
      }));

      it("refuses a request/header with the legacy reason fallback at write open and read: SessionFormatUnsupportedError", with_(1, async (p) => {
        const id = uid("fallback");
        const w = await p.create(header(id));
        await w.append([{ type: "request/header", seq: 0, time: 1, data: { reason: "fallback", header: {} } }]);
        await w.close();
        await rejectsNamed(p.open(id, "write"), "SessionFormatUnsupportedError", /fallback/);
        const r = await p.open(id, "read");
        await rejectsNamed(r.read(), "SessionFormatUnsupportedError", /fallback/);
        await r.close();
      }));

      it("reads an unknown event type marked ignorable", with_(1, async (p) => {
        const id = uid("ignorable");
        const w = await p.create(header(id));
        await w.append([{ type: "future/thing", seq: 0, time: 1, data: { x: 1 }, ignorable: true }]);
        await w.close();
        const w2 = await p.open(id, "write");
        assert.deepEqual(await w2.read(), [{ type: "future/thing", seq: 0, time: 1, data: { x: 1 }, ignorable: true }]);
        await w2.close();
      }));

      it("refuses a stored header of a newer version: SessionFormatUnsupportedError asking for an upgrade", async (t) => {
        if (!f.injectRaw) return t.skip("the backend has no raw injection");
        const id = uid("newer");
        await f.injectRaw({ id, records: [JSON.stringify({ type: "session", version: 9, id, createdAt: 1, isSeeded: false })] });
        await with_(1, async (p) => {
          await rejectsNamed(p.open(id, "read"), "SessionFormatUnsupportedError", /newer harness — upgrade the harness/);
        })();
      });

      it("refuses a stored header of an older unknown version: no upgrade path", async (t) => {
        if (!f.injectRaw) return t.skip("the backend has no raw injection");
        const id = uid("older");
        await f.injectRaw({ id, records: [JSON.stringify({ type: "session", version: 1, id, createdAt: 1, isSeeded: false })] });
        await with_(1, async (p) => {
          await rejectsNamed(p.open(id, "write"), "SessionFormatUnsupportedError", /no upgrade path/);
        })();
      });

      it("refuses a stored header of another id: stored session identity mismatch", async (t) => {
        if (!f.injectRaw) return t.skip("the backend has no raw injection");
        const id = uid("identity");
        await f.injectRaw({ id, records: [JSON.stringify({ type: "session", version: 2, id: "someone-else", createdAt: 1, isSeeded: false })] });
        await with_(1, async (p) => {
          await rejectsNamed(p.open(id, "read"), "SessionPersistenceCorruptionError", /stored session identity mismatch/);
        })();
      });

      it("refuses a stored record that fails validation: SessionPersistenceCorruptionError", async (t) => {
        if (!f.injectRaw) return t.skip("the backend has no raw injection");
        const id = uid("corrupt");
        await f.injectRaw({ id, records: [JSON.stringify({ type: "session", version: 2, id, createdAt: 1, isSeeded: false }), JSON.stringify({ type: "user/message", seq: 5, time: 1, data: {} })] });
        await with_(1, async (p) => {
          const r = await p.open(id, "read");
          await rejectsNamed(r.read(), "SessionPersistenceCorruptionError", new RegExp(`stored session "${id}" failed validation`));
          await r.close();
          await rejectsNamed(p.open(id, "write"), "SessionPersistenceCorruptionError");
        })();
      });
    });

    describe("handle.read", () => {
      it("returns the events with seq >= offset, at most length; an offset at or past the end gives []", with_(1, async (p) => {
        const id = uid("window");
        const w = await p.create(header(id));
        await w.append(events(0, 5));
        assert.deepEqual((await w.read()).map((e) => e.seq), [0, 1, 2, 3, 4]);
        assert.deepEqual((await w.read(1, 2)).map((e) => e.seq), [1, 2]);
        assert.deepEqual((await w.read(3)).map((e) => e.seq), [3, 4]);
        assert.deepEqual(await w.read(5), []);
        assert.deepEqual(await w.read(99, 1), []);
        assert.deepEqual(await w.read(0, 0), []);
        await w.close();
      }));

      it("reads any window of a large batch, on the writer and in a fresh instance", with_(2, async (p, q) => {
        const id = uid("large");
        const w = await p.create(header(id));
        await w.append(events(0, 70));
        await w.append(events(70, 5));
        assert.deepEqual((await w.read(35, 3)).map((e) => e.seq), [35, 36, 37]);
        assert.deepEqual((await w.read(68, 4)).map((e) => e.seq), [68, 69, 70, 71]);
        await w.close();
        const r = await q!.open(id, "read");
        assert.deepEqual((await r.read(40, 2)).map((e) => e.seq), [40, 41]);
        assert.equal((await r.read()).length, 75);
        assert.deepEqual((await r.read(0, 1)).map((e) => e.seq), [0]);
        await r.close();
      }));

      it("refuses an offset or length that is not a non-negative safe integer", with_(1, async (p) => {
        const id = uid("badwindow");
        const w = await p.create(header(id));
        for (const [o, l] of [[-1, undefined], [0.5, undefined], [0, -1], [0, 1.5], [2 ** 53, undefined]] as const) {
          await assert.rejects(w.read(o, l), /non-negative safe integer/, `read(${o}, ${l})`);
        }
        await w.close();
      }));

      it("returns the stored values exactly (deep-equal to what was appended)", with_(2, async (p, q) => {
        const id = uid("values");
        const evs: SessionEvent[] = [
          { type: "user/message", seq: 0, time: 0, data: { id: "m", role: "user", source: { kind: "user" }, content: [{ type: "text", text: "中文 \u2028 <b>&amp; \"q\" \\ \ud83d\ude00" }], n: [1, 2.5, -3, 1e21, 0.1] }, surfaceOp: "append" },
          { type: "turn/start", seq: 1, time: -5, data: { nested: { deep: [[], {}, null, true, false] } } },
        ];
        const w = await p.create(header(id));
        await w.append(evs);
        await w.close();
        const r = await q!.open(id, "read");
        assert.deepEqual(await r.read(), evs);
        await r.close();
      }));

      it("sees the write handle's own appends and never an older state than an earlier read", with_(1, async (p) => {
        const id = uid("monotonic");
        const w = await p.create(header(id));
        const r = await p.open(id, "read");
        await w.append(events(0, 1));
        assert.equal((await w.read()).length, 1);
        const seen: number[] = [];
        for (let i = 1; i <= 4; i++) {
          await w.append(events(i, 1));
          seen.push((await r.read()).length);
        }
        assert.deepEqual(seen, [2, 3, 4, 5]);
        await r.close();
        await w.close();
      }));
    });

    describe("handle.append", () => {
      it("refuses a replayed batch with the seq mismatch error and stores nothing", with_(1, async (p) => {
        const id = uid("replay");
        const w = await p.create(header(id));
        await w.append(events(0, 3));
        await rejectsNamed(w.append(events(1, 2)), "RangeError", `append seq mismatch for "${id}": expected 3 at index 0, got 1`);
        assert.equal((await w.read()).length, 3);
        await w.close();
      }));

      it("refuses a gapped batch with the seq mismatch error naming the index, and stores nothing of it", with_(1, async (p) => {
        const id = uid("gap");
        const w = await p.create(header(id));
        await w.append(events(0, 3));
        await rejectsNamed(w.append([userMessage(3), userMessage(5)]), "RangeError", `append seq mismatch for "${id}": expected 4 at index 1, got 5`);
        assert.equal((await w.read()).length, 3);
        await w.append(events(3, 1));
        await w.close();
      }));

      it("refuses data that is not lossless JSON with a TypeError and stores nothing", with_(2, async (p, q) => {
        const id = uid("lossless");
        const w = await p.create(header(id));
        const cyclic: Record<string, unknown> = {};
        cyclic.self = cyclic;
        // eslint-disable-next-line no-sparse-arrays
        const sparse = [1, , 3];
        for (const bad of [Number.NaN, Infinity, -0, undefined, 5n, new Date(0), new Map(), cyclic, sparse, () => 1, Symbol("s")]) {
          await assert.rejects(
            w.append([userMessage(0), { type: "x/y", seq: 1, time: 1, data: { bad } as never }]),
            (e: Error) => e instanceof TypeError && /not losslessly JSON-serializable/.test(e.message),
            `data ${String(typeof bad === "symbol" ? "symbol" : bad)}`,
          );
        }
        assert.deepEqual(await w.read(), []);
        assert.equal(await q!.stat(id), undefined, "nothing materialised");
        await w.close();
      }));

      it("stores unknown event types verbatim: the append side is permissive about vocabulary", with_(1, async (p) => {
        const id = uid("permissive");
        const w = await p.create(header(id));
        await w.append([{ type: "plugin/new", seq: 0, time: 3, data: { a: 1 }, ignorable: true }]);
        assert.deepEqual(await w.read(), [{ type: "plugin/new", seq: 0, time: 3, data: { a: 1 }, ignorable: true }]);
        await w.close();
      }));

      it("is refused on a read handle (SessionReadOnlyError), and the refusal mutates nothing", with_(1, async (p) => {
        const id = uid("readonly");
        const w = await p.create(header(id));
        await w.append(events(0, 1));
        const before = await p.stat(id);
        const r = await p.open(id, "read");
        await rejectsNamed(r.append(events(1, 1)), "SessionReadOnlyError");
        await rejectsNamed(r.flush(), "SessionReadOnlyError");
        assert.equal((await p.stat(id))?.revision, before?.revision);
        await w.append(events(1, 1));
        await r.close();
        await w.close();
      }));
    });

    describe("flush", () => {
      it("handle.flush materialises an empty created session: it becomes durably listable", with_(2, async (p, q) => {
        const id = uid("hflush");
        const w = await p.create(header(id));
        await w.flush();
        await w.close();
        assert.ok((await q!.list()).some((s) => s.header.id === id));
        assert.equal((await q!.stat(id))?.eventCount ?? 0, 0);
      }));

      it("the service flush flushes every write handle active at the call", with_(2, async (p, q) => {
        const a = uid("sflush-a");
        const b = uid("sflush-b");
        const ha = await p.create(header(a));
        const hb = await p.create(header(b));
        await hb.append(events(0, 1));
        await p.flush();
        assert.ok(await q!.stat(a));
        assert.ok(await q!.stat(b));
        await ha.close();
        await hb.close();
      }));

      it("counts a handle closing concurrently as flushed, and leaves read handles untouched", with_(1, async (p) => {
        const id = uid("sflush-close");
        const w = await p.create(header(id));
        await w.append(events(0, 1));
        const r = await p.open(id, "read");
        await Promise.all([w.close(), p.flush()]);
        assert.equal((await r.read()).length, 1);
        await r.close();
      }));
    });

    describe("stat and list", () => {
      it("stat of an unknown id is undefined", with_(1, async (p) => {
        assert.equal(await p.stat(uid("nobody")), undefined);
      }));

      it("stat's revision changes after an append and not with write-ownership churn", with_(1, async (p) => {
        const id = uid("revision");
        const w = await p.create(header(id));
        await w.append(events(0, 1));
        const r1 = (await p.stat(id))!.revision;
        await w.append(events(1, 1));
        const r2 = (await p.stat(id))!.revision;
        assert.notEqual(r2, r1);
        await w.close();
        const w2 = await p.open(id, "write");
        await w2.close();
        assert.equal((await p.stat(id))!.revision, r2);
      }));

      it("stat takes no ownership and reports the event count when the backend has it", with_(1, async (p) => {
        const id = uid("statcount");
        const w = await p.create(header(id));
        await w.append(events(0, 3));
        await w.close();
        const s = await p.stat(id);
        if (s?.eventCount !== undefined) assert.equal(s.eventCount, 3);
        const w2 = await p.open(id, "write");
        await w2.close();
      }));

      it("list includes this instance's created-but-unmaterialised sessions, with stat's snapshot", with_(1, async (p) => {
        const a = uid("list-pending");
        const b = uid("list-stored");
        const ha = await p.create(header(a));
        const hb = await p.create(header(b));
        await hb.append(events(0, 2));
        const l = await p.list();
        const sa = l.find((s) => s.header.id === a);
        const sb = l.find((s) => s.header.id === b);
        assert.ok(sa && sb);
        assert.deepEqual(sb, await p.stat(b));
        assert.deepEqual(sa, await p.stat(a));
        await ha.close();
        await hb.close();
      }));
    });

    describe("freshness", () => {
      it("once an append resolves, every later read on the instance observes it: other handles, stat, list", with_(1, async (p) => {
        const id = uid("fresh");
        const w = await p.create(header(id));
        const r = await p.open(id, "read");
        for (let i = 0; i < 3; i++) {
          await w.append(events(i, 1));
          assert.equal((await r.read()).length, i + 1);
          assert.equal((await p.stat(id))?.eventCount ?? i + 1, i + 1);
          const l = (await p.list()).find((s) => s.header.id === id);
          assert.equal(l?.eventCount ?? i + 1, i + 1);
        }
        await r.close();
        await w.close();
      }));
    });

    describe("close", () => {
      it("is idempotent", with_(1, async (p) => {
        const w = await p.create(header(uid("idem")));
        await w.close();
        await w.close();
      }));

      it("rejects every operation after close with SessionHandleClosedError: <op> on a closed handle", with_(1, async (p) => {
        const id = uid("closed");
        const w = await p.create(header(id));
        await w.append(events(0, 1));
        await w.close();
        await rejectsNamed(w.append(events(1, 1)), "SessionHandleClosedError", /append on a closed handle$/);
        await rejectsNamed(w.read(), "SessionHandleClosedError", /read on a closed handle$/);
        await rejectsNamed(w.flush(), "SessionHandleClosedError", /flush on a closed handle$/);
        const r = await p.open(id, "read");
        await r.close();
        await rejectsNamed(r.read(), "SessionHandleClosedError", /read on a closed handle$/);
      }));

      it("releases write ownership: another instance opens for writing", with_(2, async (p, q) => {
        const id = uid("release");
        const w = await p.create(header(id));
        await w.append(events(0, 1));
        await w.close();
        const w2 = await q!.open(id, "write");
        await w2.append(events(1, 1));
        await w2.close();
      }));

      it("is the handle's async dispose", with_(2, async (p, q) => {
        const id = uid("dispose");
        const w = (await p.create(header(id))) as SeamHandle & AsyncDisposable;
        await w.append(events(0, 1));
        await w[Symbol.asyncDispose]();
        const w2 = await q!.open(id, "write");
        await w2.close();
      }));
    });

    describe("abort signals", () => {
      const aborted = () => {
        const c = new AbortController();
        const reason = new Error("caller gave up");
        c.abort(reason);
        return { signal: c.signal, reason };
      };

      it("an aborted create rejects with the signal's reason and leaves the id free", with_(1, async (p) => {
        const id = uid("abort-create");
        const { signal, reason } = aborted();
        await assert.rejects(p.create(header(id), { signal }), (e) => e === reason);
        assert.equal(await p.stat(id), undefined);
        const h = await p.create(header(id));
        await h.close();
      }));

      it("an aborted append rejects with the signal's reason and stores nothing", with_(1, async (p) => {
        const id = uid("abort-append");
        const w = await p.create(header(id));
        const { signal, reason } = aborted();
        await assert.rejects(w.append(events(0, 2), { signal }), (e) => e === reason);
        assert.deepEqual(await w.read(), []);
        await w.append(events(0, 1));
        await w.close();
      }));

      it("aborted open, stat, list, read and flush reject with the signal's reason", with_(1, async (p) => {
        const id = uid("abort-rest");
        const w = await p.create(header(id));
        await w.append(events(0, 1));
        const { signal, reason } = aborted();
        const is = (e: unknown) => e === reason;
        await assert.rejects(p.open(id, "read", { signal }), is);
        await assert.rejects(p.stat(id, { signal }), is);
        await assert.rejects(p.list({ signal }), is);
        await assert.rejects(p.flush({ signal }), is);
        await assert.rejects(w.read(0, undefined, { signal }), is);
        await assert.rejects(w.flush({ signal }), is);
        await w.close();
      }));
    });

    describe("crashes", () => {
      it("a session that never materialised before a crash never existed", async (t) => {
        if (!f.crash) return t.skip("the backend has no crash hook");
        const id = uid("crash");
        const a = await f.open();
        await a.create(header(id));
        await f.crash(a);
        await with_(1, async (q) => {
          assert.equal(await q.stat(id), undefined);
          await rejectsNamed(q.open(id, "read"), "SessionPersistenceNotFoundError");
          // Its ownership lapses; then the id is free.
          const deadline = Date.now() + 3 * (f.ownershipTtlMs ?? 15_000) + 5_000;
          for (;;) {
            try {
              const h = await q.create(header(id));
              await h.close();
              break;
            } catch (e) {
              if ((e as Error).name !== "SessionAlreadyExistsError" || Date.now() > deadline) throw e;
              await new Promise((r) => setTimeout(r, 100)); // poll interval
            }
          }
        })();
      });

      it("a crashed writer's materialised log is continued by the next writer at the stored next seq", async (t) => {
        if (!f.crash) return t.skip("the backend has no crash hook");
        const id = uid("crash-continue");
        const a = await f.open();
        const w = await a.create(header(id));
        await w.append(events(0, 2));
        await f.crash(a);
        await with_(1, async (q) => {
          const deadline = Date.now() + 3 * (f.ownershipTtlMs ?? 15_000) + 5_000;
          let w2: SeamHandle;
          for (;;) {
            try {
              w2 = await q.open(id, "write");
              break;
            } catch (e) {
              if ((e as Error).name !== "SessionAlreadyOwnedError" || Date.now() > deadline) throw e;
              await new Promise((r) => setTimeout(r, 100)); // poll interval
            }
          }
          await w2.append(events(2, 1));
          assert.equal((await w2.read()).length, 3);
          await w2.close();
        })();
      });
    });
  });
}
