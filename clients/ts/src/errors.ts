// The seam's named errors (docs/sdk.md#errors). Each has the
// original's name, which session-query maps by, and the Go SDK's wording.

/** Where a backend keeps a session's raw log, when it keeps one. */
export interface SessionLocation {
  kind: string;
  path: string;
}

/** SessionPersistenceError is the base of every named error of the seam. */
export class SessionPersistenceError extends Error {
  readonly sessionId: string | undefined;
  readonly location: SessionLocation | undefined;
  constructor(message: string, options?: { sessionId?: string; cause?: unknown; location?: SessionLocation }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.sessionId = options?.sessionId;
    this.location = options?.location;
  }
}

/** The session does not exist. */
export class SessionPersistenceNotFoundError extends SessionPersistenceError {
  override name = "SessionPersistenceNotFoundError";
}
/** Create of an id that is stored or pending. */
export class SessionAlreadyExistsError extends SessionPersistenceError {
  override name = "SessionAlreadyExistsError";
}
/** Another handle or process holds the session's write lease. */
export class SessionAlreadyOwnedError extends SessionPersistenceError {
  override name = "SessionAlreadyOwnedError";
}
/** Append or flush on a read handle. */
export class SessionReadOnlyError extends SessionPersistenceError {
  override name = "SessionReadOnlyError";
}
/** The write lease lapsed and another writer took the session. */
export class SessionOwnershipLostError extends SessionPersistenceError {
  override name = "SessionOwnershipLostError";
}
/** An operation after close(). */
export class SessionHandleClosedError extends SessionPersistenceError {
  override name = "SessionHandleClosedError";
}
/** A stored record failed validation. */
export class SessionPersistenceCorruptionError extends SessionPersistenceError {
  override name = "SessionPersistenceCorruptionError";
}
/** A stored header version or event type this harness does not read. */
export class SessionFormatUnsupportedError extends SessionPersistenceError {
  override name = "SessionFormatUnsupportedError";
}
/**
 * The stream answered a record's publish as a duplicate of a msg id that no
 * record of this session holds: another writer took it (deduplication is
 * stream-wide). Nothing was stored; the handle stays the owner.
 */
export class SessionMsgIdInUseError extends SessionPersistenceError {
  override name = "SessionMsgIdInUseError";
}
/** The stream or the lease bucket exists with a configuration dshq cannot use. */
export class SessionStreamConflictError extends SessionPersistenceError {
  override name = "SessionStreamConflictError";
}

/** abortReason is the error an aborted signal rejects with: its reason, as upstream rethrows it. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("This operation was aborted", "AbortError");
}

/** throwIfAborted rejects with the signal's reason when it has fired. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortReason(signal);
}

/**
 * raceAbort settles with p, or rejects with the signal's reason as soon as it
 * fires (p keeps running; what it does is settled by the caller's books).
 */
export function raceAbort<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(abortReason(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      p.catch(() => {});
      reject(abortReason(signal));
    };
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
