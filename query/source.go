package query

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/dshq/dshq"
)

// Projection is what the Engine reads: a projector's consistent snapshots.
// The projector (package projection) satisfies it through a small adapter.
type Projection interface {
	// View calls fn with a snapshot that has applied at least
	// minGeneration, waiting for it until ctx is done. fn must not retain
	// the snapshot.
	View(ctx context.Context, minGeneration uint64, fn func(Snapshot) error) error
}

// Snapshot is one consistent view of a projection shard.
type Snapshot interface {
	// Generation is the stream sequence through which the snapshot applied.
	Generation() uint64
	// Epoch identifies the projection build; it changes when a rebuild is
	// swapped in.
	Epoch() string
	// Session returns a session by id; ok is false when there is none.
	Session(id string) (info SessionInfo, ok bool, err error)
	// SessionsByCreated calls fn for each session in createdAt desc, id asc
	// (byte order) order, starting strictly after afterKey (a
	// SessionInfo.OrderKey; nil = from the start), until fn returns false.
	SessionsByCreated(afterKey []byte, fn func(SessionInfo) bool) error
	// Children returns the sessions whose parentSession is parentID, in any
	// order.
	Children(parentID string) ([]SessionInfo, error)
	// Event returns one stored event of a session.
	Event(id string, seq int64) (ev StoredEvent, ok bool, err error)
	// Events calls fn for the stored events of a session from fromSeq in
	// seq order until fn returns false.
	Events(id string, fromSeq int64, fn func(StoredEvent) bool) error
	// SurfaceSeqs returns the session's current surface in surface order.
	SurfaceSeqs(id string) ([]int64, error)
	// Closers returns the synthetic crash closers of a session whose lease
	// lapsed with a turn open (UPSTREAM §1.7), seqs continuing the log; nil
	// for a balanced or live session. They are never stored.
	Closers(id string) ([]StoredEvent, error)
	// IsLive reports whether a harness holds the session's write lease.
	IsLive(id string) bool
	// LiveSessions returns the ids of the live sessions.
	LiveSessions() []string
}

// SessionInfo is what a projection knows of one session.
type SessionInfo struct {
	// Header is the header in version 2 shape.
	Header dshq.Header
	// Tenant is the session's tenant, "" for none (its log subject's).
	Tenant string
	// FormatVersion is the version the log was written in (0 or 2).
	FormatVersion int
	// InheritedEventCount is the length of the fork-inherited prefix.
	InheritedEventCount int64
	// EventCount is the number of stored events (closers not included).
	EventCount int64
	// Title is the latest session/title, nil when none.
	Title *dshq.Title
	// LastStepStart is the seq of the last step/start event, -1 when none.
	LastStepStart int64
	// InvalidFromSeq is the seq from which the session is invalid, -1 when
	// it is valid; InvalidReason says why.
	InvalidFromSeq int64
	InvalidReason  string
	// HeaderGeneration is the stream sequence of the header record: the
	// generation at which the session appeared.
	HeaderGeneration uint64
	// ReclassifiedAt is the generation of the session's last surface
	// reclassification (a replace), 0 when none.
	ReclassifiedAt uint64
	// OrderKey is the session's position in SessionsByCreated order.
	OrderKey []byte
}

// StoredEvent is one projected event.
type StoredEvent struct {
	// Record is the event's record with its current surface.
	Record dshq.EventRecord
	// Raw is the event as written.
	Raw json.RawMessage
	// Text is its semantic text ("" = no search document).
	Text string
	// ReplacedBy is the seq of the replacement that shadowed it, nil when
	// not shadowed.
	ReplacedBy *int64
	// ReplacedEventSeqs are the seqs it replaced (direct removals).
	ReplacedEventSeqs []int64
	// Sources is its envelope sourceEventSeqs in recorded order.
	Sources []int64
	// Derived are the later events citing it, ascending.
	Derived []int64
}

// Searcher is the full-text index the Engine asks (package index).
type Searcher interface {
	// SearchSessions ranks sessions by their best matching event: BM25 with
	// ties broken by time desc, session id asc, seq desc; metadata filters
	// are applied before ranking; at most q.Limit hits.
	SearchSessions(ctx context.Context, q SearchQuery) ([]SessionHit, error)
	// SearchEvents ranks the matching events of session q.SessionID: BM25
	// with ties broken by time desc, seq desc; at most q.Limit hits.
	SearchEvents(ctx context.Context, q SearchQuery) ([]dshq.EventSearchHit, error)
}

// SearchQuery is one index search: a literal phrase and metadata filters.
type SearchQuery struct {
	// Phrase is one literal phrase (never syntax), normalized.
	Phrase string
	// SessionID restricts an event search to one session.
	SessionID string
	// SessionFilters hold id, tenant, cwd, created-at, parent and
	// availability clauses.
	SessionFilters []dshq.Filter
	// LiveSessionIDs resolves availability: a session is live when its id
	// is listed; every projected session is persisted.
	LiveSessionIDs []string
	// EventFilters hold seq, time, type and surface clauses.
	EventFilters []dshq.Filter
	// Limit is the most hits to return.
	Limit int
	// SnippetChars bounds each snippet in code points.
	SnippetChars int
}

// SessionHit is one session of a session search with its best event.
type SessionHit struct {
	SessionID string
	BestMatch dshq.EventSearchHit
}

// CursorStore keeps the stored hits of paged searches so that any replica
// can continue them (answered as of the first page).
type CursorStore interface {
	// Put stores value under key for at least the store's TTL.
	Put(ctx context.Context, key string, value []byte) error
	// Get returns the value under key, or ErrCursorExpired.
	Get(ctx context.Context, key string) ([]byte, error)
}

// ErrCursorExpired is returned by a CursorStore for a key it no longer holds.
var ErrCursorExpired = errors.New("stored cursor results expired")
