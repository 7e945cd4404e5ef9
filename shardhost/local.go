// Package shardhost hosts a projection shard: the engine.Source of a
// projector in this process (Local: its bbolt snapshots and its Bleve index)
// and the shard service dsh-projection on dsh.proj.<shard>.v1.<endpoint>
// (ServeShard, ServeReplica) that a projector process serves its Engine on.
package shardhost

import (
	"cmp"
	"context"
	"fmt"
	"iter"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/index"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/usage"
)

// Local is the engine.Source of a projector in this process: its snapshots
// and, unless made with NoSearch, the index its searches ask (the
// projector's current one, which a rebuild swaps).
func Local(p *projection.Projector, opts ...LocalOption) engine.Source {
	s := localSource{p: p, index: p.Index}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// LocalOption configures Local.
type LocalOption func(*localSource)

// NoSearch makes a source without an index: the engine's searches fail
// with SESSION_QUERY_SEARCH_DISABLED while exact reads keep working.
func NoSearch() LocalOption { return func(s *localSource) { s.index = nil } }

// WithIndex makes the source's searches ask the index current returns on
// each call rather than the projector's.
func WithIndex(current func() *index.Index) LocalOption {
	return func(s *localSource) { s.index = current }
}

type localSource struct {
	p     *projection.Projector
	index func() *index.Index
}

func (s localSource) Searchable() bool { return s.index != nil }

func (s localSource) View(ctx context.Context, minGeneration uint64, fn func(engine.Snapshot) error) error {
	return s.p.View(ctx, minGeneration, func(ps projection.Snapshot) error { return fn(snapshot{ps, s.index}) })
}

// snapshot presents a projection.Snapshot as an engine.Snapshot.
type snapshot struct {
	s     projection.Snapshot
	index func() *index.Index
}

func (a snapshot) Generation() uint64     { return a.s.Generation() }
func (a snapshot) Lineage() string        { return a.s.Lineage() }
func (a snapshot) IsLive(id string) bool  { return a.s.IsLive(id) }
func (a snapshot) LiveSessions() []string { return a.s.LiveSet() }

func (a snapshot) Session(id string) (dshq.SessionInfo, bool, error) {
	info, ok := a.s.Session(id)
	return info, ok, nil
}

func (a snapshot) Lookup(ids []string) (map[string]dshq.SessionInfo, error) {
	out := make(map[string]dshq.SessionInfo, len(ids))
	for _, id := range ids {
		if info, ok := a.s.Session(id); ok {
			out[id] = info
		}
	}
	return out, nil
}

// Sessions yields every session after scan.After in scan.Order: the
// engine applies the scan's filters and generation.
func (a snapshot) Sessions(scan engine.Scan) iter.Seq2[dshq.SessionInfo, error] {
	return func(yield func(dshq.SessionInfo, error) bool) {
		stopped := false
		err := a.s.SessionsInOrder(scan.Order, scan.After, func(info dshq.SessionInfo) bool {
			stopped = !yield(info, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield(dshq.SessionInfo{}, err)
		}
	}
}

func (a snapshot) Children(parentIDs []string) (map[string][]dshq.SessionInfo, error) {
	out := make(map[string][]dshq.SessionInfo, len(parentIDs))
	for _, parent := range parentIDs {
		for _, id := range a.s.Children(parent) {
			if info, ok := a.s.Session(id); ok {
				out[parent] = append(out[parent], info)
			}
		}
	}
	return out, nil
}

func (a snapshot) Event(id string, seq int64) (dshq.StoredEvent, bool, error) {
	ev, ok := a.s.Event(id, seq)
	return ev, ok, nil
}

func (a snapshot) Events(id string, fromSeq int64) iter.Seq2[dshq.StoredEvent, error] {
	return func(yield func(dshq.StoredEvent, error) bool) {
		stopped := false
		err := a.s.Events(id, fromSeq, func(ev dshq.StoredEvent) bool {
			stopped = !yield(ev, nil)
			return !stopped
		})
		if err != nil && !stopped {
			yield(dshq.StoredEvent{}, err)
		}
	}
}

func (a snapshot) SurfaceSeqs(id string) ([]int64, error) { return a.s.SurfaceSeqs(id), nil }

func (a snapshot) Closers(id string) ([]dshq.StoredEvent, error) { return a.s.Closers(id) }

func (a snapshot) Index() engine.Index {
	if a.index == nil {
		return nil
	}
	return indexOf{x: a.index(), own: a.s.Index(), gen: a.s.Generation()}
}

// indexOf is the Bleve index as an engine.Index: x is the index ranked,
// own and gen the snapshot's own index and generation (a ranking that read
// exactly them is Exact).
type indexOf struct {
	x, own *index.Index
	gen    uint64
}

func (s indexOf) CorpusStats(ctx context.Context, phrase string) (dshq.CorpusStats, error) {
	return s.x.CorpusStats(ctx, phrase)
}

// RankSessionKeys ranks sessions loading no doc: index pages of up to
// index.MaxLimit keys, all as of the first's generation.
func (s indexOf) RankSessionKeys(ctx context.Context, q engine.SearchQuery) (engine.Ranked, error) {
	st := q.Stats
	return s.rankPages(q.Limit, q.AsOf, func(offset, limit int, asOf uint64) (index.Ranking, error) {
		return s.x.RankSessions(ctx, index.SessionQuery{Query: q.Phrase, SessionFilters: q.SessionFilters,
			EventFilters: q.EventFilters, LiveSessionIDs: q.LiveSessionIDs, Offset: offset, Limit: limit, AsOf: asOf, Stats: st})
	})
}

// RankEventKeys ranks one session's events loading no doc.
func (s indexOf) RankEventKeys(ctx context.Context, q engine.SearchQuery) (engine.Ranked, error) {
	st := q.Stats
	return s.rankPages(q.Limit, q.AsOf, func(offset, limit int, asOf uint64) (index.Ranking, error) {
		return s.x.RankEvents(ctx, index.EventQuery{SessionID: q.SessionID, Query: q.Phrase, Filters: q.EventFilters,
			Offset: offset, Limit: limit, AsOf: asOf, Stats: st})
	})
}

// rankPages collects up to limit keys in rankings of up to index.MaxLimit,
// every page as of asOf (0: as of the first page's generation). The
// ranking's generation is the index state every page read, or 0 when they
// read different states (or none).
func (s indexOf) rankPages(limit int, asOf uint64, rank func(offset, limit int, asOf uint64) (index.Ranking, error)) (engine.Ranked, error) {
	var out engine.Ranked
	for page := 0; len(out.Keys) < limit; page++ {
		r, err := rank(len(out.Keys), min(index.MaxLimit, limit-len(out.Keys)), asOf)
		if err != nil {
			return engine.Ranked{}, err
		}
		if page == 0 {
			out.Generation, out.Total = r.Searched, r.Total
		} else if r.Searched != out.Generation {
			out.Generation = 0
		}
		asOf, out.More = cmp.Or(asOf, r.Generation), r.More
		for _, k := range r.Keys {
			out.Keys = append(out.Keys, engine.HitKey{SessionID: k.SessionID, Seq: k.Seq, Gen: k.Gen, Score: k.Score, Time: k.Time})
		}
		if !r.More || len(r.Keys) == 0 {
			break
		}
	}
	out.Exact = s.x != nil && s.x == s.own && out.Generation != 0 && out.Generation == s.gen
	return out, nil
}

// LoadHits loads the docs of keys and cuts their snippets.
func (s indexOf) LoadHits(ctx context.Context, phrase string, keys []engine.HitKey, snippetChars int) ([]dshq.EventSearchHit, error) {
	hits, _, err := s.LoadHitsAt(ctx, phrase, keys, snippetChars)
	return hits, err
}

// LoadHitsAt implements engine.ExactHitLoader: the generation of the index
// state the hits were read from when the index is the snapshot's own.
func (s indexOf) LoadHitsAt(ctx context.Context, phrase string, keys []engine.HitKey, snippetChars int) ([]dshq.EventSearchHit, uint64, error) {
	ks := make([]index.Key, len(keys))
	for i, k := range keys {
		ks[i] = index.Key{SessionID: k.SessionID, Seq: k.Seq, Gen: k.Gen}
	}
	hits, gen, err := s.x.HitsAt(ctx, phrase, ks, snippetChars)
	if err != nil {
		return nil, 0, err
	}
	out := make([]dshq.EventSearchHit, len(hits))
	for i, h := range hits {
		out[i] = h.EventHit()
	}
	if s.x == nil || s.x != s.own {
		gen = 0
	}
	return out, gen, nil
}

// UsageRows implements engine.UsageSource over the projection's usage
// aggregates.
func (a snapshot) UsageRows(from, to uint32, fn func(usage.Row) bool) error {
	r, ok := a.s.(projection.UsageReader)
	if !ok {
		return fmt.Errorf("the projection keeps no usage aggregates")
	}
	return r.UsageRows(from, to, fn)
}

// UsageSessions implements engine.UsageSource.
func (a snapshot) UsageSessions(fn func(string, usage.SessionDims) bool) error {
	r, ok := a.s.(projection.UsageReader)
	if !ok {
		return fmt.Errorf("the projection keeps no usage aggregates")
	}
	return r.UsageSessions(fn)
}

// UsageSession implements engine.UsageSource.
func (a snapshot) UsageSession(id string) (usage.SessionDims, bool) {
	r, ok := a.s.(projection.UsageReader)
	if !ok {
		return usage.SessionDims{}, false
	}
	return r.UsageSession(id)
}

// UsageTotals implements engine.UsageSource.
func (a snapshot) UsageTotals(roots bool, fn func(usage.Row) bool) error {
	r, ok := a.s.(projection.UsageReader)
	if !ok {
		return fmt.Errorf("the projection keeps no usage aggregates")
	}
	return r.UsageTotals(roots, fn)
}

// UsageCube implements engine.UsageSource.
func (a snapshot) UsageCube(kind usage.CubeKind, from, to uint32, fn func(usage.CubeRow) bool) error {
	r, ok := a.s.(projection.UsageReader)
	if !ok {
		return fmt.Errorf("the projection keeps no usage aggregates")
	}
	return r.UsageCube(kind, from, to, fn)
}
