package engine

import (
	"context"
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
	// Epoch is what cursors bind to: the projection's lineage (the stream
	// and the projection version it was built from; projection.Snapshot's
	// Lineage). Every replica of one stream has the same, and a rebuild of
	// the same stream keeps it: a cursor continues on any of them.
	Epoch() string
	// Session returns a session by id; ok is false when there is none.
	Session(id string) (info dshq.SessionInfo, ok bool, err error)
	// SessionsByCreated calls fn for each session in createdAt desc, id asc
	// (byte order) order, starting strictly after afterKey (a
	// dshq.SessionInfo.OrderKey; nil = from the start), until fn returns false.
	SessionsByCreated(afterKey []byte, fn func(dshq.SessionInfo) bool) error
	// Children returns the sessions whose parentSession is parentID, in any
	// order.
	Children(parentID string) ([]dshq.SessionInfo, error)
	// Event returns one stored event of a session.
	Event(id string, seq int64) (ev dshq.StoredEvent, ok bool, err error)
	// Events calls fn for the stored events of a session from fromSeq in
	// seq order until fn returns false.
	Events(id string, fromSeq int64, fn func(dshq.StoredEvent) bool) error
	// SurfaceSeqs returns the session's current surface in surface order.
	SurfaceSeqs(id string) ([]int64, error)
	// Closers returns the synthetic crash closers of a session whose lease
	// lapsed with a turn open
	// (docs/events-and-surfaces.md#crash-closers-and-the-balanced-view), seqs
	// continuing the log; nil for a balanced or live session. They are never
	// stored.
	Closers(id string) ([]dshq.StoredEvent, error)
	// IsLive reports whether a harness holds the session's write lease.
	IsLive(id string) bool
	// LiveSessions returns the ids of the live sessions.
	LiveSessions() []string
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
	// AsOf, when non-zero, hides the events first indexed after that
	// generation. A search passes its snapshot's generation: the index
	// can be ahead of the snapshot (a batch is indexed before the store
	// commits it), and an event the snapshot does not hold must not take
	// a rank from one it holds (a session would be ranked by its newest
	// event, then dropped).
	AsOf uint64
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
