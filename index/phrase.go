package index

import (
	"context"
	"slices"

	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/searcher"
	bindex "github.com/blevesearch/bleve_index_api"
)

// phraseQuery matches docs whose text holds terms at consecutive positions.
// Bleve's own phrase searcher enumerates every matching path, which is
// quadratic per doc in the occurrences of repeated terms and made a long
// repetitive query take minutes; this one ANDs the distinct terms (the same
// BM25 conjunction score) and then checks adjacency in one pass per doc,
// stopping at the first occurrence.
type phraseQuery struct {
	terms []string
}

// Searcher implements query.Query.
func (q phraseQuery) Searcher(ctx context.Context, r bindex.IndexReader, _ mapping.IndexMapping, opts search.SearcherOptions) (search.Searcher, error) {
	distinct := make([]string, 0, len(q.terms))
	seen := make(map[string]bool, len(q.terms))
	for _, t := range q.terms {
		if !seen[t] {
			seen[t] = true
			distinct = append(distinct, t)
		}
	}
	termOpts := opts
	termOpts.IncludeTermVectors = true
	subs := make([]search.Searcher, 0, len(distinct))
	closeAll := func() {
		for _, s := range subs {
			_ = s.Close()
		}
	}
	for _, t := range distinct {
		s, err := searcher.NewTermSearcher(ctx, r, t, fieldText, 1.0, termOpts)
		if err != nil {
			closeAll()
			return nil, err
		}
		subs = append(subs, s)
	}
	conj, err := searcher.NewConjunctionSearcher(ctx, r, subs, termOpts)
	if err != nil {
		closeAll()
		return nil, err
	}
	// seq is each query term's index in distinct; index finds a term's.
	seq := make([]int, len(q.terms))
	index := make(map[string]int, len(distinct))
	for i, t := range distinct {
		index[t] = i
	}
	for j, t := range q.terms {
		seq[j] = index[t]
	}
	// pos holds each distinct term's positions in the doc being checked;
	// the searcher is used by one goroutine, so it is reused across docs.
	pos := make([][]uint64, len(distinct))
	keep := func(_ *search.SearchContext, d *search.DocumentMatch) bool {
		for i := range pos {
			pos[i] = pos[i][:0]
		}
		for _, ftl := range d.FieldTermLocations {
			if ftl.Field != fieldText {
				continue
			}
			if i, ok := index[ftl.Term]; ok {
				pos[i] = append(pos[i], ftl.Location.Pos)
			}
		}
		for _, p := range pos {
			slices.Sort(p)
		}
		_, ok := phraseStart(pos, seq)
		// locations were only needed here; the caller did not ask for them
		d.FieldTermLocations = d.FieldTermLocations[:0]
		d.Locations = nil
		return ok
	}
	return searcher.NewFilteringSearcher(ctx, conj, keep), nil
}

// firstPhrase returns the lowest position at which terms occur consecutively,
// given each term's positions: phraseStart over the distinct terms.
func firstPhrase(positions map[string][]uint64, terms []string) (uint64, bool) {
	if len(terms) == 0 {
		return 0, false
	}
	index := make(map[string]int, len(terms))
	var pos [][]uint64
	seq := make([]int, len(terms))
	for j, t := range terms {
		i, ok := index[t]
		if !ok {
			i = len(pos)
			index[t] = i
			pos = append(pos, slices.Sorted(slices.Values(positions[t])))
		}
		seq[j] = i
	}
	return phraseStart(pos, seq)
}

// phraseStart returns the lowest position at which the terms seq names
// occur consecutively: seq[j] is the j-th query term's index in pos, and
// pos[i] holds that distinct term's positions in ascending order. It
// anchors on the query term with the fewest occurrences and looks the
// others up by binary search: O(fewest occurrences × len(seq) × log n),
// allocating nothing.
func phraseStart(pos [][]uint64, seq []int) (uint64, bool) {
	if len(seq) == 0 {
		return 0, false
	}
	anchor := 0
	for j, i := range seq {
		if len(pos[i]) < len(pos[seq[anchor]]) {
			anchor = j
		}
	}
	k := uint64(anchor)
next:
	for _, p := range pos[seq[anchor]] {
		if p < k {
			continue
		}
		start := p - k
		for j, i := range seq {
			if _, ok := slices.BinarySearch(pos[i], start+uint64(j)); !ok {
				continue next
			}
		}
		return start, true
	}
	return 0, false
}
