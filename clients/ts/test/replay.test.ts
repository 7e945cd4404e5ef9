// deepseek-harness session logs replayed through the TS backend equal dshq
// import of the same files: the same events, byte for byte, and the same
// header (version 2 shape, inherited count). Our own fixtures
// (testdata/logs) always; the shared corpus when this clone has ../shared.

import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { createSessionPersistence, parseRecord, type SessionEvent, type SessionHeader, type SessionPersistence } from "../src/index.js";
import { parseHeaderRecord } from "../src/records.js";
import { dshq, interop, repoRoot, sharedCorpus, startServer } from "./env.js";

interface Expanded {
  file: string;
  id?: string;
  header?: SessionHeader;
  inheritedEventCount?: number;
  events?: unknown[];
  error?: string;
}

const fixtureCwd = "/tmp/dshq-fixture-ws";
const lines = (text: string) => text.split("\n").filter((l) => l !== "");

/**
 * replayDir replays every valid log of dir (the first file of each id; ids
 * repeat across upstream fixtures) through the TS backend on one server and
 * dshq import on another, and compares each session's stored records.
 */
async function replayDir(dir: string): Promise<{ sessions: number; refused: number }> {
  const files = readdirSync(dir).filter((f) => /\.jsonl(\.zstd?)?$/.test(f)).map((f) => join(dir, f)).sort();
  const expanded = lines(await interop(["expand", "-fixture-cwd", fixtureCwd, ...files])).map((l) => JSON.parse(l) as Expanded);
  const seen = new Set<string>();
  const logs = expanded.filter((e) => !e.error && !seen.has(e.id!) && seen.add(e.id!));
  const refused = expanded.filter((e) => e.error).length;
  const a = await startServer();
  const b = await startServer();
  let ts: SessionPersistence | undefined;
  try {
    ts = await createSessionPersistence({ servers: a.url });
    for (const log of logs) {
      const events = log.events!.map((e) => parseRecord(JSON.stringify(e)) as unknown as SessionEvent);
      const h = await ts.create(log.header!, log.header!.isSeeded ? { inheritedEventCount: log.inheritedEventCount! } : {});
      await h.append(events);
      await h.flush(); // a header-only log is a materialised session too
      await h.close();
    }
    // dshq import needs a provisioned stream: the TS backend provisions it as the Go SDK does.
    await (await createSessionPersistence({ servers: b.url })).close();
    await dshq(["import", "--nats-url", b.url, "--fixture-cwd", fixtureCwd, ...logs.map((l) => l.file)]);
    for (const log of logs) {
      const [ha, ...ea] = lines(await interop(["records", "-url", a.url, "-id", log.id!]));
      const [hb, ...eb] = lines(await interop(["records", "-url", b.url, "-id", log.id!]));
      assert.deepEqual(ea, eb, `${log.file}: events`);
      assert.equal(ea.length, log.events!.length);
      const pa = parseHeaderRecord(ha!);
      const pb = parseHeaderRecord(hb!);
      assert.deepEqual(pa.header, pb.header, `${log.file}: header`);
      assert.equal(pa.inheritedEventCount, pb.inheritedEventCount, `${log.file}: inheritedEventCount`);
    }
    return { sessions: logs.length, refused };
  } finally {
    await ts?.close();
    await a.stop();
    await b.stop();
  }
}

describe("replay of deepseek-harness logs through the TS backend equals dshq import", () => {
  it("our own fixtures (testdata/logs)", async () => {
    const r = await replayDir(join(repoRoot, "testdata", "logs"));
    assert.ok(r.sessions >= 10, `${r.sessions} sessions replayed`);
    assert.ok(r.refused >= 3, "the invalid fixtures (seq gap, torn tail, versionless) are refused by both readers");
  });

  it("the shared corpus (../shared/corpus/deepseek-harness)", async (t) => {
    const dir = sharedCorpus();
    if (!dir) {
      if (process.env.CI === "true") assert.fail("../shared/corpus/deepseek-harness is missing (CI=true)");
      return t.skip("../shared/corpus/deepseek-harness is absent: the shared corpus replay is skipped");
    }
    const r = await replayDir(dir);
    t.diagnostic(`${r.sessions} sessions replayed, ${r.refused} files refused by the reader`);
    assert.ok(r.sessions >= 100, `${r.sessions} sessions replayed`);
  });
});

