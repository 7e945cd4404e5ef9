package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// HitKey identifies one ranked event. Live is the session's availability
// as of a search's first page, stored for sessions.search so that later
// pages show the session as the first page saw it.
type HitKey struct {
	SessionID string `json:"s"`
	Seq       int64  `json:"q"`
	// Gen is the event's doc's creation generation, part of its identity
	// in the index (index.Key).
	Gen  uint64 `json:"g,omitempty"`
	Live bool   `json:"l,omitempty"`
	// Score and Time are the ranking's (a session ranking's; index.Key):
	// what a partitioned query service merges the shards' rankings by.
	// They are not stored.
	Score float64 `json:"-"`
	Time  int64   `json:"-"`
}

// Ranked is a ranking of keys.
type Ranked struct {
	Keys []HitKey
	// More is set when more keys follow.
	More bool
	// Generation is the generation of the index state the ranking read
	// (every page of it), or 0 when unknown. When it equals a snapshot's
	// generation and the index is the snapshot's own, the index held
	// exactly the snapshot's searchable events, so every key resolves in
	// the snapshot and no session it names is invalid.
	Generation uint64
	// Total is how many docs matched, when the ranking counted them
	// (event rankings), else 0.
	Total uint64
	// MaxResults, when not 0, is the bound the source cut the ranking at
	// (a partitioned projection's shards' own), which a later page past it
	// names; 0 is the Engine's.
	MaxResults int
	// Exact is set when the ranking read exactly the state of the snapshot
	// whose Index ranked (the index is the snapshot's own, at its
	// generation): then the keys need no check against the snapshot.
	Exact bool
}

// mirrors reports whether the ranking read exactly snap's state: the
// index vouches for being the snapshot's own (Exact), and the generation
// it read is the snapshot's. Then the keys need no check against it.
func (r Ranked) mirrors(snap Snapshot) bool {
	return r.Exact && r.Generation != 0 && r.Generation == snap.Generation()
}

type eventKey struct {
	sessionID string
	seq       int64
}

// buildFunc turns stored keys into a page's items, aligned with keys (a
// key that no longer resolves is nil), of which the first answered are
// answered. later, on a later page, names the sessions the results count
// and the first page's generation, for a builder that checks them itself
// (SessionHitter).
type buildFunc[T any] func(ctx context.Context, snap Snapshot, keys []HitKey, later *laterPage) (built []*T, answered int, err error)

// laterPage is what a later page's stale check needs.
type laterPage struct {
	counted []string
	since   uint64
}

// rankKeys ranks up to the Engine's max results. A session ranking visits
// every match whatever its limit, so it ranks the whole window at once. An
// event ranking first ranks one page and one more key, since Bleve sizes
// its collector by the limit; only when there is more than a page does it
// rank the window (bounded by the matches the probe counted). More reports
// that the search matched more than the window.
func rankKeys(ctx context.Context, e *Engine, limit int, q SearchQuery, probe bool, rank func(context.Context, SearchQuery) (Ranked, error)) (Ranked, error) {
	q.Limit = e.maxResults
	if probe {
		q.Limit = min(limit, e.maxResults)
	}
	r, err := rank(ctx, q)
	// Appends can land between the rankings, so a window sized by the
	// probe's count grows until it holds every match or the max results.
	for err == nil && r.More && q.Limit < e.maxResults {
		q.Limit = int(min(uint64(e.maxResults), max(r.Total, 2*uint64(q.Limit))))
		r, err = rank(ctx, q)
	}
	if err != nil {
		return Ranked{}, indexFailed(err)
	}
	return r, nil
}

// keySessions is the first page of sessions.search: the window rankWindow
// ranks, less the keys the snapshot does not hold, is served from and
// stored for later pages.
func (e *Engine) keySessions(ctx context.Context, ix Index, snap Snapshot, req *wire.Request, c *wire.Cursor, page dshq.SessionSearchPage) ([]dshq.SessionSearchHit, string, error) {
	w := window{sessions: []string{}}
	if !matchesNothing(req.SessionFilters) && !matchesNothing(req.EventFilters) {
		r, held, err := e.rankWindow(ctx, ix, snap, req)
		if err != nil {
			return nil, "", err
		}
		w.truncated, w.maxResults = r.More, r.MaxResults
		w.keys = make([]HitKey, 0, len(r.Keys))
		for i, k := range r.Keys {
			if held[i] {
				w.keys = append(w.keys, k)
				w.sessions = append(w.sessions, k.SessionID)
			}
		}
	}
	return firstKeyPage(ctx, e, snap, req, c, w, page, e.sessionHits(ix, req.Query))
}

// rankWindow ranks the window of a sessions.search first page, as of the
// snapshot's generation (so each session is ranked by an event the snapshot
// holds), up to the Engine's max results, the keys' availability resolved.
// held says of each key whether the snapshot holds it: its session, valid,
// and its event. The one ranking path of sessions.search: a first page
// serves the held keys; a shard of a partitioned projection answers
// sessions.rank with all of them, marked, so that the merge cuts the
// window where one index would.
func (e *Engine) rankWindow(ctx context.Context, ix Index, snap Snapshot, req *wire.Request) (Ranked, []bool, error) {
	liveIDs := snap.LiveSessions()
	q := SearchQuery{Phrase: req.Query, SessionFilters: req.SessionFilters, EventFilters: req.EventFilters,
		LiveSessionIDs: liveIDs, AsOf: snap.Generation(), Stats: req.CorpusStats}
	// The live set answers IsLive for every key without a lookup each.
	live := make(map[string]bool, len(liveIDs))
	for _, id := range liveIDs {
		live[id] = true
	}
	r, err := rankKeys(ctx, e, req.Limit, q, false, ix.RankSessionKeys)
	if err != nil {
		return Ranked{}, nil, err
	}
	mirrors := r.mirrors(snap)
	held := make([]bool, len(r.Keys))
	for i := range r.Keys {
		k := &r.Keys[i]
		k.Live = k.Live || live[k.SessionID]
		if held[i] = mirrors; mirrors {
			continue
		}
		info, ok, err := snap.Session(k.SessionID)
		if err != nil {
			return Ranked{}, nil, fmt.Errorf("read session %q: %w", k.SessionID, err)
		}
		if !ok || info.InvalidFrom >= 0 {
			continue
		}
		if held[i], err = holdsEvent(snap, *k); err != nil {
			return Ranked{}, nil, err
		}
	}
	return r, held, nil
}

// rankSessions answers sessions.rank, a shard's part of a partitioned
// projection's sessions.search (docs/protocol.md, "Partitioned
// projections"): the window rankWindow ranks with the corpus's statistics,
// every key with its score and time and whether this snapshot holds it. A
// window larger than a reply is stored (LoadRanking reads it) and named.
func (e *Engine) rankSessions(ctx context.Context, snap Snapshot, req *wire.Request) (any, error) {
	if err := wire.CheckSearchBudget(req); err != nil {
		return nil, err
	}
	out := wire.SessionRanking{Keys: []wire.RankedSession{}, MaxResults: e.maxResults, Generation: snap.Generation()}
	if matchesNothing(req.SessionFilters) || matchesNothing(req.EventFilters) {
		return out, nil
	}
	r, held, err := e.rankWindow(ctx, snap.Index(), snap, req)
	if err != nil {
		return nil, err
	}
	out.More = r.More
	for i, k := range r.Keys {
		out.Keys = append(out.Keys, wire.RankedSession{SessionID: k.SessionID, Seq: k.Seq, Gen: k.Gen,
			Live: k.Live, Score: k.Score, Time: k.Time, Drop: !held[i]})
	}
	if encodedSize(out)+cursorReserve > e.maxReply {
		id, chunks, err := e.storeHits(ctx, out.Keys, 0, nil, searchMeta{})
		if err != nil {
			return nil, err
		}
		out.Keys, out.Stored, out.Chunks = []wire.RankedSession{}, id, chunks
	}
	return out, nil
}

// keyEvents is the first page of events.search.
func (e *Engine) keyEvents(ctx context.Context, ix Index, snap Snapshot, req *wire.Request, c *wire.Cursor, page dshq.EventSearchPage) ([]dshq.EventSearchHit, string, error) {
	var kept []HitKey
	truncated := false
	if !matchesNothing(req.Filters) {
		q := SearchQuery{Phrase: req.Query, SessionID: req.SessionID, EventFilters: req.Filters, AsOf: snap.Generation(), Stats: req.CorpusStats}
		r, err := rankKeys(ctx, e, req.Limit, q, true, ix.RankEventKeys)
		if err != nil {
			return nil, "", err
		}
		truncated = r.More
		if kept, err = heldKeys(snap, r); err != nil {
			return nil, "", err
		}
	}
	w := window{keys: kept, sessions: []string{req.SessionID}, truncated: truncated}
	return firstKeyPage(ctx, e, snap, req, c, w, page, e.eventHits(ix, req.Query))
}

// heldKeys returns the keys of r that snap holds: all of them when the
// ranking read exactly snap's state.
func heldKeys(snap Snapshot, r Ranked) ([]HitKey, error) {
	if r.mirrors(snap) {
		return r.Keys, nil
	}
	var kept []HitKey
	for _, k := range r.Keys {
		ok, err := holdsEvent(snap, k)
		if err != nil {
			return nil, err
		}
		if ok {
			kept = append(kept, k)
		}
	}
	return kept, nil
}

func holdsEvent(snap Snapshot, k HitKey) (bool, error) {
	_, ok, err := snap.Event(k.SessionID, k.Seq)
	if err != nil {
		return false, fmt.Errorf("read event %d of %q: %w", k.Seq, k.SessionID, err)
	}
	return ok, nil
}

// ExactHitLoader is an Index that can say which of its states it read the
// hits it loads from: the generation of the snapshot's own index state,
// when it read that index. When that is the snapshot's generation, every
// hit's record is the snapshot's (the projector indexes a batch's docs,
// reclassified ones included, with the batch's generation), and the Engine
// reads no event back from the snapshot.
type ExactHitLoader interface {
	// LoadHitsAt is LoadHits that also returns the generation of the state
	// of the snapshot's own index the hits were read from, or 0 (another
	// index, or a state it cannot tell).
	LoadHitsAt(ctx context.Context, phrase string, keys []HitKey, snippetChars int) (hits []dshq.EventSearchHit, gen uint64, err error)
}

// loadHits loads the hits of keys from the index, by key; exact reports
// that they were read from exactly snap's own index state
// (ExactHitLoader).
func loadHits(ctx context.Context, ix Index, snap Snapshot, phrase string, keys []HitKey) (map[eventKey]dshq.EventSearchHit, bool, error) {
	var hits []dshq.EventSearchHit
	var gen uint64
	var err error
	if xl, ok := ix.(ExactHitLoader); ok {
		hits, gen, err = xl.LoadHitsAt(ctx, phrase, keys, dshq.SnippetChars)
	} else {
		hits, err = ix.LoadHits(ctx, phrase, keys, dshq.SnippetChars)
	}
	if err != nil {
		return nil, false, indexFailed(err)
	}
	by := make(map[eventKey]dshq.EventSearchHit, len(hits))
	for _, h := range hits {
		by[eventKey{h.SessionID, h.Seq}] = h
	}
	return by, gen != 0 && gen == snap.Generation(), nil
}

// eventHits builds events.search items: the snippet from the index, the
// record from the snapshot (the index's own when it read exactly the
// snapshot's state: the same record).
func (e *Engine) eventHits(ix Index, phrase string) buildFunc[dshq.EventSearchHit] {
	return func(ctx context.Context, snap Snapshot, keys []HitKey, _ *laterPage) ([]*dshq.EventSearchHit, int, error) {
		by, exact, err := loadHits(ctx, ix, snap, phrase, keys)
		if err != nil {
			return nil, 0, err
		}
		out := make([]*dshq.EventSearchHit, len(keys))
		for i, k := range keys {
			h, ok := by[eventKey{k.SessionID, k.Seq}]
			if !ok {
				continue
			}
			if !exact {
				if h, ok, err = resolveHit(snap, k.SessionID, h); err != nil {
					return nil, 0, err
				}
			}
			if ok {
				out[i] = &h
			}
		}
		return out, len(keys), nil
	}
}

// sessionHits builds sessions.search items: the header from the snapshot,
// availability as the key stored it; or, through a SessionHitter, where the
// sessions are.
func (e *Engine) sessionHits(ix Index, phrase string) buildFunc[dshq.SessionSearchHit] {
	if sh, ok := ix.(SessionHitter); ok {
		return func(ctx context.Context, _ Snapshot, keys []HitKey, later *laterPage) ([]*dshq.SessionSearchHit, int, error) {
			if later == nil {
				later = &laterPage{}
			}
			return sh.SessionHits(ctx, phrase, keys, later.counted, later.since)
		}
	}
	events := e.eventHits(ix, phrase)
	return func(ctx context.Context, snap Snapshot, keys []HitKey, later *laterPage) ([]*dshq.SessionSearchHit, int, error) {
		best, _, err := events(ctx, snap, keys, later)
		if err != nil {
			return nil, 0, err
		}
		out := make([]*dshq.SessionSearchHit, len(keys))
		for i, k := range keys {
			if best[i] == nil {
				continue
			}
			info, ok, err := snap.Session(k.SessionID)
			if err != nil {
				return nil, 0, fmt.Errorf("read session %q: %w", k.SessionID, err)
			}
			if ok {
				rec := dshq.SessionRecord{Header: info.Header.Header, Tenant: info.Tenant, Live: k.Live, Persisted: true}
				out[i] = &dshq.SessionSearchHit{SessionRecord: rec, BestMatch: *best[i]}
			}
		}
		return out, len(keys), nil
	}
}

// sessionsHits answers sessions.hits, a shard's part of a partitioned
// projection's sessions.search page: stale when a session of sessionIds
// (the later page's counted sessions this shard holds) changed since
// (checkCounted); else the hits of the keys, aligned with them (null for a
// key that no longer resolves), as many as fit the reply.
func (e *Engine) sessionsHits(ctx context.Context, snap Snapshot, req *wire.Request) (any, error) {
	var keys []HitKey
	if err := json.Unmarshal(req.Keys, &keys); err != nil {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "keys must be an array of ranked keys: %v", err)
	}
	if err := checkCounted(snap, req.SessionIDs, req.Since); err != nil {
		return nil, err
	}
	out := wire.SessionHits{Items: []*dshq.SessionSearchHit{}, Generation: snap.Generation()}
	if len(keys) == 0 {
		return out, nil
	}
	built, _, err := e.sessionHits(snap.Index(), req.Query)(ctx, snap, keys, nil)
	if err != nil {
		return nil, err
	}
	sz := e.sizer(out)
	for _, h := range built {
		if h != nil && !sz.add(*h) {
			break
		}
		out.Items = append(out.Items, h)
	}
	return out, nil
}

// firstKeyPage serves the first page of ranked keys and, when more remain
// (or the search was truncated), stores the keys after it so later pages
// are answered as of this one.
func firstKeyPage[T any](ctx context.Context, e *Engine, snap Snapshot, req *wire.Request, c *wire.Cursor, r window, empty any, build buildFunc[T]) ([]T, string, error) {
	keys := r.keys
	built, answered, err := build(ctx, snap, keys[:min(len(keys), req.Limit)], nil)
	if err != nil {
		return nil, "", err
	}
	items, used := fitPage(e, built[:answered], empty)
	if len(items) == 0 && len(keys) > 0 {
		return nil, "", tooLargeItem(req.Endpoint)
	}
	if used == len(keys) && !r.truncated {
		return items, "", nil
	}
	id, _, err := e.storeHits(ctx, keys, used, r.sessions, searchMeta{Truncated: r.truncated, Keys: true, MaxResults: r.maxResults})
	if err != nil {
		return nil, "", err
	}
	c.Store, c.Bound = id, int64(len(keys))
	return items, c.At(int64(used)), nil
}

// window is a first page's ranked keys: the sessions its results count,
// whether the search matched more (truncated) and, when a source cut the
// window at another bound than the Engine's, that bound.
type window struct {
	keys       []HitKey
	sessions   []string
	truncated  bool
	maxResults int
}

// fitPage returns the built items that fit the reply budget, in order, and
// how many keys they used (a key that no longer resolves is passed over).
func fitPage[T any](e *Engine, built []*T, empty any) ([]T, int) {
	sz := e.sizer(empty)
	items := []T{}
	used := 0
	for _, h := range built {
		if h != nil {
			if !sz.add(*h) {
				break
			}
			items = append(items, *h)
		}
		used++
	}
	return items, used
}
