// Interop with the Go SDK and dshq, both ways, on one real nats-server with
// dshq serve (projector, dsh-query, dsh-tools) beside it.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import {
  JsonNumber,
  createSessionPersistence,
  createSessionQuery,
  encodeHeaderRecord,
  parseRecord,
  rawRecordText,
  type SessionEvent,
  type SessionHeader,
  type SessionPersistence,
  type SessionQuery,
} from "../src/index.js";
import { Kvm } from "@nats-io/kv";
import { headers } from "@nats-io/transport-node";

import { type Proc, type Server, bin, dshq, interop, passwords, repoRoot, spawn, startServe, startServer } from "./env.js";

const lines = (text: string) => text.split("\n").filter((l) => l !== "");
const fixture = (name: string) => lines(readFileSync(join(repoRoot, "testdata", name), "utf8"));

/** The fixture's header and events, with a fresh id (the events name no id). */
function session(name: string, id: string, parent?: string): { header: SessionHeader; events: SessionEvent[]; text: string[] } {
  const [h, ...evs] = fixture(name);
  const header = { ...(parseRecord(h!) as unknown as SessionHeader), id, ...(parent ? { parentSession: parent } : {}) };
  delete (header as { type?: string }).type;
  const events = evs.map((l) => parseRecord(l) as unknown as SessionEvent);
  return { header, events, text: [encodeHeaderRecord(header, 0), ...evs] };
}

/** Records a double cannot hold, exact number spellings, escapes and key orders that JSON.parse would not keep. */
const lossyLines = (from: number) => [
  `{"type":"todo/write","seq":${from},"time":1788000000200,"data":{"big":12345678901234567890,"exact":1.50,"exp":1E5,"esc":"\\u00e9\\/\\u2028","2":"integer key after","1":"first"}}`,
  `{"type":"todo/write","seq":${from + 1},"time":1788000000201,"data":{"todos":[{"id":"t","content":"x","status":"pending"}],"n":9007199254740993}}`,
];

/** freeUntil removes id's lease key (a lapse), again every 100 ms (a poll) until done() holds, for at most 20 s. */
async function freeUntil(p: SessionPersistence, id: string, done: () => boolean): Promise<void> {
  const kv = await new Kvm(p.connection).open("DSH_LEASES");
  const deadline = Date.now() + 20_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`the Go writer did not take ${id}`);
    await kv.delete(id);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("interop with the Go SDK and dshq", () => {
  let server: Server;
  let serve: Proc;
  let ts: SessionPersistence;
  let q: SessionQuery;

  before(async () => {
    server = await startServer();
    ts = await createSessionPersistence({ servers: server.url });
    serve = await startServe(server);
    q = await createSessionQuery({ servers: server.url });
  });
  after(async () => {
    await q?.close();
    await ts?.close();
    await serve?.stop();
    await server?.stop();
  });

  it("a session written by the TS backend reads back byte for byte through the Go SDK and dshq export", async () => {
    const id = `ts-${randomUUID()}`;
    const s = session("sample.jsonl", id);
    const h = await ts.create(s.header);
    await h.append(s.events);
    await h.close();
    assert.deepEqual(lines(await interop(["read", "-url", server.url, "-id", id])), s.text.slice(1));
    assert.deepEqual(lines(await interop(["records", "-url", server.url, "-id", id])), s.text);
    assert.deepEqual(lines(await dshq(["export", id, "--nats-url", server.url])), s.text);
  });

  it("numbers a double cannot hold, number spellings, escapes and key order survive a TS append and read", async () => {
    const id = `ts-lossless-${randomUUID()}`;
    const raw = lossyLines(0).map((l) => l.replace('', ""));
    const evs = raw.map((l) => parseRecord(l) as unknown as SessionEvent);
    const d = evs[0]!.data as Record<string, unknown>;
    assert.ok(d.big instanceof JsonNumber && d.big.text === "12345678901234567890");
    assert.ok(d.exact instanceof JsonNumber && d.exact.text === "1.50");
    const h = await ts.create({ version: 2, id, createdAt: 1, isSeeded: false });
    await h.append(evs);
    // A value built by hand with a JsonNumber is written with its exact text.
    await h.append([{ type: "todo/write", seq: 2, time: 3, data: { big: new JsonNumber("-98765432109876543210.000") } }]);
    await h.close();
    const want = [...raw, `{"type":"todo/write","seq":2,"time":3,"data":{"big":-98765432109876543210.000}}`];
    assert.deepEqual(lines(await interop(["read", "-url", server.url, "-id", id])), want);
    const r = await ts.open(id, "read");
    const back = await r.read();
    await r.close();
    assert.deepEqual(back.map((e) => rawRecordText(e)), want);
    assert.equal(((back[1]!.data as Record<string, unknown>).n as JsonNumber).text, "9007199254740993");
  });

  it("a session written by the Go SDK reads back byte for byte through the TS backend, and re-appends identically", async () => {
    const id = `go-${randomUUID()}`;
    const s = session("sample.jsonl", id);
    const evLines = [...s.text.slice(1), ...lossyLines(s.events.length).map((l) => l.replace('', ""))];
    await interop(["write", "-url", server.url], [JSON.stringify({ header: s.header }), ...evLines].join("\n") + "\n");
    const r = await ts.open(id, "read");
    const evs = await r.read();
    await r.close();
    assert.deepEqual(evs.map((e) => rawRecordText(e)), evLines);
    assert.deepEqual(r.header, s.header);
    // Replayed into another session, the records are the same bytes.
    const copy = `copy-${randomUUID()}`;
    const w = await ts.create({ ...s.header, id: copy });
    await w.append(evs);
    await w.close();
    assert.deepEqual(lines(await dshq(["export", copy, "--nats-url", server.url])).slice(1), evLines);
  });

  it("a Go writer and a TS writer racing for one session: exactly one owns it, the other is told it exists", async () => {
    const tally = { go: 0, ts: 0 };
    for (let round = 0; round < 6; round++) {
      const id = `race-${randomUUID()}`;
      const go = spawn(bin("dshq-interop"), ["race", "-url", server.url, "-id", id], { stdio: ["pipe", "pipe", "inherit"] });
      let out = "";
      go.stdout!.on("data", (d) => (out += d));
      const line = (n: number) => new Promise<string>((res) => {
        const check = () => {
          const ls = lines(out);
          if (ls.length >= n) res(ls[n - 1]!);
        };
        go.stdout!.on("data", check);
        check();
      });
      assert.equal(await line(1), "ready");
      go.stdin!.write("go\n");
      const tsResult = await ts.create({ version: 2, id, createdAt: Date.now(), cwd: "/race", isSeeded: false }).then(
        async (h) => {
          await h.flush();
          return { h, name: "owned" };
        },
        (e: Error) => ({ h: undefined, name: e.name }),
      );
      const goResult = await line(2);
      const names = [tsResult.name, goResult].sort();
      assert.deepEqual(names, ["SessionAlreadyExistsError", "owned"], `round ${round}: ts ${tsResult.name}, go ${goResult}`);
      if (tsResult.name === "owned") tally.ts++;
      else tally.go++;
      // The loser cannot take it for writing either while the winner holds it.
      if (tsResult.h) {
        const exit = new Promise((r) => go.on("exit", r));
        go.stdin!.end();
        await exit;
        await tsResult.h.close();
      } else {
        await assert.rejects(ts.open(id, "write"), { name: "SessionAlreadyOwnedError" });
        const exit = new Promise((r) => go.on("exit", r));
        go.stdin!.end();
        await exit;
        const w = await ts.open(id, "write"); // released by the Go writer's close
        await w.close();
      }
    }
    assert.equal(tally.go + tally.ts, 6);
  });

  it("a TS writer whose lease lapsed and was taken by a Go writer gets SessionOwnershipLostError, and stores nothing", async () => {
    const id = `lapse-${randomUUID()}`;
    const s = session("sample.jsonl", id);
    const w = await ts.create(s.header);
    await w.append(s.events.slice(0, 3));
    // The lease lapses (as a stalled writer's would): its key is removed,
    // again until the Go writer has it (the TS heartbeat may re-take it first).
    const go = spawn(bin("dshq-interop"), ["own", "-retry", "-url", server.url, "-id", id], { stdio: ["pipe", "pipe", "inherit"] });
    const exit = new Promise((r) => go.on("exit", r));
    let out = "";
    go.stdout!.on("data", (d) => (out += d));
    await freeUntil(ts, id, () => out.includes("ok\n"));
    await assert.rejects(w.append(s.events.slice(3, 4)), { name: "SessionOwnershipLostError" });
    await assert.rejects(w.append(s.events.slice(3, 4)), { name: "SessionOwnershipLostError" });
    go.stdin!.end();
    await exit;
    await w.close();
    const recs = lines(await interop(["records", "-url", server.url, "-id", id]));
    assert.equal(recs.length, 1 + 4, "the header, three TS events and the Go writer's one");
    assert.match(recs[4]!, /from Go/);
  });

  it("a service flush that fails for some handles is an AggregateError naming each, and the others still flush", async () => {
    const lost = `flush-lost-${randomUUID()}`;
    const ok = `flush-ok-${randomUUID()}`;
    const hl = await ts.create({ version: 2, id: lost, createdAt: 1, isSeeded: false });
    const ho = await ts.create({ version: 2, id: ok, createdAt: 1, isSeeded: false });
    // The first one's lease lapses and a Go writer creates the session meanwhile.
    const go = spawn(bin("dshq-interop"), ["race", "-retry", "-url", server.url, "-id", lost], { stdio: ["pipe", "pipe", "inherit"] });
    const exit = new Promise((r) => go.on("exit", r));
    let out = "";
    const said = (w: string) => new Promise<void>((res) => { const f = () => out.includes(w) && res(); go.stdout!.on("data", (d) => ((out += d), f())); f(); });
    await said("ready\n");
    go.stdin!.write("go\n");
    await freeUntil(ts, lost, () => out.includes("owned\n"));
    const err = await ts.flush().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof AggregateError, String(err));
    assert.equal(err.errors.length, 1);
    assert.equal((err.errors[0] as Error).name, "SessionOwnershipLostError");
    assert.match(err.message, new RegExp(`"${lost}"`));
    const other = await createSessionPersistence({ servers: server.url });
    assert.ok(await other.stat(ok), "the other handle flushed");
    await other.close();
    go.stdin!.end();
    await exit;
    await hl.close();
    await ho.close();
  });

  it("a record whose msg id another writer took on another subject is SessionMsgIdInUseError: nothing stored, the handle still the owner", async () => {
    const id = `msgid-${randomUUID()}`;
    const h = headers();
    h.set("Nats-Msg-Id", `${id}:h`);
    await ts.connection.request(`dsh.log.squatter-${randomUUID()}`, "{}", { headers: h, timeout: 5000 });
    const w = await ts.create({ version: 2, id, createdAt: 1, isSeeded: false });
    await assert.rejects(w.append(session("fork.jsonl", id).events), { name: "SessionMsgIdInUseError" });
    const other = await createSessionPersistence({ servers: server.url });
    assert.equal(await other.stat(id), undefined, "nothing stored");
    await assert.rejects(other.open(id, "write"), { name: "SessionPersistenceNotFoundError" });
    await other.close();
    await w.close();
  });

  it("ids that are not their own subject token (spaces, dots, non-ASCII, long) name the same session in both SDKs", async () => {
    for (const id of [`a.b c/ü-${randomUUID()}`, `~x>${randomUUID()}`, "x".repeat(201)]) {
      const s = session("fork.jsonl", id);
      const w = await ts.create(s.header);
      await w.append(s.events);
      await w.close();
      assert.deepEqual(lines(await interop(["records", "-url", server.url, "-id", id])), s.text, id);
      assert.ok((await ts.list()).some((x) => x.header.id === id));
    }
  });

  it("the TS backend's sessions are searchable, traceable and visible to the tools", async () => {
    const parent = `ts-parent-${randomUUID()}`;
    const child = `ts-child-${randomUUID()}`;
    const p = session("sample.jsonl", parent);
    const c = session("fork.jsonl", child, parent);
    const hp = await ts.create(p.header);
    await hp.append(p.events);
    const hc = await ts.create(c.header);
    await hc.append(c.events);
    const gen = Math.max(hp.generation, hc.generation);
    // live while held
    const stat = await q.statSession({ sessionId: parent }, { minGeneration: gen });
    assert.equal(stat.session.live, true);
    assert.equal(stat.eventCount, p.events.length);
    await hp.close();
    await hc.close();

    const hits = await q.searchEvents({ sessionId: parent, query: "retry budget" }, { minGeneration: gen });
    assert.ok(hits.items.length > 0);
    assert.equal(hits.session.id, parent);
    const found = await q.searchSessions({ query: "retry budget", sessionFilters: [{ kind: "id", values: [parent, child] }] }, { minGeneration: gen });
    assert.deepEqual(found.items.map((i) => i.header.id).sort(), [child, parent].sort());
    const trace = await q.traceSession({ sessionId: parent }, { minGeneration: gen });
    assert.deepEqual(trace.descendants.map((d) => d.session.header.id), [child]);
    const read = await q.readSession({ sessionId: parent }, { minGeneration: gen });
    assert.deepEqual(read.events.map((e) => e.seq), p.events.map((e) => e.seq));
    await assert.rejects(q.readSession({ sessionId: `nobody-${randomUUID()}` }), { name: "SessionQueryError", code: "SESSION_QUERY_SESSION_NOT_FOUND" });

    const list = await q.tools.list();
    assert.deepEqual(list.tools.map((t) => t.name).sort(), ["session_event_read", "session_event_search", "session_event_trace", "session_search", "session_trace"]);
    const res = await q.tools.call("session_search", { query: "retry budget" }, { caller: { session: child }, minGeneration: gen });
    assert.equal(res.isError, false, res.text);
    assert.match(res.text, new RegExp(`Session ${parent}`));
    const tr = await q.tools.call("session_trace", {}, { caller: { session: child }, minGeneration: gen });
    assert.equal(tr.isError, false, tr.text);
    assert.match(tr.text, new RegExp(parent));
    // Paging follows cursors; a bad request is a typed error with the protocol's code.
    const ids: string[] = [];
    for await (const r of q.all((cursor) => q.filterSessions({ filters: [{ kind: "id", values: [parent, child] }], limit: 1, cursor }, { minGeneration: gen }))) {
      ids.push(r.header.id);
    }
    assert.deepEqual(ids.sort(), [child, parent].sort());
    await assert.rejects(q.listSessions({ limit: -1 }), { name: "SessionQueryError", code: "SESSION_QUERY_INVALID_LIMIT" });
    await assert.rejects(q.searchSessions({ query: "  " }), { name: "SessionQueryError", code: "SESSION_QUERY_INVALID_QUERY" });
    // Bound to the child's session, as a harness mounts them.
    const bound = await q.tools.bind({ session: child }, { minGeneration: () => gen });
    assert.ok(bound.prompt.length > 0);
    const search = bound.tools.find((t) => t.name === "session_search")!;
    assert.ok(search.inputSchema && typeof search.description === "string");
    assert.match((await search.run({ query: "retry budget" })).text, new RegExp(`Session ${parent}`));
    const hidden = await q.tools.call("session_trace", { session_id: parent }, { caller: { workspace: "/elsewhere" }, minGeneration: gen });
    assert.equal(hidden.isError, true);
  });
});

describe("a server restart", () => {
  it("the backend reconnects, its lease and handle survive, and the next append continues the log", async () => {
    const server = await startServer();
    const ts = await createSessionPersistence({ servers: server.url });
    try {
      const id = `restart-${randomUUID()}`;
      const s = session("sample.jsonl", id);
      const w = await ts.create(s.header);
      await w.append(s.events.slice(0, 5));
      await server.restart();
      await w.append(s.events.slice(5));
      await w.close();
      assert.deepEqual(lines(await interop(["records", "-url", server.url, "-id", id])), s.text);
    } finally {
      await ts.close();
      await server.stop();
    }
  });
});

describe("interop as a tenant", () => {
  let server: Server;
  let serve: Proc;
  before(async () => {
    server = await startServer({ tenants: ["teamA", "teamB"] });
    const trusted = await createSessionPersistence({ servers: server.url, user: "trusted", pass: passwords.trusted });
    await trusted.close();
    serve = await startServe(server, { trusted: true });
  });
  after(async () => {
    await serve?.stop();
    await server?.stop();
  });

  it("a tenant's tools client calls its own tool subjects, as one of its own sessions only", async () => {
    const a = await createSessionPersistence({ servers: server.url, tenant: "teamA", user: "teamA", pass: passwords.teamA });
    const qa = await createSessionQuery({ servers: server.url, tenant: "teamA", user: "teamA", pass: passwords.teamA });
    const qb = await createSessionQuery({ servers: server.url, tenant: "teamB", user: "teamB", pass: passwords.teamB });
    try {
      const id = `tenant-tools-${randomUUID()}`;
      const s = session("sample.jsonl", id);
      const h = await a.create(s.header);
      await h.append(s.events);
      const gen = h.generation;
      await h.close();
      const own = await qa.tools.call("session_event_search", { query: "retry budget" }, { caller: { session: id }, minGeneration: gen });
      assert.equal(own.isError, false, own.text);
      assert.match(own.text, /retry budget/);
      const other = await qb.tools.call("session_event_search", { query: "retry budget" }, { caller: { session: id }, minGeneration: gen });
      assert.equal(other.isError, true);
      assert.equal(other.error?.code, "SESSION_QUERY_TOOL_MISSING_AGENT");
    } finally {
      await qa.close();
      await qb.close();
      await a.close();
    }
  });

  it("a tenant's TS session reads back byte for byte through a Go tenant Store and a trusted dshq export --tenant, and is not another tenant's", async () => {
    const id = `tenant-${randomUUID()}`;
    const s = session("sample.jsonl", id);
    const a = await createSessionPersistence({ servers: server.url, tenant: "teamA", user: "teamA", pass: passwords.teamA });
    const b = await createSessionPersistence({ servers: server.url, tenant: "teamB", user: "teamB", pass: passwords.teamB });
    try {
      const h = await a.create(s.header);
      await h.append(s.events);
      await h.close();
      const goArgs = ["-url", server.url, "-tenant", "teamA", "-user", "teamA", "-password", passwords.teamA, "-id", id];
      assert.deepEqual(lines(await interop(["read", ...goArgs])), s.text.slice(1));
      assert.deepEqual(lines(await dshq(["export", id, "--nats-url", server.url, "--user", "trusted", "--password", passwords.trusted, "--tenant", "teamA"])), s.text);
      assert.equal(await b.stat(id), undefined);
      assert.ok(!(await b.list()).some((x) => x.header.id === id));
      await assert.rejects(b.open(id, "read"), { name: "SessionPersistenceNotFoundError" });
      // A Go tenant writer, read by the TS tenant backend.
      const gid = `tenant-go-${randomUUID()}`;
      const g = session("fork.jsonl", gid);
      await interop(["write", "-url", server.url, "-tenant", "teamA", "-user", "teamA", "-password", passwords.teamA], [JSON.stringify({ header: g.header }), ...g.text.slice(1)].join("\n") + "\n");
      const r = await a.open(gid, "read");
      assert.deepEqual((await r.read()).map((e) => rawRecordText(e)), g.text.slice(1));
      await r.close();
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a tenant backend needs its inbox prefix: another one is refused before anything is sent", async () => {
    await assert.rejects(createSessionPersistence({ servers: server.url, tenant: "teamA", inboxPrefix: "_INBOX", user: "teamA", pass: passwords.teamA }), TypeError);
  });
});
