package index

import (
	"context"
	"math"
	"sort"
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
// and pass q.Filters. Errors: CodeInvalidFilter, CodeInvalidQuery,
// CodeInvalidLimit, CodeInvalidCursor (negative offset), CodeAborted,
// CodeIndexFailed.
func (x *Index) SearchEvents(ctx context.Context, q EventQuery) (Page, error) {
	var fs filterSet
	for _, f := range q.Filters {
		if err := fs.add(f, false, true, nil); err != nil {
			return Page{}, err
		}
	}
	if err := fs.checkBudget(MaxEventPredicates, fixedEventBindings); err != nil {
		return Page{}, err
	}
	text, err := NormalizeQuery(q.Query)
	if err != nil {
		return Page{}, err
	}
	limit, err := pageBounds(q.Offset, q.Limit, q.SnippetChars)
	if err != nil {
		return Page{}, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return Page{}, indexError(ErrClosed, "search events")
	}
	page := Page{Generation: x.gen.Load()}
	terms, tq := x.phrase(text)
	if tq == nil || fs.none {
		return page, nil
	}
	fs.addTerms(fieldSession, []string{q.SessionID})
	req := bleve.NewSearchRequestOptions(withFilters(tq, fs.clauses, q.AsOf, nil), limit+1, q.Offset, false)
	req.SortByCustom(rankOrder())
	res, err := x.idx.SearchInContext(ctx, req)
	if err != nil {
		return Page{}, indexError(err, "search events")
	}
	hits := res.Hits
	if len(hits) > limit {
		page.More = true
		hits = hits[:limit]
	}
	page.Hits, err = x.hits(ctx, hits, terms, x.snippetChars(q.SnippetChars))
	if err != nil {
		return Page{}, indexError(err, "search events")
	}
	return page, nil
}

// SearchSessions ranks sessions by their strongest doc containing the phrase
// q.Query: filters apply before ranking, each session appears once with its
// first doc in rank order, and sessions are ordered by that doc. Errors are as
// for SearchEvents.
func (x *Index) SearchSessions(ctx context.Context, q SessionQuery) (Page, error) {
	var fs filterSet
	for _, f := range q.SessionFilters {
		if err := fs.add(f, true, false, q.LiveSessionIDs); err != nil {
			return Page{}, err
		}
	}
	for _, f := range q.EventFilters {
		if err := fs.add(f, false, true, nil); err != nil {
			return Page{}, err
		}
	}
	if err := fs.checkBudget(MaxPredicates, fixedSessionBindings); err != nil {
		return Page{}, err
	}
	text, err := NormalizeQuery(q.Query)
	if err != nil {
		return Page{}, err
	}
	limit, err := pageBounds(q.Offset, q.Limit, q.SnippetChars)
	if err != nil {
		return Page{}, err
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return Page{}, indexError(ErrClosed, "search sessions")
	}
	page := Page{Generation: x.gen.Load()}
	terms, tq := x.phrase(text)
	if tq == nil || fs.none {
		return page, nil
	}
	best, err := x.bestPerSession(ctx, tq, fs.clauses, q.AsOf, q.Offset+limit+1)
	if err != nil {
		return Page{}, indexError(err, "search sessions")
	}
	if len(best) <= q.Offset {
		return page, nil
	}
	best = best[q.Offset:]
	if len(best) > limit {
		page.More = true
		best = best[:limit]
	}
	page.Hits, err = x.hits(ctx, best, terms, x.snippetChars(q.SnippetChars))
	if err != nil {
		return Page{}, indexError(err, "search sessions")
	}
	return page, nil
}

// bestPerSession returns, in rank order, the first-ranked doc of each of the
// first need sessions. Each round searches only sessions not yet seen (the
// seen ones are excluded, which changes no score), so every round yields at
// least one new session and a session with many matching docs costs one
// round, not a walk through all its docs.
func (x *Index) bestPerSession(ctx context.Context, tq query.Query, filters []query.Query, asOf uint64, need int) ([]*search.DocumentMatch, error) {
	var best []*search.DocumentMatch
	var seen []string
	seenSet := make(map[string]bool)
	round := min(max(2*need, 64), 10000)
	for len(best) < need {
		hits, exhausted, err := x.rankedPrefix(ctx, withFilters(tq, filters, asOf, seen), round)
		if err != nil {
			return nil, err
		}
		for _, h := range hits {
			if seenSet[h.sid] {
				continue
			}
			seenSet[h.sid] = true
			seen = append(seen, h.sid)
			best = append(best, h.DocumentMatch)
			if len(best) == need {
				break
			}
		}
		if exhausted {
			break
		}
		round = min(round*2, 10000)
	}
	return best, nil
}

// rankedHit is a match with the keys of the rank order.
type rankedHit struct {
	*search.DocumentMatch
	sid  string
	seq  int64
	time float64
}

// rankedPrefix returns the first matches of q in rank order (at least one
// when any doc matches) and whether they are all of q's matches. It ranks by
// score alone first, Bleve's fast path that reads no doc values; every doc
// scoring above the lowest of those size hits is certainly among them, so
// those hits ordered by the full key are an exact prefix. Only when all size
// hits tie does it sort by the full key inside Bleve, which reads the time,
// session and seq doc values of every match.
func (x *Index) rankedPrefix(ctx context.Context, q query.Query, size int) ([]rankedHit, bool, error) {
	req := bleve.NewSearchRequestOptions(q, size, 0, false)
	req.Fields = []string{fieldTime}
	res, err := x.idx.SearchInContext(ctx, req)
	if err != nil {
		return nil, false, err
	}
	ms := res.Hits
	exhausted := len(ms) < size
	if !exhausted {
		low := ms[len(ms)-1].Score
		n := 0
		for n < len(ms) && ms[n].Score > low {
			n++
		}
		ms = ms[:n]
	}
	if len(ms) == 0 && !exhausted {
		req.SortByCustom(rankOrder())
		if res, err = x.idx.SearchInContext(ctx, req); err != nil {
			return nil, false, err
		}
		ms, exhausted = res.Hits, len(res.Hits) < size
	}
	hits := make([]rankedHit, len(ms))
	for i, m := range ms {
		sid, seq, err := parseDocID(m.ID)
		if err != nil {
			return nil, false, err
		}
		t, _ := m.Fields[fieldTime].(float64)
		hits[i] = rankedHit{DocumentMatch: m, sid: sid, seq: seq, time: t}
	}
	sort.SliceStable(hits, func(i, j int) bool { return rankLess(hits[i], hits[j]) })
	return hits, exhausted, nil
}

// rankLess is the rank order: score desc, time desc, session id asc (bytes),
// seq desc.
func rankLess(a, b rankedHit) bool {
	switch {
	case a.Score != b.Score:
		return a.Score > b.Score
	case a.time != b.time:
		return a.time > b.time
	case a.sid != b.sid:
		return a.sid < b.sid
	}
	return a.seq > b.seq
}

// withFilters combines the text query with filter clauses. The clauses join
// the text query in one conjunction, so the most selective of them drives
// the search (a session's events are found without visiting every match in
// the index), and they are built with boost 0 so they add nothing to a
// score: filtering never changes ranking.
func withFilters(tq query.Query, clauses []query.Query, asOf uint64, exclude []string) query.Query {
	must := append([]query.Query{tq}, clauses...)
	if asOf > 0 {
		lim := float64(asOf)
		yes := true
		r := query.NewNumericRangeInclusiveQuery(nil, &lim, nil, &yes)
		r.SetField(fieldGen)
		r.SetBoost(0)
		must = append(must, r)
	}
	bq := query.NewBooleanQuery(must, nil, nil)
	if len(exclude) > 0 {
		bq.AddMustNot(termsQuery(fieldSession, exclude))
	}
	return bq
}

// hits loads the docs of ranked matches and cuts their snippets.
func (x *Index) hits(ctx context.Context, ms []*search.DocumentMatch, terms []string, snippetChars int) ([]Hit, error) {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	docs, err := x.fetch(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]Doc, len(docs))
	for _, s := range docs {
		byID[docID(s.doc.SessionID, s.doc.Seq)] = s.doc
	}
	out := make([]Hit, 0, len(ms))
	for _, m := range ms {
		d, ok := byID[m.ID]
		if !ok {
			continue // deleted between the search and the load
		}
		at := x.an.matchStart(d.Text, terms)
		out = append(out, Hit{Doc: d, Score: m.Score, Snippet: Snippet(d.Text, at, snippetChars)})
	}
	return out, nil
}
