// The tests' real components: a nats-server built from go.mod's module (as
// the e2e tests build it), dshq itself, and the Go interop helper, each
// started as a process on a free port in its own temp dir.

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir, homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The repository's root (this file is clients/ts/dist/test/env.js once compiled). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
// One directory per checkout: another checkout's build never replaces a binary this one runs.
const binDir = process.env.DSHQ_TS_BIN ?? join(homedir(), ".cache", "dshq", "ts", createHash("sha256").update(repoRoot).digest("hex").slice(0, 16));

let built: Promise<void> | undefined;

/** ensureBinaries builds nats-server, dshq and dshq-interop (Go's build cache makes a rebuild cheap). */
export function ensureBinaries(): Promise<void> {
  built ??= (async () => {
    mkdirSync(binDir, { recursive: true });
    const go = (args: string[]) => run("go", args, { cwd: repoRoot, maxBuffer: 1 << 24 });
    await go(["build", "-o", join(binDir, "nats-server"), "github.com/nats-io/nats-server/v2"]);
    await go(["build", "-o", join(binDir, "dshq"), "./cmd/dshq"]);
    await go(["build", "-o", join(binDir, "dshq-interop"), "./clients/ts/interop"]);
  })();
  return built;
}

export const bin = (name: "nats-server" | "dshq" | "dshq-interop") => join(binDir, name);

/** A started process whose output is kept, stopped by stop(). */
export class Proc {
  out = "";
  private exited: Promise<number | null>;
  constructor(readonly child: ChildProcess) {
    child.stdout?.on("data", (d) => (this.out += d));
    child.stderr?.on("data", (d) => (this.out += d));
    this.exited = new Promise((r) => child.on("exit", (code) => r(code)));
  }
  /** waitFor resolves with the first match of re in the output, failing after ms. */
  waitFor(re: RegExp, ms = 60_000): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const m = this.out.match(re);
        if (m) {
          cleanup();
          resolve(m);
        }
      };
      const onExit = () => {
        cleanup();
        reject(new Error(`process exited before ${re}: ${this.out.slice(-2000)}`));
      };
      const t = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out waiting for ${re}: ${this.out.slice(-2000)}`));
      }, ms);
      const cleanup = () => {
        clearTimeout(t);
        this.child.stdout?.off("data", check);
        this.child.stderr?.off("data", check);
        this.child.off("exit", onExit);
      };
      this.child.stdout?.on("data", check);
      this.child.stderr?.on("data", check);
      this.child.once("exit", onExit);
      check();
    });
  }
  async stop(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
    await this.exited;
  }
}

export interface Server {
  url: string;
  dir: string;
  proc: Proc;
  /** restart stops the server and starts it again on the same port and store. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

/** The tenants' and the trusted user's passwords of a tenanted server. */
export const passwords = { trusted: "trusted-pw", teamA: "teamA-pw", teamB: "teamB-pw" };

/**
 * startServer runs a nats-server with JetStream (sync always, as dshq serve's
 * embedded server) on a free loopback port; with tenants, the deployment's
 * authorization: a trusted user and each tenant's generated permission block.
 */
export async function startServer(opts: { tenants?: string[] } = {}): Promise<Server> {
  await ensureBinaries();
  const dir = mkdtempSync(join(tmpdir(), "dshq-ts-"));
  let conf = `host: 127.0.0.1\nport: -1\nmax_payload: 1MB\njetstream { store_dir: ${JSON.stringify(join(dir, "js"))}\n sync_interval: always }\n`;
  if (opts.tenants?.length) {
    const users = [`{ user: trusted, password: ${passwords.trusted} }`];
    for (const t of opts.tenants) {
      const { stdout } = await run(bin("dshq"), ["tenant", "permissions", t]);
      conf += stdout + "\n";
      users.push(`{ user: ${t}, password: ${(passwords as Record<string, string>)[t]}, permissions: $TENANT_${t} }`);
    }
    conf += `authorization { users = [\n${users.join("\n")}\n] }\n`;
  }
  writeFileSync(join(dir, "nats.conf"), conf);
  const start = async () => {
    const proc = new Proc(spawn(bin("nats-server"), ["-c", join(dir, "nats.conf")], { stdio: ["ignore", "pipe", "pipe"] }));
    const m = await proc.waitFor(/Listening for client connections on (\S+:\d+)/);
    await proc.waitFor(/Server is ready/);
    return { proc, addr: m[1]! };
  };
  const first = await start();
  const s: Server = {
    url: `nats://${first.addr}`,
    dir,
    proc: first.proc,
    async restart() {
      await s.proc.stop();
      writeFileSync(join(dir, "nats.conf"), conf.replace("port: -1", `port: ${first.addr.split(":")[1]}`));
      s.proc = (await start()).proc;
    },
    async stop() {
      await s.proc.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return s;
}

/** startServe runs dshq serve (projector, dsh-query, dsh-tools) against the server, as its trusted user when it has tenants. */
export async function startServe(s: Server, opts: { trusted?: boolean } = {}): Promise<Proc> {
  const home = join(s.dir, "home");
  const args = ["serve", "--nats-url", s.url, "--home", home, "--http", "off", "--log-level", "info"];
  if (opts.trusted) args.push("--user", "trusted", "--password", passwords.trusted);
  const p = new Proc(spawn(bin("dshq"), args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, DSH_HOME: home } }));
  await p.waitFor(/dshq ready/, 120_000);
  return p;
}

/** interop runs the Go helper and returns its stdout. */
export async function interop(args: string[], input?: string): Promise<string> {
  await ensureBinaries();
  return new Promise((resolve, reject) => {
    const c = spawn(bin("dshq-interop"), args, { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    c.stdout.on("data", (d) => (out += d));
    c.stderr.on("data", (d) => (err += d));
    c.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`dshq-interop ${args[0]} exited ${code}: ${err}`))));
    c.stdin.on("error", () => {}); // a command that reads no input may exit first (EPIPE)
    c.stdin.end(input ?? "");
  });
}

/** dshq runs the dshq command and returns its stdout. */
export async function dshq(args: string[]): Promise<string> {
  await ensureBinaries();
  const { stdout } = await run(bin("dshq"), args, { maxBuffer: 1 << 26 });
  return stdout;
}

/** The shared corpus, when this clone has ../shared. */
export function sharedCorpus(): string | undefined {
  const p = resolve(repoRoot, "../shared/corpus/deepseek-harness/logs");
  return existsSync(p) ? p : undefined;
}

export { spawn };
