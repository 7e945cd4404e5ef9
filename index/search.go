package index

import (
	"context"
	"math"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/dshq/dshq"
)

// rankOrder is BM25 relevance, then time desc, session id asc (byte order),
// seq desc (one rankKey): a total order, since (session id, seq) identifies a
// doc.
func rankOrder() search.SortOrder {
	return search.SortOrder{
		&search.SortScore{Desc: true},
		&search.SortField{Field: fieldRank, Type: search.SortFieldAsString},
	}
}

// NormalizeQuery returns the query as the index reads it: sanitized (NUL,
// U+FDD0, U+FDD1 → U+FFFD), whitespace runs collapsed to one space, trimmed.
// A blank query is CodeInvalidQuery.
func NormalizeQuery(q string) (string, error) {
	q = strings.Join(strings.FieldsFunc(Sanitize(q), isJSSpace), " ")
	if q == "" {
		return "", dshq.Errorf(dshq.CodeInvalidQuery, "query must not be blank")
	}
	return q, nil
}

// phrase compiles a normalized query into a Bleve phrase over the text
// field: never the query-string parser, so every character is data. It
// returns nil when the query has no token (it matches nothing).
func (x *Index) phrase(q string) ([]string, query.Query) {
	terms := x.an.phraseTerms(q)
	switch len(terms) {
	case 0:
		return nil, nil
	case 1:
		tq := query.NewTermQuery(terms[0])
		tq.SetField(fieldText)
		return terms, tq
	}
	return terms, phraseQuery{terms: terms}
}

func pageBounds(offset, limit, snippet int) (int, error) {
	if limit == 0 {
		limit = dshq.DefaultSearchLimit
	}
	if limit < 1 || limit > MaxLimit {
		return 0, dshq.Errorf(dshq.CodeInvalidLimit, "limit must be an integer from 1 to %d, got %d", MaxLimit, limit)
	}
	if offset < 0 || offset > math.MaxInt32 {
		return 0, dshq.Errorf(dshq.CodeInvalidCursor, "offset must be from 0 to %d, got %d", math.MaxInt32, offset)
	}
	if snippet < 0 {
		return 0, dshq.Errorf(dshq.CodeInvalidConfig, "snippet chars must not be negative, got %d", snippet)
	}
	return limit, nil
}

func (x *Index) snippetChars(n int) int {
	if n == 0 {
		return x.opts.SnippetChars
	}
	return n
}

// SearchEvents ranks the docs of q.SessionID that contain the phrase q.Query
// and pass q.Filters, and loads the page's docs with their snippets: it is
// RankEvents then Hits. Errors: CodeInvalidFilter, CodeInvalidQuery,
// CodeInvalidLimit, CodeInvalidCursor (negative offset), CodeInvalidConfig
// (negative snippet chars), CodeAborted, CodeIndexFailed.
func (x *Index) SearchEvents(ctx context.Context, q EventQuery) (Page, error) {
	r, err := x.RankEvents(ctx, q)
	if err != nil {
		return Page{}, err
	}
	return x.page(ctx, r, q.Query, q.SnippetChars)
}

// SearchSessions ranks sessions by their strongest doc containing the phrase
// q.Query: filters apply before ranking, each session appears once with its
// first doc in rank order, and sessions are ordered by that doc. It is
// RankSessions then Hits; errors are as for SearchEvents.
func (x *Index) SearchSessions(ctx context.Context, q SessionQuery) (Page, error) {
	r, err := x.RankSessions(ctx, q)
	if err != nil {
		return Page{}, err
	}
	return x.page(ctx, r, q.Query, q.SnippetChars)
}

func (x *Index) page(ctx context.Context, r Ranking, q string, snippetChars int) (Page, error) {
	hits, err := x.Hits(ctx, q, r.Keys, snippetChars)
	if err != nil {
		return Page{}, err
	}
	return Page{Hits: hits, More: r.More, Generation: r.Generation}, nil
}

// RankEvents ranks as SearchEvents does but returns only the keys, in rank
// order: it reads no stored doc and cuts no snippet, so ranking thousands of
// hits costs little more than ranking a page. Hits then loads the docs of
// the keys a page shows. Errors are as for SearchEvents.
func (x *Index) RankEvents(ctx context.Context, q EventQuery) (Ranking, error) {
	var fs filterSet
	for _, f := range q.Filters {
		if err := fs.add(f, false, true, nil); err != nil {
			return Ranking{}, err
		}
	}
	text, limit, err := fs.prepare(MaxEventPredicates, fixedEventBindings, q.Query, q.Offset, q.Limit, q.SnippetChars)
	if err != nil {
		return Ranking{}, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	r, tq, err := x.start(text, &fs, q.Stats, "search events")
	if err != nil || tq == nil {
		return r, err
	}
	fs.addTerms(fieldSession, []string{q.SessionID})
	inner, f := withFilters(tq, &fs, q.AsOf)
	if f != nil {
		inner = filteredQuery{inner: inner, f: f}
	}
	req := bleve.NewSearchRequestOptions(genQuery{inner: inner, out: &r.Searched}, limit+1, q.Offset, false)
	req.SortByCustom(rankOrder())
	res, err := x.idx.SearchInContext(ctx, req)
	if err != nil {
		return Ranking{}, indexError(err, "search events")
	}
	r.Total = res.Total
	ms := res.Hits
	if len(ms) > limit {
		r.More = true
		ms = ms[:limit]
	}
	r.Keys = make([]Key, len(ms))
	for i, m := range ms {
		gen, sid, seq, err := ParseDocID(m.ID)
		if err != nil {
			return Ranking{}, indexError(err, "search events")
		}
		r.Keys[i] = Key{SessionID: sid, Seq: seq, Gen: gen, Score: m.Score}
	}
	return r, nil
}

// RankSessions ranks as SearchSessions does but returns only each session's
// key (its strongest doc), in rank order, reading no stored doc and cutting
// no snippet; Hits loads the docs a page shows. Errors are as for
// SearchEvents.
func (x *Index) RankSessions(ctx context.Context, q SessionQuery) (Ranking, error) {
	var fs filterSet
	for _, f := range q.SessionFilters {
		if err := fs.add(f, true, false, q.LiveSessionIDs); err != nil {
			return Ranking{}, err
		}
	}
	for _, f := range q.EventFilters {
		if err := fs.add(f, false, true, nil); err != nil {
			return Ranking{}, err
		}
	}
	text, limit, err := fs.prepare(MaxPredicates, fixedSessionBindings, q.Query, q.Offset, q.Limit, q.SnippetChars)
	if err != nil {
		return Ranking{}, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	r, tq, err := x.start(text, &fs, q.Stats, "search sessions")
	if err != nil || tq == nil {
		return r, err
	}
	best, err := x.bestPerSession(ctx, tq, &fs, q.AsOf, q.Offset+limit+1, &r.Searched)
	if err != nil {
		return Ranking{}, indexError(err, "search sessions")
	}
	if len(best) <= q.Offset {
		return r, nil
	}
	best = best[q.Offset:]
	if len(best) > limit {
		r.More = true
		best = best[:limit]
	}
	r.Keys = best
	return r, nil
}

// withFilters combines the text query with filter clauses. The clauses join
// the text query in one conjunction (several of them as one filterQuery),
// so the most selective of them drives the search (a session's events are
// found without visiting every match in the index), and they score
// nothing (boost 0, or no scoring at all in a filterQuery): filtering never
// changes ranking. The numeric ranges and asOf are
// tested on each match that passes (rankFilter).
func withFilters(tq query.Query, fs *filterSet, asOf uint64) (query.Query, *rankFilter) {
	// Without clauses the text query stands alone: a conjunction of one
	// would score as its conjunct (the sum of one score) but add a
	// searcher and a scorer call per match.
	q := tq
	switch {
	case len(fs.clauses) == 1:
		q = query.NewConjunctionQuery([]query.Query{tq, fs.clauses[0]})
	case len(fs.clauses) > 1:
		// Several clauses are one intersection of their postings
		// (filterQuery). One alone is cheaper as it is: BenchmarkCommonPhrase's
		// RankEventsPhrase took 0.31 CPU-ms through filterQuery, 0.23 without.
		q = query.NewConjunctionQuery([]query.Query{tq, filterQuery{clauses: fs.clauses}})
	}
	return q, newRankFilter(fs.ranges, asOf)
}

// Hits loads the docs of keys (as RankEvents or RankSessions return them)
// and cuts each one's snippet around the first occurrence of the phrase q,
// keeping the keys' order and scores; a key whose doc is no longer indexed
// is skipped. snippetChars 0 means Options.SnippetChars. Errors:
// CodeInvalidQuery, CodeInvalidConfig, CodeAborted, CodeIndexFailed.
func (x *Index) Hits(ctx context.Context, q string, keys []Key, snippetChars int) ([]Hit, error) {
	hits, _, err := x.HitsAt(ctx, q, keys, snippetChars)
	return hits, err
}

// HitsAt is Hits that also returns the generation of the index state the
// docs were read from (0 when it read none, or cannot tell): when it is the
// generation of a projection snapshot this index belongs to, every hit is
// exactly as that snapshot holds its event.
func (x *Index) HitsAt(ctx context.Context, q string, keys []Key, snippetChars int) ([]Hit, uint64, error) {
	text, err := NormalizeQuery(q)
	if err != nil {
		return nil, 0, err
	}
	if snippetChars < 0 {
		return nil, 0, dshq.Errorf(dshq.CodeInvalidConfig, "snippet chars must not be negative, got %d", snippetChars)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return nil, 0, indexError(ErrClosed, "load hits")
	}
	if len(keys) == 0 {
		return []Hit{}, 0, nil
	}
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = docID(k.Gen, k.SessionID, k.Seq)
	}
	byID, gen, err := x.loadDocs(ctx, ids)
	if err != nil {
		return nil, 0, indexError(err, "load hits")
	}
	terms := x.an.phraseTerms(text)
	chars := x.snippetChars(snippetChars)
	out := make([]Hit, 0, len(keys))
	for i, k := range keys {
		st, ok := byID[ids[i]]
		if !ok {
			continue // deleted between the ranking and the load
		}
		d := st.doc
		at := x.an.pageMatchStart(d.Text, terms)
		out = append(out, Hit{Doc: d, Score: k.Score, Snippet: Snippet(d.Text, at, chars)})
	}
	return out, gen, nil
}

// prepare checks the filters' budget, normalizes the query and bounds the
// page: the validation both rankings share, in the original's order.
func (fs *filterSet) prepare(maxPredicates, fixedBindings int, query string, offset, limit, snippetChars int) (string, int, error) {
	if err := fs.checkBudget(maxPredicates, fixedBindings); err != nil {
		return "", 0, err
	}
	text, err := NormalizeQuery(query)
	if err != nil {
		return "", 0, err
	}
	limit, err = pageBounds(offset, limit, snippetChars)
	if err != nil {
		return "", 0, err
	}
	return text, limit, nil
}

// start returns the ranking's generation and the phrase query of text, or a
// nil query when nothing can match (no token, or a filter that matches
// nothing); with st, the phrase ranks with those corpus statistics. x.mu
// must be held for reading.
func (x *Index) start(text string, fs *filterSet, st *CorpusStats, op string) (Ranking, query.Query, error) {
	if x.idx == nil {
		return Ranking{}, nil, indexError(ErrClosed, "%s", op)
	}
	r := Ranking{Generation: x.gen.Load()}
	_, tq := x.phrase(text)
	if tq == nil || fs.none {
		return r, nil, nil
	}
	if st != nil {
		tq = statsQuery{inner: tq, st: st}
	}
	return r, tq, nil
}
