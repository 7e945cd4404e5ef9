package engine

import (
	"context"
	"errors"
	"iter"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// Source is what the Engine answers from: a projection's consistent
// snapshots and, when it has one, their full-text index. The local source
// over a projector and its index is package shardhost's; a test's may be
// anything that keeps these promises. The Engine imports no projection, no
// index and no NATS: every rule of the query API is written here once, over
// whichever source.
type Source interface {
	// View calls fn with a snapshot that has applied at least
	// minGeneration, waiting for it until ctx is done. fn must not retain
	// the snapshot.
	View(ctx context.Context, minGeneration uint64, fn func(Snapshot) error) error
	// Searchable reports whether the snapshots have a full-text index
	// (Snapshot.Index); without, the search endpoints fail with
	// SESSION_QUERY_SEARCH_DISABLED while exact reads keep working.
	Searchable() bool
}

// Snapshot is one consistent view of a projection.
type Snapshot interface {
	// Generation is the stream sequence through which the snapshot applied.
	Generation() uint64
	// Lineage is what cursors bind to: the stream and the projection
	// version (projection's Epoch) it was built from; projection.Snapshot's
	// Lineage and wire.Cursor's Lineage name the same value. Every replica
	// of one stream has the same, and a rebuild of the same stream keeps
	// it: a cursor continues on any of them.
	Lineage() string
	// Session returns a session by id; ok is false when there is none.
	Session(id string) (info dshq.SessionInfo, ok bool, err error)
	// Lookup returns the sessions of ids that exist (point lookups of many
	// ids at once).
	Lookup(ids []string) (map[string]dshq.SessionInfo, error)
	// Sessions yields the sessions in scan.Order (createdAt desc, id asc
	// (byte order) by default), starting strictly after scan.After (a
	// dshq.ListOrder.Key; nil = from the start). A failure is
	// yielded once, last; ErrMore ends a scan that has more sessions it
	// would have to fetch to name, after scan.Limit of them.
	Sessions(scan Scan) iter.Seq2[dshq.SessionInfo, error]
	// Children returns, for each of parentIDs, the sessions whose
	// parentSession it is, in any order (an id without children may be
	// absent from the map).
	Children(parentIDs []string) (map[string][]dshq.SessionInfo, error)
	// Event returns one stored event of a session.
	Event(id string, seq int64) (ev dshq.StoredEvent, ok bool, err error)
	// Events yields the stored events of a session from fromSeq in seq
	// order. A failure is yielded once, last.
	Events(id string, fromSeq int64) iter.Seq2[dshq.StoredEvent, error]
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
	// Index returns the full-text index searches of this snapshot ask, or
	// nil when the source is not Searchable.
	Index() Index
}

// Scan is what a list asks of Snapshot.Sessions. A local snapshot
// yields every session after After (the Engine applies the rest); a source
// that fetches sessions from elsewhere asks for those that match Filters
// and existed at AsOf, in pages of Limit.
type Scan struct {
	After   []byte
	AsOf    uint64
	Filters []dshq.Filter
	Limit   int
	// Order is the list's order ("" is dshq.OrderCreatedDesc).
	Order dshq.ListOrder
	// Summary says the sessions' summaries are wanted (a local snapshot
	// always has them; a remote source asks for them).
	Summary bool
}

// ErrMore is yielded by Snapshot.Sessions, after the scan's Limit sessions,
// when more follow that it would have to fetch to name: the Engine then
// knows the page has a next one without a round trip.
var ErrMore = errors.New("more sessions follow")

// Router is a Source whose sessions are held in parts, each answered by an
// engine of its own (the shards of a partitioned projection): a request of
// one session is handed whole to the part that holds it, whose engine
// answers it by these same rules, in one round trip.
type Router interface {
	// Route answers req, a request of the one session req.SessionID.
	Route(ctx context.Context, req *wire.Request) ([]byte, error)
}

// SessionHitter is an Index that builds sessions.search items where the
// sessions are (the shards of a partitioned projection build their own),
// rather than through the snapshot's point reads.
type SessionHitter interface {
	// SessionHits returns the items of keys, aligned with them (nil for a
	// key that no longer resolves), of which the first answered are
	// answered (a part answers as many as fit its reply). With counted it
	// first checks, as a later page does, that none of those sessions was
	// reclassified after since, or is invalid or gone
	// (SESSION_QUERY_STALE_CURSOR).
	SessionHits(ctx context.Context, phrase string, keys []HitKey, counted []string, since uint64) (hits []*dshq.SessionSearchHit, answered int, err error)
}

// Index is the full-text index of a snapshot. It ranks keys without
// loading docs and loads the docs of chosen keys afterwards: the Engine
// ranks a paged search's whole stored window as keys on its first page,
// stores only the keys, and loads docs and cuts snippets for each page it
// serves, so a common word costs a ranking pass, not thousands of snippets.
type Index interface {
	// CorpusStats returns the index's BM25 statistics of the normalized
	// phrase.
	CorpusStats(ctx context.Context, phrase string) (dshq.CorpusStats, error)
	// RankSessionKeys ranks sessions by their best matching event: BM25
	// (with q.Stats when set) with ties broken by time desc, session id
	// asc, seq desc; metadata filters are applied before ranking; at most
	// q.Limit keys.
	RankSessionKeys(ctx context.Context, q SearchQuery) (Ranked, error)
	// RankEventKeys ranks the matching events of session q.SessionID: BM25
	// with ties broken by time desc, seq desc; at most q.Limit keys.
	RankEventKeys(ctx context.Context, q SearchQuery) (Ranked, error)
	// LoadHits returns the hits of keys in their order, each with its
	// snippet around the phrase; a key whose doc is gone is left out.
	LoadHits(ctx context.Context, phrase string, keys []HitKey, snippetChars int) ([]dshq.EventSearchHit, error)
}

// SearchQuery is one index ranking: a literal phrase and metadata filters.
type SearchQuery struct {
	// Phrase is one literal phrase (never syntax), normalized.
	Phrase string
	// SessionID restricts an event ranking to one session.
	SessionID string
	// SessionFilters hold id, tenant, cwd, created-at, parent and
	// availability clauses.
	SessionFilters []dshq.Filter
	// LiveSessionIDs resolves availability: a session is live when its id
	// is listed; every projected session is persisted.
	LiveSessionIDs []string
	// EventFilters hold seq, time, type and surface clauses.
	EventFilters []dshq.Filter
	// Limit is the most keys to return.
	Limit int
	// AsOf, when non-zero, hides the events first indexed after that
	// generation. A search passes its snapshot's generation: the index
	// can be ahead of the snapshot (a batch is indexed before the store
	// commits it), and an event the snapshot does not hold must not take
	// a rank from one it holds (a session would be ranked by its newest
	// event, then dropped).
	AsOf uint64
	// Stats, when set, are the corpus's BM25 statistics to rank with (a
	// partitioned projection's sums) instead of the index's own.
	Stats *dshq.CorpusStats
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
