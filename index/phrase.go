package index

import (
	"context"
	"sort"

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
	keep := func(_ *search.SearchContext, d *search.DocumentMatch) bool {
		positions := make(map[string][]uint64, len(distinct))
		for _, ftl := range d.FieldTermLocations {
			if ftl.Field == fieldText {
				positions[ftl.Term] = append(positions[ftl.Term], ftl.Location.Pos)
			}
		}
		_, ok := firstPhrase(positions, q.terms)
		// locations were only needed here; the caller did not ask for them
		d.FieldTermLocations = d.FieldTermLocations[:0]
		d.Locations = nil
		return ok
	}
	return searcher.NewFilteringSearcher(ctx, conj, keep), nil
}

// firstPhrase returns the lowest position at which terms occur consecutively,
// given each term's positions. It anchors on the query term with the fewest
// occurrences and probes the others in position sets: O(total positions +
// fewest occurrences × len(terms)).
func firstPhrase(positions map[string][]uint64, terms []string) (uint64, bool) {
	if len(terms) == 0 {
		return 0, false
	}
	anchor := 0
	for k, t := range terms {
		if len(positions[t]) < len(positions[terms[anchor]]) {
			anchor = k
		}
	}
	sets := make(map[string]map[uint64]struct{}, len(positions))
	for _, t := range terms {
		if _, ok := sets[t]; ok {
			continue
		}
		set := make(map[uint64]struct{}, len(positions[t]))
		for _, p := range positions[t] {
			set[p] = struct{}{}
		}
		sets[t] = set
	}
	starts := append([]uint64(nil), positions[terms[anchor]]...)
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	k := uint64(anchor)
next:
	for _, p := range starts {
		if p < k {
			continue
		}
		start := p - k
		for j, t := range terms {
			if _, ok := sets[t][start+uint64(j)]; !ok {
				continue next
			}
		}
		return start, true
	}
	return 0, false
}
