// Records of the session log (docs/protocol.md#2-the-session-log-stream): the
// header record and events, written and read as the Go SDK does
// (record/header.go, record/event.go).

import { JsonNumber, type JsonValue, parseRecord, rawRecordText, stringifyJson } from "./json.js";
import { sessionIdProblem } from "./names.js";

/** SessionHeader is the version 2 session header (docs/events-and-surfaces.md#session-headers). */
export interface SessionHeader {
  version: 2;
  id: string;
  createdAt: number;
  cwd?: string;
  parentSession?: string;
  isSeeded: boolean;
  origin?: "subagent";
  delegationDepth?: number;
  agentPreset?: string;
  /** The harness whose own session file the session was converted from (claude-code, codex); absent for a native one. */
  harness?: string;
}

/** SessionEvent is one event of a session's log (docs/events-and-surfaces.md#the-event-envelope). */
export interface SessionEvent {
  type: string;
  seq: number;
  time: number;
  data: JsonValue;
  surfaceOp?: JsonValue;
  sourceEventSeqs?: JsonValue;
  ignorable?: true;
}

/** The version this harness writes. */
export const SESSION_FORMAT_VERSION = 2;

const headerKeys = new Set([
  "version", "id", "createdAt", "cwd", "parentSession", "isSeeded", "origin", "delegationDepth", "agentPreset", "harness",
]);
const envelopeKeys = new Set(["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"]);

export function isSafeCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0 && !Object.is(v, -0);
}

const harnessRe = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/**
 * headerProblem says what is wrong with a header (as a harness passes it to
 * create, or as parsed from a version 2 record without type and
 * inheritedEventCount), or returns "".
 */
export function headerProblem(h: Record<string, unknown>): string {
  for (const k of Object.keys(h)) {
    if (!headerKeys.has(k)) return `unknown header key ${JSON.stringify(k)}`;
  }
  if (h.version !== SESSION_FORMAT_VERSION) return `header version is ${String(h.version)}, want ${SESSION_FORMAT_VERSION}`;
  const idp = sessionIdProblem(h.id);
  if (idp) return `id: ${idp}`;
  if (!isSafeCount(h.createdAt)) return `createdAt must be a non-negative safe integer, got ${String(h.createdAt)}`;
  for (const k of ["cwd", "parentSession", "agentPreset", "origin", "harness"]) {
    if (h[k] !== undefined && typeof h[k] !== "string") return `${k} must be a string`;
    if (typeof h[k] === "string" && !(h[k] as string).isWellFormed()) return `${k} is not valid UTF-8`;
  }
  if (h.cwd !== undefined && !(h.cwd as string).startsWith("/")) return `cwd must be an absolute path, got ${JSON.stringify(h.cwd)}`;
  if (h.parentSession !== undefined) {
    const p = sessionIdProblem(h.parentSession);
    if (p) return `parentSession: ${p}`;
  }
  if (typeof h.isSeeded !== "boolean") return "isSeeded must be a boolean (required in version 2)";
  if (h.origin !== undefined && h.origin !== "subagent") return `origin is ${JSON.stringify(h.origin)}, the only allowed value is "subagent"`;
  if (h.delegationDepth !== undefined && !isSafeCount(h.delegationDepth)) return "delegationDepth must be a non-negative safe integer";
  if (h.harness !== undefined && !harnessRe.test(h.harness as string)) return `harness ${JSON.stringify(h.harness)} is not a harness name`;
  return "";
}

/**
 * encodeHeaderRecord writes the header record in the Go SDK's field order
 * (record.EncodeHeader), so that one header gives the same bytes from both.
 */
export function encodeHeaderRecord(h: SessionHeader, inheritedEventCount: number): string {
  const s = JSON.stringify;
  let b = `{"type":"session","version":2,"id":${s(h.id)},"createdAt":${h.createdAt}`;
  if (h.cwd !== undefined) b += `,"cwd":${s(h.cwd)}`;
  if (h.parentSession !== undefined) b += `,"parentSession":${s(h.parentSession)}`;
  b += `,"isSeeded":${h.isSeeded}`;
  if (h.origin !== undefined) b += `,"origin":${s(h.origin)}`;
  if (h.delegationDepth !== undefined) b += `,"delegationDepth":${h.delegationDepth}`;
  if (h.agentPreset !== undefined) b += `,"agentPreset":${s(h.agentPreset)}`;
  if (h.harness !== undefined) b += `,"harness":${s(h.harness)}`;
  if (h.isSeeded) b += `,"inheritedEventCount":${inheritedEventCount}`;
  return b + "}";
}

/** HeaderRecordError is a stored header that is not one: corrupt, or a version this harness does not read. */
export class HeaderRecordError extends Error {
  constructor(
    message: string,
    readonly unsupported: boolean,
  ) {
    super(message);
  }
}

/**
 * parseHeaderRecord reads a stored header record, version 2 or 0 (read as
 * version 2: isSeeded = seedLength is present, inheritedEventCount = it), as
 * record.ParseHeader does. Any other numeric version is unsupported, worded
 * by direction.
 */
export function parseHeaderRecord(text: string): { header: SessionHeader; inheritedEventCount: number; formatVersion: number } {
  let v: JsonValue;
  try {
    v = parseRecord(text);
  } catch (e) {
    throw new HeaderRecordError(`first record is not a session header: ${(e as Error).message}`, false);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v) || v instanceof JsonNumber) {
    throw new HeaderRecordError("first record is not a session header: not an object", false);
  }
  const f = { ...v } as Record<string, unknown>;
  const bad = (m: string) => new HeaderRecordError(`first record is not a session header: ${m}`, false);
  const ver = f.version;
  if (ver === undefined) throw bad("version is missing");
  if (typeof ver !== "number" && !(ver instanceof JsonNumber)) throw bad("version is not a number");
  const n = Number(ver);
  if (n !== 0 && n !== 2) {
    const dir = n > 2 ? "a newer harness — upgrade the harness" : "an older harness and there is no upgrade path";
    throw new HeaderRecordError(`session format version ${String(ver)} is not supported (this reader reads versions 0 and 2): written by ${dir}`, true);
  }
  if (f.type !== "session") throw bad(`type is ${JSON.stringify(f.type)}, not "session"`);
  delete f.type;
  let inherited = 0;
  if (n === 0) {
    if ("isSeeded" in f || "inheritedEventCount" in f) throw bad("a version 2 field in a version 0 header");
    if (f.seedLength !== undefined && !isSafeCount(f.seedLength)) throw bad("seedLength is not a non-negative safe integer");
    f.isSeeded = f.seedLength !== undefined;
    inherited = (f.seedLength as number | undefined) ?? 0;
    delete f.seedLength;
  } else {
    if (f.inheritedEventCount !== undefined) {
      if (!isSafeCount(f.inheritedEventCount)) throw bad("inheritedEventCount is not a non-negative safe integer");
      if (f.inheritedEventCount > 0 && f.isSeeded !== true) throw bad("inheritedEventCount is set but isSeeded is false");
      inherited = f.inheritedEventCount;
    }
    delete f.inheritedEventCount;
  }
  f.version = 2;
  const p = headerProblem(f);
  if (p) throw bad(p);
  // The version 2 shape, in the field order of the type.
  const h: Record<string, unknown> = { version: 2, id: f.id, createdAt: f.createdAt };
  for (const k of ["cwd", "parentSession"]) if (f[k] !== undefined) h[k] = f[k];
  h.isSeeded = f.isSeeded;
  for (const k of ["origin", "delegationDepth", "agentPreset", "harness"]) if (f[k] !== undefined) h[k] = f[k];
  return { header: h as unknown as SessionHeader, inheritedEventCount: inherited, formatVersion: n };
}

/** envelopeProblem says what is wrong with an event's envelope, or "". */
export function envelopeProblem(e: Record<string, unknown>): string {
  for (const k of Object.keys(e)) if (!envelopeKeys.has(k)) return `unknown envelope key ${JSON.stringify(k)}`;
  if (typeof e.type !== "string" || e.type === "") return "type must be a non-empty string";
  if (!isSafeCount(e.seq)) return "seq must be a non-negative safe integer";
  if (typeof e.time !== "number" || !Number.isSafeInteger(e.time)) return "time must be a safe integer";
  if (!("data" in e) || e.data === undefined) return "data is missing";
  if ("ignorable" in e && e.ignorable !== true) return "ignorable must be absent or true";
  return "";
}

/**
 * encodeEvent returns the record text of an event a harness appends: the
 * text it was read as when it is unchanged (rawRecordText), else its lossless
 * serialization. Errors are TypeErrors (nothing is stored).
 */
export function encodeEvent(e: unknown, where: string): string {
  if (e === null || typeof e !== "object" || Array.isArray(e)) throw new TypeError(`${where} is not an event object`);
  const raw = rawRecordText(e);
  const text = raw ?? stringifyJson(e, where);
  const p = envelopeProblem(e as Record<string, unknown>);
  if (p) throw new TypeError(`${where}: ${p}`);
  return text;
}

/** The event vocabulary of the original harness (fold.KnownType). */
export const knownEventTypes: ReadonlySet<string> = new Set([
  "turn/start", "turn/end", "step/start", "step/end", "user/message", "assistant/message", "assistant/chunk",
  "assistant/attempt", "tool/call", "tool/result", "request/header", "request/context", "session/end-seed", "todo/write",
  "agent/inbox/spliced", "agent-preset/selected", "approval/asked", "approval/decided", "approval/policy", "command/run",
  "command/done", "compaction/start", "compaction/summary", "compaction/prune", "compaction/end", "feedback/record",
  "goal/change", "hook/invoked", "hook/result", "llm/retry", "llm/retry-started", "model/selection", "permission/preset",
  "plan/mode", "sandbox/mode", "schedule/change", "session/title", "session/title-llm-request", "subagent/descriptor",
  "team/member", "team/message/queued", "team/message/delivered", "team/task", "tool/code-dispatch-start",
  "tool/code-dispatch", "tool-workflow/run-start", "tool-workflow/run-end", "tool-workflow/agent-start",
  "tool-workflow/agent-end", "web/deepseek-search-llm-request",
]);
