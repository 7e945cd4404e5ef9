// createSessionQuery: the trusted dsh-query API (docs/protocol.md#3-the-trusted-query-api),
// typed, and a client of the five model-facing tools (dsh-tools, §4).

import { type ConnectionOptions, type NatsConnection, connect, headers as newHeaders } from "@nats-io/transport-node";

import { raceAbort } from "./errors.js";
import { connectDefaults } from "./persistence.js";
import { type JsonValue, parseJson, stringifyJson } from "./json.js";
import { QuerySubjectPrefix, ToolsSubjectPrefix, tenantInboxPrefix, tenantProblem } from "./names.js";
import type { SessionEvent, SessionHeader } from "./records.js";

/** The closed set of error codes (docs/protocol.md#3-the-trusted-query-api, docs/tools.md). */
export type SessionQueryErrorCode =
  | "SESSION_QUERY_ABORTED"
  | "SESSION_QUERY_CORRUPT_SESSION"
  | "SESSION_QUERY_EVENT_NOT_FOUND"
  | "SESSION_QUERY_INDEX_FAILED"
  | "SESSION_QUERY_INVALID_CONFIG"
  | "SESSION_QUERY_INVALID_CURSOR"
  | "SESSION_QUERY_INVALID_FILTER"
  | "SESSION_QUERY_INVALID_LIMIT"
  | "SESSION_QUERY_INVALID_QUERY"
  | "SESSION_QUERY_INVALID_LINEAGE"
  | "SESSION_QUERY_INVALID_SURFACE"
  | "SESSION_QUERY_INVALID_WINDOW"
  | "SESSION_QUERY_PERSISTENCE_FAILED"
  | "SESSION_QUERY_SEARCH_DISABLED"
  | "SESSION_QUERY_SESSION_NOT_FOUND"
  | "SESSION_QUERY_STALE_CURSOR"
  | "SESSION_QUERY_SOURCE_CONFLICT"
  | "SESSION_QUERY_NOT_CAUGHT_UP"
  | "SESSION_QUERY_INVALID_REQUEST"
  | "SESSION_QUERY_REPLY_TOO_LARGE"
  | "SESSION_QUERY_TOOL_MISSING_AGENT"
  | "SESSION_QUERY_TOOL_INVALID_ARGS"
  | "SESSION_QUERY_TOOL_UNAUTHORIZED"
  | "SESSION_QUERY_TOOL_NO_CURRENT_STEP"
  | "SESSION_QUERY_TOOL_FAILED"
  | "SESSION_QUERY_TOOL_SPILL_NOT_FOUND"
  | (string & {});

/** SessionQueryError is a failed request: its code and the service's message (the original's SessionQueryError). */
export class SessionQueryError extends Error {
  override name = "SessionQueryError";
  constructor(
    readonly code: SessionQueryErrorCode,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

// ---- shapes ---------------------------------------------------------------

export type Surface = "current" | "shadowed" | "log-only";
/** A session record: its header, its tenant (absent for the untenanted namespace), live and persisted. */
export interface SessionRecord {
  header: SessionHeader;
  tenant?: string;
  live: boolean;
  persisted: boolean;
}
export interface SessionEventRecord {
  sessionId: string;
  seq: number;
  type: string;
  time: number;
  surface: Surface;
}
export interface SessionEventSearchDocument extends SessionEventRecord {
  text: string;
}
export interface SessionEventSearchHit extends SessionEventRecord {
  snippet: string;
}
export interface SessionSearchHit extends SessionRecord {
  bestMatch: SessionEventSearchHit;
}
export interface SessionTitle {
  title: string;
  messageSeqs: number[];
  source: JsonValue;
  eventSeq: number;
  updatedAt: number;
}
export interface SessionLineageNode {
  session: SessionRecord;
  descendants: SessionLineageNode[];
}

export type SessionFilter =
  | { kind: "id"; values: string[] }
  | { kind: "cwd" | "parent" | "tenant" | "harness"; values: (string | null)[] }
  | { kind: "created-at"; from?: number; to?: number }
  | { kind: "availability"; values: ("live" | "persisted")[] };
export type EventFilter =
  | { kind: "seq" | "time"; from?: number; to?: number }
  | { kind: "type"; values: string[] }
  | { kind: "surface"; values: Surface[] }
  | { kind: "text"; text: string };

/** Every reply carries the generation (the DSH_SESSIONS stream sequence) its projection was at. */
export interface Generated {
  generation: number;
}
export interface Page<T> extends Generated {
  items: T[];
  nextCursor?: string;
}

/** Every request may wait for a generation (minGeneration) within timeoutMs (1..30000, default 5000). */
export interface RequestOptions {
  minGeneration?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
}
export interface Paged {
  limit?: number;
  cursor?: string;
}

export interface SessionRead extends Generated {
  session: SessionHeader;
  inheritedEventCount: number;
  /** The raw events as stored; numbers a double cannot hold exactly are JsonNumbers. */
  events: SessionEvent[];
  nextCursor?: string;
}
export interface SessionSurface extends SessionRead {
  capturedThroughSeq: number | null;
}
export interface SessionTrace extends Generated {
  target: SessionRecord;
  ancestors: SessionRecord[];
  descendants: SessionLineageNode[];
  complete: boolean;
  root?: SessionRecord;
  unresolvedParentId?: string;
}
export type TitleResult =
  | { sessionId: string; status: "fulfilled"; value: { session: SessionHeader; title?: SessionTitle } }
  | { sessionId: string; status: "rejected"; reason: { code: SessionQueryErrorCode; message: string } };
export interface SessionStat extends Generated {
  session: SessionRecord;
  inheritedEventCount: number;
  eventCount: number;
  title?: SessionTitle;
  lastStepStartSeq?: number;
  invalidFromSeq?: number;
  invalidReason?: string;
}
export interface EventSearch extends Page<SessionEventSearchHit> {
  session: SessionHeader;
}
export interface EventRead extends Generated {
  session: SessionHeader;
  inheritedEventCount: number;
  target?: SessionEvent;
  events: SessionEvent[];
  startSeq: number;
  endSeq: number;
  targetOmitted?: boolean;
}
export interface EventTrace extends Generated {
  session: SessionHeader;
  target: SessionEventRecord;
  replacedBy?: number;
  replacementChain: number[];
  replacedEventSeqs: number[];
  sourceEventSeqs: number[];
  derivedEventSeqs: number[];
}

// ---- tools ----------------------------------------------------------------

/** The five tools (docs/tools.md). */
export type ToolName = "session_search" | "session_event_search" | "session_trace" | "session_event_trace" | "session_event_read";
export interface ToolDescription {
  name: ToolName;
  description: string;
  inputSchema: JsonValue;
}
export interface ToolList {
  tools: ToolDescription[];
  prompt: string;
}
/** A tool's answer: always a normal reply, isError for a refusal with its code. */
export interface ToolResult {
  text: string;
  isError: boolean;
  error?: { code: SessionQueryErrorCode };
  spill?: { id: string; bytes: number };
}
/**
 * Who calls a tool: a session (its workspace is the session's cwd, read from
 * the projection) or a workspace directory; set by the trusted harness,
 * never by the model.
 */
export type ToolCaller = { session: string } | { workspace: string };
export interface ToolCallOptions {
  caller: ToolCaller;
  /** Read your own writes: the generation of the caller's last append (Dsh-Min-Generation). */
  minGeneration?: number;
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface SessionQueryOptions extends ConnectionOptions {
  /** An open connection to use instead of connecting (not closed by close()). */
  connection?: NatsConnection;
  /**
   * The tenant whose tool subjects (dsh.tools.v1.tenant.<tenant>.…) a
   * tenant's credential calls; absent for the trusted subjects. The query
   * API itself is trusted only.
   */
  tenant?: string;
  /** How long a request waits for its reply beyond its timeoutMs (default 2000 ms). */
  replyMarginMs?: number;
}

/** SessionQuery is the typed client of dsh-query and dsh-tools. */
export interface SessionQuery extends AsyncDisposable {
  readonly connection: NatsConnection;
  listSessions(req?: Paged, o?: RequestOptions): Promise<Page<SessionRecord>>;
  filterSessions(req: { filters: SessionFilter[] } & Paged, o?: RequestOptions): Promise<Page<SessionRecord>>;
  searchSessions(req: { query: string; sessionFilters?: SessionFilter[]; eventFilters?: EventFilter[] } & Paged, o?: RequestOptions): Promise<Page<SessionSearchHit>>;
  readSession(req: { sessionId: string } & Paged, o?: RequestOptions): Promise<SessionRead>;
  readSurface(req: { sessionId: string } & Paged, o?: RequestOptions): Promise<SessionSurface>;
  traceSession(req: { sessionId: string }, o?: RequestOptions): Promise<SessionTrace>;
  readTitles(req: { sessionIds: string[] }, o?: RequestOptions): Promise<{ items: TitleResult[] } & Generated>;
  statSession(req: { sessionId: string }, o?: RequestOptions): Promise<SessionStat>;
  listEvents(req: { sessionId: string } & Paged, o?: RequestOptions): Promise<Page<SessionEventRecord>>;
  filterEvents(req: { sessionId: string; filters: EventFilter[] } & Paged, o?: RequestOptions): Promise<Page<SessionEventSearchDocument>>;
  searchEvents(req: { sessionId: string; query: string; filters?: EventFilter[] } & Paged, o?: RequestOptions): Promise<EventSearch>;
  readEvent(req: { sessionId: string; seq: number; before?: number; after?: number }, o?: RequestOptions): Promise<EventRead>;
  traceEvent(req: { sessionId: string; seq: number }, o?: RequestOptions): Promise<EventTrace>;
  /** Every page of a paged endpoint, following nextCursor (the first page's generation binds the rest). */
  all<T>(page: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T>;
  readonly tools: SessionTools;
  close(): Promise<void>;
}

/** A tool bound to its caller, ready to mount in a harness's tool registry. */
export interface BoundTool extends ToolDescription {
  /** run calls the tool with the model's arguments; a spilled result is read in full. */
  run(args: unknown, options?: { signal?: AbortSignal }): Promise<ToolResult>;
}

/** The dsh-tools client: the tool list with its prompt section, the five tools, spill pages. */
export interface SessionTools {
  /**
   * bind returns the tools and the prompt section for one caller (an
   * agent's session, fixed or read at each call), each call asking for the
   * generation minGeneration returns (the session's last append) so the
   * tools see its own writes.
   */
  bind(caller: ToolCaller | (() => ToolCaller), options?: { minGeneration?: () => number | undefined; timeoutMs?: number }): Promise<{ prompt: string; tools: BoundTool[] }>;
  list(o?: { timeoutMs?: number; signal?: AbortSignal }): Promise<ToolList>;
  call(tool: ToolName, args: unknown, o: ToolCallOptions): Promise<ToolResult>;
  /** The full text of a spilled result (every page of spill.read). */
  readSpill(id: string, o: ToolCallOptions): Promise<string>;
}

const defaultTimeoutMs = 5000;

/** createSessionQuery connects (or takes options.connection) and returns the client. */
export async function createSessionQuery(options: SessionQueryOptions = {}): Promise<SessionQuery> {
  const { connection, tenant = "", replyMarginMs = 2000, ...conn } = options;
  if (tenant !== "") {
    const p = tenantProblem(tenant);
    if (p) throw new TypeError(`tenant: ${p}`);
  }
  const nc = connection ?? (await connect({ ...connectDefaults, ...conn, ...(tenant && !conn.inboxPrefix ? { inboxPrefix: tenantInboxPrefix(tenant) } : {}) }));
  return new QueryClient(nc, connection === undefined, tenant, replyMarginMs);
}

const dec = new TextDecoder();

class QueryClient implements SessionQuery {
  readonly tools: SessionTools;
  constructor(
    readonly connection: NatsConnection,
    private readonly owned: boolean,
    tenant: string,
    private readonly margin: number,
  ) {
    this.tools = new ToolsClient(connection, tenant, margin);
  }

  private async ask<T>(endpoint: string, req: object, o: RequestOptions = {}): Promise<T> {
    // Optional fields left undefined are absent, as JSON.stringify would leave them.
    const body: Record<string, unknown> = Object.fromEntries(Object.entries(req).filter(([, v]) => v !== undefined));
    if (o.minGeneration !== undefined) body.minGeneration = o.minGeneration;
    if (o.timeoutMs !== undefined) body.timeoutMs = o.timeoutMs;
    const timeout = (o.timeoutMs ?? defaultTimeoutMs) + this.margin;
    const m = await raceAbort(this.connection.request(QuerySubjectPrefix + endpoint, stringifyJson(body, "request"), { timeout }), o.signal);
    const code = m.headers?.get("Nats-Service-Error-Code");
    const text = dec.decode(m.data);
    if (code) {
      let message = m.headers?.get("Nats-Service-Error") ?? "";
      try {
        message = (JSON.parse(text) as { error: { message: string } }).error.message ?? message;
      } catch {
        // the header's message stands
      }
      throw new SessionQueryError(code, message);
    }
    // Raw events keep their exact text (JsonNumber for what a double cannot hold).
    return parseReply(text) as T;
  }

  listSessions(req: Paged = {}, o?: RequestOptions) {
    return this.ask<Page<SessionRecord>>("sessions.list", req, o);
  }
  filterSessions(req: { filters: SessionFilter[] } & Paged, o?: RequestOptions) {
    return this.ask<Page<SessionRecord>>("sessions.filter", req, o);
  }
  searchSessions(req: { query: string; sessionFilters?: SessionFilter[]; eventFilters?: EventFilter[] } & Paged, o?: RequestOptions) {
    return this.ask<Page<SessionSearchHit>>("sessions.search", req, o);
  }
  readSession(req: { sessionId: string } & Paged, o?: RequestOptions) {
    return this.ask<SessionRead>("sessions.read", req, o);
  }
  readSurface(req: { sessionId: string } & Paged, o?: RequestOptions) {
    return this.ask<SessionSurface>("sessions.surface", req, o);
  }
  traceSession(req: { sessionId: string }, o?: RequestOptions) {
    return this.ask<SessionTrace>("sessions.trace", req, o);
  }
  readTitles(req: { sessionIds: string[] }, o?: RequestOptions) {
    return this.ask<{ items: TitleResult[] } & Generated>("sessions.titles", req, o);
  }
  statSession(req: { sessionId: string }, o?: RequestOptions) {
    return this.ask<SessionStat>("sessions.stat", req, o);
  }
  listEvents(req: { sessionId: string } & Paged, o?: RequestOptions) {
    return this.ask<Page<SessionEventRecord>>("events.list", req, o);
  }
  filterEvents(req: { sessionId: string; filters: EventFilter[] } & Paged, o?: RequestOptions) {
    return this.ask<Page<SessionEventSearchDocument>>("events.filter", req, o);
  }
  searchEvents(req: { sessionId: string; query: string; filters?: EventFilter[] } & Paged, o?: RequestOptions) {
    return this.ask<EventSearch>("events.search", req, o);
  }
  readEvent(req: { sessionId: string; seq: number; before?: number; after?: number }, o?: RequestOptions) {
    return this.ask<EventRead>("events.read", req, o);
  }
  traceEvent(req: { sessionId: string; seq: number }, o?: RequestOptions) {
    return this.ask<EventTrace>("events.trace", req, o);
  }

  async *all<T>(page: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T> {
    let cursor: string | undefined;
    do {
      const p = await page(cursor);
      yield* p.items;
      cursor = p.nextCursor;
    } while (cursor);
  }

  async close(): Promise<void> {
    if (this.owned) await this.connection.close();
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

class ToolsClient implements SessionTools {
  constructor(
    private readonly nc: NatsConnection,
    private readonly tenant: string,
    private readonly margin: number,
  ) {}

  private subject(endpoint: string): string {
    return this.tenant ? `${ToolsSubjectPrefix}tenant.${this.tenant}.${endpoint}` : ToolsSubjectPrefix + endpoint;
  }

  private async ask(endpoint: string, body: string, o: { caller?: ToolCaller; minGeneration?: number; timeoutMs?: number; signal?: AbortSignal }): Promise<unknown> {
    const h = newHeaders();
    if (o.caller && "session" in o.caller) h.set("Dsh-Caller-Session", o.caller.session);
    if (o.caller && "workspace" in o.caller) h.set("Dsh-Caller-Workspace", o.caller.workspace);
    if (o.minGeneration !== undefined) h.set("Dsh-Min-Generation", String(o.minGeneration));
    const timeout = (o.timeoutMs ?? 30_000) + this.margin;
    const m = await raceAbort(this.nc.request(this.subject(endpoint), body, { timeout, headers: h }), o.signal);
    const code = m.headers?.get("Nats-Service-Error-Code");
    if (code) throw new SessionQueryError(code, m.headers?.get("Nats-Service-Error") ?? "");
    return JSON.parse(dec.decode(m.data));
  }

  list(o: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<ToolList> {
    return this.ask("list", "{}", o) as Promise<ToolList>;
  }

  call(tool: ToolName, args: unknown, o: ToolCallOptions): Promise<ToolResult> {
    // The model's argument object, exactly as it produced it.
    const body = typeof args === "string" ? args : JSON.stringify(args);
    return this.ask(tool, body, o) as Promise<ToolResult>;
  }

  async bind(caller: ToolCaller | (() => ToolCaller), options: { minGeneration?: () => number | undefined; timeoutMs?: number } = {}): Promise<{ prompt: string; tools: BoundTool[] }> {
    const list = await this.list();
    const callOptions = (signal?: AbortSignal): ToolCallOptions => {
      const minGeneration = options.minGeneration?.();
      return {
        caller: typeof caller === "function" ? caller() : caller,
        ...(minGeneration !== undefined ? { minGeneration } : {}),
        ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
        ...(signal ? { signal } : {}),
      };
    };
    const tools = list.tools.map((t) => ({
      ...t,
      run: async (args: unknown, o: { signal?: AbortSignal } = {}) => {
        const co = callOptions(o.signal);
        const r = await this.call(t.name, args, co);
        if (!r.spill) return r;
        return { ...r, text: await this.readSpill(r.spill.id, co) };
      },
    }));
    return { prompt: list.prompt, tools };
  }

  async readSpill(id: string, o: ToolCallOptions): Promise<string> {
    let text = "";
    let offset: number | undefined = 0;
    while (offset !== undefined) {
      const r = (await this.ask("spill.read", JSON.stringify({ id, offset }), o)) as { text?: string; nextOffset?: number; isError?: boolean; error?: { code: string } };
      if (r.isError) throw new SessionQueryError(r.error?.code ?? "SESSION_QUERY_TOOL_FAILED", r.text ?? "");
      text += r.text ?? "";
      offset = r.nextOffset;
    }
    return text;
  }
}

/** parseReply reads a reply; numbers a double cannot hold exactly (in raw events) stay JsonNumbers. */
function parseReply(text: string): unknown {
  return parseJson(text);
}
