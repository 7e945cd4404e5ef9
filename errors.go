package dshq

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Code is a stable, machine-routable failure code.
type Code string

// The closed query taxonomy and dshq's additions to it
// (docs/query.md#error-codes).
const (
	CodeAborted           Code = "SESSION_QUERY_ABORTED"
	CodeCorruptSession    Code = "SESSION_QUERY_CORRUPT_SESSION"
	CodeEventNotFound     Code = "SESSION_QUERY_EVENT_NOT_FOUND"
	CodeIndexFailed       Code = "SESSION_QUERY_INDEX_FAILED"
	CodeInvalidConfig     Code = "SESSION_QUERY_INVALID_CONFIG"
	CodeInvalidCursor     Code = "SESSION_QUERY_INVALID_CURSOR"
	CodeInvalidFilter     Code = "SESSION_QUERY_INVALID_FILTER"
	CodeInvalidLimit      Code = "SESSION_QUERY_INVALID_LIMIT"
	CodeInvalidQuery      Code = "SESSION_QUERY_INVALID_QUERY"
	CodeInvalidLineage    Code = "SESSION_QUERY_INVALID_LINEAGE"
	CodeInvalidSurface    Code = "SESSION_QUERY_INVALID_SURFACE"
	CodeInvalidWindow     Code = "SESSION_QUERY_INVALID_WINDOW"
	CodePersistenceFailed Code = "SESSION_QUERY_PERSISTENCE_FAILED"
	CodeSearchDisabled    Code = "SESSION_QUERY_SEARCH_DISABLED"
	CodeSessionNotFound   Code = "SESSION_QUERY_SESSION_NOT_FOUND"
	CodeStaleCursor       Code = "SESSION_QUERY_STALE_CURSOR"
	CodeSourceConflict    Code = "SESSION_QUERY_SOURCE_CONFLICT"

	// CodeNotCaughtUp: minGeneration was not reached before timeoutMs.
	CodeNotCaughtUp Code = "SESSION_QUERY_NOT_CAUGHT_UP"
	// CodeInvalidRequest: a request that is malformed outside any field that
	// has its own code.
	CodeInvalidRequest Code = "SESSION_QUERY_INVALID_REQUEST"
	// CodeReplyTooLarge: an unpageable reply that would exceed the payload.
	CodeReplyTooLarge Code = "SESSION_QUERY_REPLY_TOO_LARGE"

	// Tool codes (docs/tools.md#sanitized-errors).
	CodeToolMissingAgent  Code = "SESSION_QUERY_TOOL_MISSING_AGENT"
	CodeToolUnauthorized  Code = "SESSION_QUERY_TOOL_UNAUTHORIZED"
	CodeToolNoCurrentStep Code = "SESSION_QUERY_TOOL_NO_CURRENT_STEP"
	CodeToolFailed        Code = "SESSION_QUERY_TOOL_FAILED"
	CodeInvalidArgs       Code = "INVALID_ARGS"
)

// Error is the one typed error at the API edge: a stable Code and a message
// that names the problem. Err, when set, is the cause (kept for logs, never
// shown to a model).
type Error struct {
	Code    Code
	Message string
	Err     error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Code of the first *Error in err's chain, or "" when
// there is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// MaxQuotedBytes is the most of an untrusted value (an id, a field name, a
// filter value, a number's spelling) an error message quotes: as long as
// the longest session id, so that every valid id is quoted whole.
const MaxQuotedBytes = 512

// Quote returns v quoted as %q quotes it when it is at most MaxQuotedBytes
// long, and otherwise its first MaxQuotedBytes (cut at a character
// boundary) quoted and marked with "…" and v's length in bytes. Error
// messages quote untrusted values with it, so that an error reply always
// fits a message whatever the request held.
func Quote(v string) string {
	if len(v) <= MaxQuotedBytes {
		return strconv.Quote(v)
	}
	n := MaxQuotedBytes
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(v[:n]), len(v))
}
