// The contract suite against this backend on a real nats-server: the
// untenanted namespace, and a tenant's, within the permissions a tenant gets.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";

import { createSessionPersistence, type SessionPersistence } from "../src/index.js";
import { subjectToken } from "../src/names.js";
import { persistenceContract, type ContractFactory, type SeamPersistence } from "./contract.js";
import { interop, passwords, startServer, type Server } from "./env.js";

// Short, so the crash tests wait little; long enough that a busy machine's pauses never lapse a lease.
const leaseTtlMs = 4000;

function factory(get: () => { server: Server; tenant?: string }): ContractFactory {
  const opts = () => {
    const { server, tenant } = get();
    return tenant
      ? { servers: server.url, tenant, user: tenant, pass: (passwords as Record<string, string>)[tenant], leaseTtlMs }
      : { servers: server.url, leaseTtlMs };
  };
  return {
    open: async () => (await createSessionPersistence(opts())) as unknown as SeamPersistence,
    close: (p) => (p as unknown as SessionPersistence).close(),
    crash: async (p) => {
      await (p as unknown as SessionPersistence).connection.close();
    },
    ownershipTtlMs: leaseTtlMs,
    injectRaw: async ({ id, records }) => {
      const { server, tenant } = get();
      const nc: NatsConnection = await connect({ servers: server.url, ...(tenant ? { user: "trusted", pass: passwords.trusted } : {}) });
      try {
        const tok = subjectToken(id);
        const key = tenant ? `${tenant}.${tok}` : tok;
        for (let i = 0; i < records.length; i++) {
          const h = headers();
          h.set("Nats-Msg-Id", i === 0 ? `${key}:h` : `${key}:${i - 1}`);
          await nc.request(`dsh.log.${key}`, records[i]!, { headers: h, timeout: 5000 });
        }
      } finally {
        await nc.close();
      }
    },
  };
}

describe("untenanted namespace", () => {
  let server: Server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.stop();
  });
  persistenceContract("JetStream backend, untenanted", factory(() => ({ server })));
});

describe("tenant namespace", () => {
  let server: Server;
  before(async () => {
    server = await startServer({ tenants: ["teamA", "teamB"] });
    // The trusted side provisions the stream and the lease bucket.
    const trusted = await createSessionPersistence({ servers: server.url, user: "trusted", pass: passwords.trusted, leaseTtlMs });
    await trusted.close();
  });
  after(async () => {
    await server?.stop();
  });
  persistenceContract("JetStream backend, tenant teamA", factory(() => ({ server, tenant: "teamA" })));
});

describe("provisioning", () => {
  it("an existing stream with a conflicting configuration is reported, naming every difference, and never changed", async () => {
    const server = await startServer();
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: "DSH_SESSIONS", subjects: ["dsh.log.>"], max_age: 1_000_000_000 * 3600, deny_delete: false });
      await assert.rejects(createSessionPersistence({ servers: server.url }), (e: Error) => {
        assert.equal(e.name, "SessionStreamConflictError");
        assert.match(e.message, /max_age/);
        assert.match(e.message, /deny_delete/);
        assert.match(e.message, /allow_atomic/);
        return true;
      });
      const info = await jsm.streams.info("DSH_SESSIONS");
      assert.equal(info.config.deny_delete, false, "unchanged");
    } finally {
      await nc.close();
      await server.stop();
    }
  });

  it("a stream the TS backend provisions is the Go SDK's: bus.NewStore verifies it without a conflict", async () => {
    const server = await startServer();
    try {
      await (await createSessionPersistence({ servers: server.url })).close();
      // records of an id that does not exist: NewStore's verification ran, then the lookup.
      await assert.rejects(interop(["records", "-url", server.url, "-id", "nobody"]), /session "nobody" not found/);
    } finally {
      await server.stop();
    }
  });
});

describe("this backend's append, record by record", () => {
  it("an abort during an append leaves a valid stored prefix, the handle positioned after it", async () => {
    const server = await startServer();
    const ts = await createSessionPersistence({ servers: server.url, atomicMin: 0 });
    try {
      const id = `abort-mid-${Date.now()}`;
      const w = await ts.create({ version: 2, id, createdAt: 1, isSeeded: false });
      const c = new AbortController();
      const reason = new Error("stop");
      const evs = Array.from({ length: 300 }, (_, i) => ({ type: "turn/start", seq: i, time: i, data: { turn: i } }));
      const t = setTimeout(() => c.abort(reason), 20);
      const outcome = await w.append(evs, { signal: c.signal }).then(() => "done", (e: unknown) => e);
      clearTimeout(t);
      const stored = (await w.read()).length;
      if (outcome === "done") assert.equal(stored, 300);
      else {
        assert.equal(outcome, reason);
        assert.ok(stored < 300, `${stored} stored`);
      }
      await w.append([{ type: "turn/start", seq: stored, time: 0, data: { turn: stored } }]);
      await w.close();
      const r = await ts.open(id, "read");
      assert.deepEqual((await r.read()).map((e) => e.seq), Array.from({ length: stored + 1 }, (_, i) => i));
      await r.close();
    } finally {
      await ts.close();
      await server.stop();
    }
  });
});
