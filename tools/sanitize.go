package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/authz"
)

// Fixed safe messages of service failures (docs/tools.md#sanitized-errors). A
// model sees only these; diagnostics go to the log.
var safeMessages = map[dshq.Code]string{
	dshq.CodeAborted:           "session query was cancelled",
	dshq.CodeCorruptSession:    "session event history is corrupt",
	dshq.CodeEventNotFound:     "session event was not found",
	dshq.CodeIndexFailed:       "session search index is unavailable",
	dshq.CodeInvalidCursor:     "session search continuation is invalid",
	dshq.CodeInvalidFilter:     "session query filters were rejected",
	dshq.CodeInvalidLimit:      "session query result limit was rejected",
	dshq.CodeInvalidQuery:      "session query was rejected",
	dshq.CodeInvalidLineage:    "session lineage is invalid",
	dshq.CodeInvalidSurface:    "session event history is invalid",
	dshq.CodeInvalidWindow:     "session event window is invalid",
	dshq.CodePersistenceFailed: "session history storage is unavailable",
	dshq.CodeSearchDisabled:    "session search is disabled in this deployment",
	dshq.CodeSessionNotFound:   "session was not found",
	dshq.CodeStaleCursor:       msgStale,
	// Not in the original's set: a read-your-writes wait that timed out.
	dshq.CodeNotCaughtUp: "session history is not indexed up to the latest events yet; retry the call",
}

const (
	msgStale          = "session history changed while paging; retry the complete search call"
	msgGeneric        = "session query operation failed"
	msgRepeatedCursor = "session-search provider repeated a continuation cursor"
)

// safeCode returns the code a model may see for a service failure code.
func safeCode(c dshq.Code) dshq.Code {
	if _, ok := safeMessages[c]; ok {
		return c
	}
	return dshq.CodeToolFailed
}

// errCancelled marks a failure caused by the call's own context ending; Call
// turns it back into the context's cause.
type errCancelled struct{ cause error }

func (e errCancelled) Error() string { return "cancelled: " + e.cause.Error() }
func (e errCancelled) Unwrap() error { return e.cause }

// sanitize translates a failed service call into what a model may see. When
// ctx has ended, its cause wins (cancellation is preserved and not logged).
// Otherwise the full diagnostic chain is logged and the failure becomes a
// fresh *dshq.Error with a fixed safe message; an unknown failure, a code
// without a safe message, or a logging failure becomes the generic
// SESSION_QUERY_TOOL_FAILED.
func sanitize(ctx context.Context, log *slog.Logger, op string, err error) (out error) {
	if ctx.Err() != nil {
		return errCancelled{context.Cause(ctx)}
	}
	defer func() {
		if recover() != nil { // classification itself failed (a hostile error value)
			out = &dshq.Error{Code: dshq.CodeToolFailed, Message: msgGeneric}
		}
	}()
	code := dshq.ErrorCode(err)
	if !logSafely(ctx, log, "session query service call failed",
		slog.String("op", op), slog.String("code", string(code)), slog.String("diagnostic", chain(err))) {
		return &dshq.Error{Code: dshq.CodeToolFailed, Message: msgGeneric}
	}
	if code == dshq.CodeToolUnauthorized {
		return authz.ErrUnauthorized()
	}
	if msg, ok := safeMessages[code]; ok {
		return &dshq.Error{Code: code, Message: msg}
	}
	return &dshq.Error{Code: dshq.CodeToolFailed, Message: msgGeneric}
}

// logSafely logs a warning and reports false when the logger failed (a
// panicking handler must not take a tool call, or the service, down).
func logSafely(ctx context.Context, log *slog.Logger, msg string, attrs ...slog.Attr) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	log.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
	return true
}

// chain renders an error's cause chain for the log, bounded so that a cyclic
// or very deep chain cannot hang or flood it.
func chain(err error) string {
	const maxDepth = 16
	var parts []string
	for i := 0; err != nil && i < maxDepth; i++ {
		parts = append(parts, fmt.Sprintf("%T: %s", err, err.Error()))
		err = errors.Unwrap(err)
	}
	if err != nil {
		parts = append(parts, "(chain truncated)")
	}
	return strings.Join(parts, " <- ")
}
