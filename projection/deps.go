package projection

import (
	"context"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
)

// Decoder decodes the stream's records (package record implements it).
type Decoder interface {
	// ParseHeader decodes and validates a header record.
	ParseHeader(raw []byte) (dshq.HeaderRecord, error)
	// ParseEvent decodes and validates an event record's envelope.
	ParseEvent(raw []byte) (dshq.Event, error)
}

// Folder starts and restores per-session folds (package fold implements it).
type Folder interface {
	// New starts the fold of a session with header h.
	New(h dshq.HeaderRecord) FoldState
	// Restore decodes a fold state written by FoldState.MarshalBinary.
	Restore(h dshq.HeaderRecord, state []byte) (FoldState, error)
}

// FoldState is one session's incremental fold.
type FoldState interface {
	// Apply folds the next event; an error leaves the state unchanged.
	Apply(e dshq.Event) (fold.Effects, error)
	// MarshalBinary encodes the state.
	MarshalBinary() ([]byte, error)
	// Closers returns the synthetic closers that balance an open final
	// turn (nil for a balanced log).
	Closers() []dshq.Event
}

// IndexDoc is one event document as the index stores it: its record (with
// its current surface) and semantic text, plus the session header that
// session filters match on.
type IndexDoc struct {
	dshq.SearchDocument
	Header dshq.Header
}

// IndexBatch is what one projector batch changes in the index, as net final
// states: applying it to an index at any generation between the batch's
// first and last stream sequence yields the index at the last. Deletes are
// applied before Upserts.
type IndexBatch struct {
	// DeleteSessions are sessions whose documents all leave the index (the
	// session became invalid, or is being re-fed).
	DeleteSessions []string
	// Upserts are documents to insert or replace, keyed by (session, seq).
	Upserts []IndexDoc
}

// Index is the full-text index as the projector feeds it (package index
// implements it).
type Index interface {
	// Apply applies a batch and records generation as the index's applied
	// stream sequence, atomically.
	Apply(ctx context.Context, b IndexBatch, generation uint64) error
	// Generation returns the stream sequence the index has applied.
	Generation() (uint64, error)
	// Close closes the index.
	Close() error
}

// IndexOpener opens (creating if missing) the index in dir. An index that
// cannot be opened is removed and recreated by the projector.
type IndexOpener func(dir string) (Index, error)
