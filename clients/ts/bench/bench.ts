// The TS backend's append figures beside the Go SDK's, in one run on one
// server: a nats-server (sync always) with dshq serve beside it, n one-event
// appends per SDK to a fresh session, each timed to its acknowledgement
// (append resolved) and to searchable (events.search of the event's unique
// word answered with minGeneration = the append's generation). Median and
// 99th percentile; run it with npm run bench (make bench runs it too).

import { randomUUID } from "node:crypto";

import { createSessionPersistence, createSessionQuery } from "../src/index.js";
import { interop, startServe, startServer } from "../test/env.js";

const n = Number(process.env.BENCH_N ?? 200);

function pct(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(q * (s.length - 1))]!;
}

const server = await startServer();
const serve = await startServe(server);
try {
  const ts = await createSessionPersistence({ servers: server.url });
  const q = await createSessionQuery({ servers: server.url });
  const id = `bench-ts-${randomUUID()}`;
  const h = await ts.create({ version: 2, id, createdAt: Date.now(), cwd: "/bench", isSeeded: false });
  const acked: number[] = [];
  const searchable: number[] = [];
  for (let i = 0; i < n; i++) {
    const word = `tsbench${i}x`;
    const t0 = performance.now();
    await h.append([{ type: "user/message", seq: i, time: Date.now(), data: { id: `m${i}`, role: "user", source: { kind: "user" }, content: [{ type: "text", text: word }] }, surfaceOp: "append" }]);
    acked.push(performance.now() - t0);
    const r = await q.searchEvents({ sessionId: id, query: word }, { minGeneration: h.generation, timeoutMs: 10_000 });
    if (r.items.length !== 1) throw new Error(`search ${word} found ${r.items.length} events`);
    searchable.push(performance.now() - t0);
  }
  await h.close();
  await q.close();
  await ts.close();
  const go = JSON.parse(await interop(["bench", "-url", server.url, "-n", String(n)])) as Record<string, number>;
  const row = (sdk: string, a50: number, a99: number, s50: number, s99: number) =>
    `${sdk.padEnd(28)} ${a50.toFixed(2).padStart(9)} ${a99.toFixed(2).padStart(9)} ${s50.toFixed(2).padStart(9)} ${s99.toFixed(2).padStart(9)}`;
  console.log(`append of one event, ${n} appends per SDK, nats-server sync always + dshq serve, ms`);
  console.log(`${"SDK".padEnd(28)} ${"ack p50".padStart(9)} ${"ack p99".padStart(9)} ${"srch p50".padStart(9)} ${"srch p99".padStart(9)}`);
  console.log(row("TypeScript (@dshq/harness)", pct(acked, 0.5), pct(acked, 0.99), pct(searchable, 0.5), pct(searchable, 0.99)));
  console.log(row("Go (bus)", go.ackedP50Ms!, go.ackedP99Ms!, go.searchableP50Ms!, go.searchableP99Ms!));
} finally {
  await serve.stop();
  await server.stop();
}
