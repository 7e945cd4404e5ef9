// Names of the wire (docs/protocol.md#names, §1, §2): the same as the Go
// SDK's (names.go, record/ids.go, record/tenant.go, bus/lease.go).

/** The session log stream, its subjects' prefix, and the write-lease bucket. */
export const SessionStream = "DSH_SESSIONS";
export const LogSubjectPrefix = "dsh.log.";
export const LogSubjects = "dsh.log.>";
export const LeaseBucket = "DSH_LEASES";
/** The trusted query API's and the tools' subject prefixes. */
export const QuerySubjectPrefix = "dsh.query.v1.";
export const ToolsSubjectPrefix = "dsh.tools.v1.";

/** The longest session id, in UTF-8 bytes. */
export const MaxSessionIDBytes = 512;
const maxPlainToken = 200;
const MaxTenantBytes = 64;

const encoder = new TextEncoder();

/**
 * sessionIdProblem says why id is not a session id (1 to 512 bytes of valid
 * UTF-8 with no C0, DEL or C1 control character), or returns "" when it is.
 */
export function sessionIdProblem(id: unknown): string {
  if (typeof id !== "string") return `session id must be a string, got ${typeof id}`;
  if (id.length === 0) return "session id is empty";
  if (!id.isWellFormed()) return "session id is not valid UTF-8";
  const n = encoder.encode(id).length;
  if (n > MaxSessionIDBytes) return `session id is ${n} bytes, more than the ${MaxSessionIDBytes} allowed`;
  for (const ch of id) {
    const r = ch.codePointAt(0)!;
    if (r < 0x20 || (r >= 0x7f && r <= 0x9f)) {
      return `session id contains control character U+${r.toString(16).toUpperCase().padStart(4, "0")}`;
    }
  }
  return "";
}

const plainRe = /^[A-Za-z0-9_-]{1,200}$/;

/** subjectToken is the id when it is plain, else "~" + unpadded base64url of its UTF-8. */
export function subjectToken(id: string): string {
  const p = sessionIdProblem(id);
  if (p) throw new TypeError(p);
  if (id.length <= maxPlainToken && plainRe.test(id)) return id;
  return "~" + Buffer.from(id, "utf8").toString("base64url");
}

/** parseSubjectToken is the exact inverse of subjectToken; undefined for a token it never produces. */
export function parseSubjectToken(tok: string): string | undefined {
  if (!tok.startsWith("~")) return plainRe.test(tok) ? tok : undefined;
  const b64 = tok.slice(1);
  if (!/^[A-Za-z0-9_-]*$/.test(b64)) return undefined;
  const bytes = Buffer.from(b64, "base64url");
  if (bytes.toString("base64url") !== b64) return undefined;
  const id = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  if (!Buffer.from(id, "utf8").equals(bytes)) return undefined;
  if (sessionIdProblem(id) || plainRe.test(id)) return undefined;
  return id;
}

/** tenantProblem says why t is not a tenant name (1 to 64 bytes of [A-Za-z0-9_-]), or "". */
export function tenantProblem(t: unknown): string {
  if (typeof t !== "string") return "tenant name must be a string";
  if (t === "") return "tenant name is empty";
  if (t.length > MaxTenantBytes) return `tenant name is ${t.length} bytes, more than the ${MaxTenantBytes} allowed`;
  if (!/^[A-Za-z0-9_-]+$/.test(t)) return `tenant name ${JSON.stringify(t)} has a byte other than [A-Za-z0-9_-]`;
  return "";
}

/** tenantInboxPrefix is the inbox prefix a tenant's connection must use: _INBOX_<tenant>. */
export function tenantInboxPrefix(tenant: string): string {
  return "_INBOX_" + tenant;
}

/** logKey is the token, or <tenant>.<token>: the subject's tail and the msg ids' prefix. */
export function logKey(tenant: string, token: string): string {
  return tenant === "" ? token : `${tenant}.${token}`;
}

/** leaseKey is the lease key of a token: its leading "~" written "=", under <tenant>. when tenanted. */
export function leaseKey(tenant: string, token: string): string {
  const k = token.startsWith("~") ? "=" + token.slice(1) : token;
  return logKey(tenant, k);
}

/** headerMsgId and eventMsgId are the Nats-Msg-Id of a session's records. */
export function headerMsgId(key: string): string {
  return `${key}:h`;
}
export function eventMsgId(key: string, seq: number): string {
  return `${key}:${seq}`;
}
