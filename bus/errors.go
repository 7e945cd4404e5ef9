package bus

import (
	"errors"
	"fmt"
)

// Sentinels of the persistence seam (docs/sdk.md#errors). Every error the Store and
// Handle return for one of these conditions is an *Error that matches its
// sentinel with errors.Is and carries a message in the upstream wording.
var (
	// ErrNotFound: the session does not exist (SessionPersistenceNotFoundError).
	ErrNotFound = errors.New("session not found")
	// ErrAlreadyExists: create of an id that exists or is pending
	// (SessionAlreadyExistsError).
	ErrAlreadyExists = errors.New("session already exists")
	// ErrAlreadyOwned: another handle or process holds the write lease
	// (SessionAlreadyOwnedError).
	ErrAlreadyOwned = errors.New("session already owned")
	// ErrReadOnly: append or flush on a read handle (SessionReadOnlyError).
	ErrReadOnly = errors.New("session handle is read-only")
	// ErrOwnershipLost: the write lease lapsed or was taken over
	// (SessionOwnershipLostError).
	ErrOwnershipLost = errors.New("session ownership lost")
	// ErrHandleClosed: an operation on a closed handle
	// (SessionHandleClosedError).
	ErrHandleClosed = errors.New("session handle is closed")
	// ErrCorruption: a stored record failed validation
	// (SessionPersistenceCorruptionError).
	ErrCorruption = errors.New("session persistence corruption")
	// ErrFormatUnsupported: a stored record uses vocabulary or a header
	// version this harness does not know (SessionFormatUnsupportedError).
	ErrFormatUnsupported = errors.New("session format unsupported")
	// ErrInvalidArgument: the caller passed a bad id, header, offset, length
	// or event batch (upstream TypeError / RangeError); nothing was stored.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrStreamConflict: an existing stream or bucket has a configuration
	// that conflicts with the one dshq needs; it is never silently updated.
	ErrStreamConflict = errors.New("stream configuration conflict")
	// ErrLogConflict: Store.Import found the session stored with content
	// that is not a prefix of the imported log; nothing was stored.
	ErrLogConflict = errors.New("session stored with different content")
	// ErrMsgIDInUse: the stream answered a record's publish as a duplicate
	// of a stored msg id, and no record of this session holds it: another
	// writer took the id (on its own subject; msg ids are deduplicated
	// stream-wide, within the duplicate window). Nothing of that append
	// was stored and the handle stays usable; the id is free again after
	// the stream's duplicate window. Unguessable session ids keep it from
	// happening (docs/protocol.md#2-the-session-log-stream).
	ErrMsgIDInUse = errors.New("record msg id already in use")
)

// Error is the typed error of the seam: Kind is one of the sentinels above,
// SessionID the session concerned ("" when none), Message the full text, Err
// the cause if any.
type Error struct {
	Kind      error
	SessionID string
	Message   string
	Err       error
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func errorf(kind error, id string, format string, args ...any) *Error {
	return &Error{Kind: kind, SessionID: id, Message: fmt.Sprintf(format, args...)}
}

func wrapf(kind error, id string, cause error, format string, args ...any) *Error {
	e := errorf(kind, id, format, args...)
	e.Err = cause
	return e
}

// FlushError is the aggregate failure of Store.Flush: one entry per session
// whose handle failed to flush; the others flushed.
type FlushError struct {
	// Failed maps a session id to its failure.
	Failed map[string]error
}

// Error names every failing session.
func (e *FlushError) Error() string {
	ids := sortedKeys(e.Failed)
	s := fmt.Sprintf("flush failed for %d session(s):", len(ids))
	for _, id := range ids {
		s += fmt.Sprintf(" %q: %v;", id, e.Failed[id])
	}
	return s[:len(s)-1]
}

// Unwrap returns the individual failures, so errors.Is sees each kind.
func (e *FlushError) Unwrap() []error {
	out := make([]error, 0, len(e.Failed))
	for _, id := range sortedKeys(e.Failed) {
		out = append(out, e.Failed[id])
	}
	return out
}
