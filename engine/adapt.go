package engine

import (
	"cmp"
	"context"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/index"
	"github.com/dshq/dshq/projection"
)

// FromProjector adapts a projector's read API to Projection.
func FromProjector(p *projection.Projector) Projection { return projectorSource{p} }

type projectorSource struct{ p *projection.Projector }

func (s projectorSource) View(ctx context.Context, minGeneration uint64, fn func(Snapshot) error) error {
	return s.p.View(ctx, minGeneration, func(ps projection.Snapshot) error { return fn(snapshotAdapter{ps}) })
}

// snapshotAdapter presents a projection.Snapshot as a Snapshot.
type snapshotAdapter struct{ s projection.Snapshot }

func (a snapshotAdapter) Generation() uint64     { return a.s.Generation() }
func (a snapshotAdapter) Epoch() string          { return a.s.Lineage() }
func (a snapshotAdapter) IsLive(id string) bool  { return a.s.IsLive(id) }
func (a snapshotAdapter) LiveSessions() []string { return a.s.LiveSet() }

func (a snapshotAdapter) Session(id string) (dshq.SessionInfo, bool, error) {
	info, ok := a.s.Session(id)
	return info, ok, nil
}

func (a snapshotAdapter) SessionsByCreated(afterKey []byte, fn func(dshq.SessionInfo) bool) error {
	return a.s.SessionsByCreated(afterKey, fn)
}

func (a snapshotAdapter) Children(parentID string) ([]dshq.SessionInfo, error) {
	ids := a.s.Children(parentID)
	out := make([]dshq.SessionInfo, 0, len(ids))
	for _, id := range ids {
		if info, ok := a.s.Session(id); ok {
			out = append(out, info)
		}
	}
	return out, nil
}

func (a snapshotAdapter) Event(id string, seq int64) (dshq.StoredEvent, bool, error) {
	ev, ok := a.s.Event(id, seq)
	return ev, ok, nil
}

func (a snapshotAdapter) Events(id string, fromSeq int64, fn func(dshq.StoredEvent) bool) error {
	return a.s.Events(id, fromSeq, fn)
}

// Index returns the index of the snapshot's projection build.
func (a snapshotAdapter) Index() *index.Index { return a.s.Index() }

func (a snapshotAdapter) SurfaceSeqs(id string) ([]int64, error) { return a.s.SurfaceSeqs(id), nil }

func (a snapshotAdapter) Closers(id string) ([]dshq.StoredEvent, error) { return a.s.Closers(id) }

// FromIndex adapts the Bleve index to Searcher. It collects up to q.Limit
// hits in index pages of up to index.MaxLimit, all read as of the index
// generation of the first page. The Searcher is a KeySearcher.
func FromIndex(x *index.Index) Searcher { return indexSearcher{x} }

// FromIndexFunc is FromIndex over the index current returns on each call
// (a projector's index, which a rebuild swaps). The Searcher is a
// KeySearcher.
func FromIndexFunc(current func() *index.Index) Searcher { return currentIndex(current) }

type currentIndex func() *index.Index

func (f currentIndex) SearchSessions(ctx context.Context, q SearchQuery) ([]SessionHit, error) {
	return indexSearcher{f()}.SearchSessions(ctx, q)
}

func (f currentIndex) SearchEvents(ctx context.Context, q SearchQuery) ([]dshq.EventSearchHit, error) {
	return indexSearcher{f()}.SearchEvents(ctx, q)
}

func (f currentIndex) RankSessionKeys(ctx context.Context, q SearchQuery) (Ranked, error) {
	return indexSearcher{f()}.RankSessionKeys(ctx, q)
}

func (f currentIndex) RankEventKeys(ctx context.Context, q SearchQuery) (Ranked, error) {
	return indexSearcher{f()}.RankEventKeys(ctx, q)
}

func (f currentIndex) LoadHits(ctx context.Context, phrase string, keys []HitKey, snippetChars int) ([]dshq.EventSearchHit, error) {
	return indexSearcher{f()}.LoadHits(ctx, phrase, keys, snippetChars)
}

type indexSearcher struct{ x *index.Index }

func (s indexSearcher) SearchSessions(ctx context.Context, q SearchQuery) ([]SessionHit, error) {
	var out []SessionHit
	asOf := q.AsOf
	for len(out) < q.Limit {
		page, err := s.x.SearchSessions(ctx, index.SessionQuery{Query: q.Phrase, SessionFilters: q.SessionFilters,
			EventFilters: q.EventFilters, LiveSessionIDs: q.LiveSessionIDs, Offset: len(out), Limit: min(index.MaxLimit, q.Limit-len(out)), AsOf: asOf})
		if err != nil {
			return nil, err
		}
		asOf = cmp.Or(asOf, page.Generation)
		for _, h := range page.Hits {
			out = append(out, SessionHit{SessionID: h.SessionID, BestMatch: h.EventHit()})
		}
		if !page.More || len(page.Hits) == 0 {
			break
		}
	}
	return out, nil
}

func (s indexSearcher) SearchEvents(ctx context.Context, q SearchQuery) ([]dshq.EventSearchHit, error) {
	var out []dshq.EventSearchHit
	asOf := q.AsOf
	for len(out) < q.Limit {
		page, err := s.x.SearchEvents(ctx, index.EventQuery{SessionID: q.SessionID, Query: q.Phrase, Filters: q.EventFilters,
			Offset: len(out), Limit: min(index.MaxLimit, q.Limit-len(out)), AsOf: asOf})
		if err != nil {
			return nil, err
		}
		asOf = cmp.Or(asOf, page.Generation)
		for _, h := range page.Hits {
			out = append(out, h.EventHit())
		}
		if !page.More || len(page.Hits) == 0 {
			break
		}
	}
	return out, nil
}

// RankSessionKeys ranks as SearchSessions does, loading no doc: index
// pages of up to index.MaxLimit keys, all as of the first's generation.
func (s indexSearcher) RankSessionKeys(ctx context.Context, q SearchQuery) (Ranked, error) {
	return s.rankPages(q.Limit, q.AsOf, func(offset, limit int, asOf uint64) (index.Ranking, error) {
		return s.x.RankSessions(ctx, index.SessionQuery{Query: q.Phrase, SessionFilters: q.SessionFilters,
			EventFilters: q.EventFilters, LiveSessionIDs: q.LiveSessionIDs, Offset: offset, Limit: limit, AsOf: asOf})
	})
}

// RankEventKeys ranks as SearchEvents does, loading no doc.
func (s indexSearcher) RankEventKeys(ctx context.Context, q SearchQuery) (Ranked, error) {
	return s.rankPages(q.Limit, q.AsOf, func(offset, limit int, asOf uint64) (index.Ranking, error) {
		return s.x.RankEvents(ctx, index.EventQuery{SessionID: q.SessionID, Query: q.Phrase, Filters: q.EventFilters,
			Offset: offset, Limit: limit, AsOf: asOf})
	})
}

// rankPages collects up to limit keys in rankings of up to index.MaxLimit,
// every page as of asOf (0: as of the first page's generation). The
// ranking's generation is the index state every page read, or 0 when they
// read different states (or none).
func (s indexSearcher) rankPages(limit int, asOf uint64, rank func(offset, limit int, asOf uint64) (index.Ranking, error)) (Ranked, error) {
	out := Ranked{index: s.x}
	for page := 0; len(out.Keys) < limit; page++ {
		r, err := rank(len(out.Keys), min(index.MaxLimit, limit-len(out.Keys)), asOf)
		if err != nil {
			return Ranked{}, err
		}
		if page == 0 {
			out.Generation, out.Total = r.Searched, r.Total
		} else if r.Searched != out.Generation {
			out.Generation = 0
		}
		asOf, out.More = cmp.Or(asOf, r.Generation), r.More
		for _, k := range r.Keys {
			out.Keys = append(out.Keys, HitKey{SessionID: k.SessionID, Seq: k.Seq, Gen: k.Gen, Score: k.Score, Time: k.Time})
		}
		if !r.More || len(r.Keys) == 0 {
			break
		}
	}
	return out, nil
}

// LoadHits loads the docs of keys and cuts their snippets.
func (s indexSearcher) LoadHits(ctx context.Context, phrase string, keys []HitKey, snippetChars int) ([]dshq.EventSearchHit, error) {
	ks := make([]index.Key, len(keys))
	for i, k := range keys {
		ks[i] = index.Key{SessionID: k.SessionID, Seq: k.Seq, Gen: k.Gen}
	}
	hits, err := s.x.Hits(ctx, phrase, ks, snippetChars)
	if err != nil {
		return nil, err
	}
	out := make([]dshq.EventSearchHit, len(hits))
	for i, h := range hits {
		out[i] = h.EventHit()
	}
	return out, nil
}
