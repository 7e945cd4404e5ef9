// The contract suite against this backend on a real nats-server: the
// untenanted namespace, and a tenant's, within the permissions a tenant gets.

import { after, before, describe } from "node:test";
import { connect, headers, type NatsConnection } from "@nats-io/transport-node";

import { createSessionPersistence, type SessionPersistence } from "../src/index.js";
import { subjectToken } from "../src/names.js";
import { persistenceContract, type ContractFactory, type SeamPersistence } from "./contract.js";
import { passwords, startServer, type Server } from "./env.js";

const leaseTtlMs = 2000;

function factory(get: () => { server: Server; tenant?: string }): ContractFactory {
  const opts = () => {
    const { server, tenant } = get();
    return tenant
      ? { servers: server.url, tenant, user: tenant, pass: (passwords as Record<string, string>)[tenant], leaseTtlMs }
      : { servers: server.url, leaseTtlMs, ...(server.url && get().tenant === undefined && trustedAuth(get) ? { user: "trusted", pass: passwords.trusted } : {}) };
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

let tenanted = false;
const trustedAuth = (_: unknown) => tenanted;

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
    tenanted = true;
    // The trusted side provisions the stream and the lease bucket.
    const trusted = await createSessionPersistence({ servers: server.url, user: "trusted", pass: passwords.trusted, leaseTtlMs });
    await trusted.close();
  });
  after(async () => {
    tenanted = false;
    await server?.stop();
  });
  persistenceContract("JetStream backend, tenant teamA", factory(() => ({ server, tenant: "teamA" })));
});
