package index

import (
	"context"
	"fmt"
	"math"

	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/blevesearch/bleve/v2/search/searcher"
	bindex "github.com/blevesearch/bleve_index_api"
	"github.com/dshq/dshq"
)

// Filter budgets, kept from the original's SQL backend (docs/search.md#budgets) so
// that a request means the same thing on either: at most MaxPredicates
// compiled predicates (MaxEventPredicates in event scope, where the session
// id takes one) and MaxBoundValues values including the fixed query and
// paging bindings.
const (
	MaxPredicates      = 14
	MaxEventPredicates = 13
	MaxBoundValues     = 32766
)

// The fixed bindings of the original's statements: query, limit and offset,
// plus the session id in event scope.
const (
	fixedSessionBindings = 3
	fixedEventBindings   = 4
)

func invalidFilter(format string, args ...any) error {
	return dshq.Errorf(dshq.CodeInvalidFilter, format, args...)
}

// filterSet accumulates the compiled filter clauses of one search.
type filterSet struct {
	clauses    []query.Query
	predicates int
	values     int
	// none is set when a clause can match nothing (an empty list).
	none bool
	// ranges are the numeric range filters, tested on each match's rank
	// key (see rankFilter).
	ranges []rankRange
}

// add compiles f into a clause. Session kinds are allowed only when session
// is true, event kinds only when event is true.
func (fs *filterSet) add(f dshq.Filter, session, event bool, live []string) error {
	switch f.Kind {
	case dshq.FilterID, dshq.FilterTenant, dshq.FilterHarness, dshq.FilterCwd, dshq.FilterParent, dshq.FilterCreatedAt, dshq.FilterAvailability:
		if !session {
			return invalidFilter("filter kind %q is not an event filter", f.Kind)
		}
	case dshq.FilterSeq, dshq.FilterTime, dshq.FilterType, dshq.FilterSurface:
		if !event {
			return invalidFilter("filter kind %q is not a session filter", f.Kind)
		}
	case dshq.FilterText:
		return invalidFilter("metadata filters do not accept text clauses")
	default:
		return invalidFilter("unknown filter kind %q", f.Kind)
	}
	switch f.Kind {
	case dshq.FilterID:
		return fs.list(f, fieldSession, false, nil)
	case dshq.FilterTenant:
		return fs.list(f, fieldTenant, true, nil)
	case dshq.FilterHarness:
		return fs.list(f, fieldHarness, true, nil)
	case dshq.FilterCwd:
		return fs.list(f, fieldCwd, true, nil)
	case dshq.FilterParent:
		return fs.list(f, fieldParent, true, nil)
	case dshq.FilterType:
		return fs.list(f, fieldType, false, nil)
	case dshq.FilterSurface:
		return fs.list(f, fieldSurface, false, func(v string) bool { return dshq.Surface(v).Valid() })
	case dshq.FilterAvailability:
		return fs.availability(f, live)
	default:
		return fs.rangeOf(f)
	}
}

// list compiles a list clause: field ∈ values (OR). A nil value is legal only
// for a nullable field and means "absent".
func (fs *filterSet) list(f dshq.Filter, field string, nullable bool, valid func(string) bool) error {
	fs.predicates++
	terms := make([]string, 0, len(f.Values))
	for _, v := range f.Values {
		switch {
		case v == nil && !nullable:
			return invalidFilter("%s filter values must be strings", f.Kind)
		case v != nil && valid != nil && !valid(*v):
			return invalidFilter("%s filter value %q is not allowed", f.Kind, *v)
		case nullable:
			terms = append(terms, nullableTerm(v))
		default:
			terms = append(terms, *v)
		}
	}
	fs.values += len(f.Values)
	fs.addTerms(field, terms)
	return nil
}

func (fs *filterSet) addTerms(field string, terms []string) {
	if len(terms) == 0 {
		fs.none = true
		return
	}
	fs.clauses = append(fs.clauses, termsQuery(field, terms))
}

// termsQuery matches docs whose field is one of terms (at least one). Its
// terms have boost 0: a filter scores nothing.
func termsQuery(field string, terms []string) query.Query {
	qs := make([]query.Query, len(terms))
	for i, t := range terms {
		tq := query.NewTermQuery(t)
		tq.SetField(field)
		tq.SetBoost(0)
		qs[i] = tq
	}
	if len(qs) == 1 {
		return qs[0]
	}
	return query.NewDisjunctionQuery(qs)
}

// availability: every indexed session is persisted (its header is in the
// stream); a session is live when its id is in live.
func (fs *filterSet) availability(f dshq.Filter, live []string) error {
	var isLive, persisted bool
	for _, v := range f.Values {
		switch {
		case v != nil && *v == "live":
			isLive = true
		case v != nil && *v == "persisted":
			persisted = true
		default:
			return invalidFilter("availability filter values must be \"live\" or \"persisted\"")
		}
	}
	switch {
	case persisted:
		return nil
	case isLive:
		fs.predicates++
		fs.addTerms(fieldSession, live)
	default:
		fs.predicates++
		fs.none = true
	}
	return nil
}

var rangeFields = map[string]string{
	dshq.FilterCreatedAt: fieldCreated,
	dshq.FilterSeq:       fieldSeq,
	dshq.FilterTime:      fieldTime,
}

// rangeOf compiles an inclusive range; each present endpoint is a predicate.
func (fs *filterSet) rangeOf(f dshq.Filter) error {
	for _, b := range []*float64{f.From, f.To} {
		if b != nil && (math.IsNaN(*b) || math.IsInf(*b, 0)) {
			return invalidFilter("%s filter bounds must be finite numbers", f.Kind)
		}
	}
	if f.From != nil && f.To != nil && *f.From > *f.To {
		return invalidFilter("%s filter has from greater than to", f.Kind)
	}
	if f.From == nil && f.To == nil {
		return nil
	}
	r := rankRange{field: rangeFields[f.Kind], lo: math.MinInt64, hi: math.MaxInt64}
	// The values are integers within ±2^53 (cleanDoc), so v ≥ from is
	// v ≥ ⌈from⌉ and v ≤ to is v ≤ ⌊to⌋; bounds beyond ±2^62 are clamped
	// there, where they exclude or include every value alike.
	const limit = 1 << 62
	if f.From != nil {
		r.lo = int64(math.Ceil(max(-limit, min(limit, *f.From))))
		fs.predicates++
		fs.values++
	}
	if f.To != nil {
		r.hi = int64(math.Floor(max(-limit, min(limit, *f.To))))
		fs.predicates++
		fs.values++
	}
	fs.ranges = append(fs.ranges, r)
	return nil
}

// rankRange is an inclusive range filter on one of the numbers a rank key
// carries: fieldCreated, fieldSeq or fieldTime.
type rankRange struct {
	field  string
	lo, hi int64
}

// rankFilter is the part of a search's filters that is tested on each match
// rather than searched: the numeric ranges and the AsOf bound (a doc first
// indexed after generation asOf is hidden; 0 = no bound). The numbers are
// read from the match's rank key doc value, which Bleve reads directly by
// doc number, so a filter costs one doc value read per candidate the other
// clauses let through and nothing at indexing time.
type rankFilter struct {
	ranges []rankRange
	asOf   uint64
}

func newRankFilter(ranges []rankRange, asOf uint64) *rankFilter {
	if len(ranges) == 0 && asOf == 0 {
		return nil
	}
	return &rankFilter{ranges: ranges, asOf: asOf}
}

// pass reports whether the doc with rank key k passes the filter.
func (f *rankFilter) pass(k []byte) (bool, error) {
	if len(k) < minRankKey {
		return false, fmt.Errorf("%w: short rank key (%d bytes)", ErrCorrupt, len(k))
	}
	if f.asOf > 0 {
		g, err := rankKeyGen(k)
		if err != nil {
			return false, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if g > f.asOf {
			return false, nil
		}
	}
	for _, r := range f.ranges {
		var v int64
		var err error
		switch r.field {
		case fieldCreated:
			v, err = rankKeyCreated(k)
		case fieldSeq:
			v, err = rankKeySeq(k)
		default:
			v, err = rankKeyTime(k)
		}
		if err != nil {
			return false, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		if v < r.lo || v > r.hi {
			return false, nil
		}
	}
	return true, nil
}

// filteredQuery wraps a query and drops the matches that fail f.
type filteredQuery struct {
	inner query.Query
	f     *rankFilter
}

// Searcher implements query.Query.
func (q filteredQuery) Searcher(ctx context.Context, r bindex.IndexReader, m mapping.IndexMapping, opts search.SearcherOptions) (search.Searcher, error) {
	s, dv, err := rankSearcher(ctx, q.inner, r, m, opts)
	if err != nil {
		return nil, err
	}
	return &filteredSearcher{Searcher: s, dv: dv, f: q.f}, nil
}

// rankSearcher returns inner's searcher and a reader of the rank key doc
// value, for a wrapper that reads each match's rank key.
func rankSearcher(ctx context.Context, inner query.Query, r bindex.IndexReader, m mapping.IndexMapping, opts search.SearcherOptions) (search.Searcher, bindex.DocValueReader, error) {
	s, err := inner.Searcher(ctx, r, m, opts)
	if err != nil {
		return nil, nil, err
	}
	dv, err := r.DocValueReader([]string{fieldRank})
	if err != nil {
		_ = s.Close()
		return nil, nil, err
	}
	return s, dv, nil
}

type filteredSearcher struct {
	search.Searcher
	dv   bindex.DocValueReader
	f    *rankFilter
	rank []byte
}

func (s *filteredSearcher) visit(_ string, term []byte) { s.rank = append(s.rank[:0], term...) }

func (s *filteredSearcher) Next(ctx *search.SearchContext) (*search.DocumentMatch, error) {
	d, err := s.Searcher.Next(ctx)
	return s.firstPassing(ctx, d, err)
}

func (s *filteredSearcher) Advance(ctx *search.SearchContext, id bindex.IndexInternalID) (*search.DocumentMatch, error) {
	d, err := s.Searcher.Advance(ctx, id)
	return s.firstPassing(ctx, d, err)
}

// firstPassing returns d when it passes the filter, else the first match
// after it that does; a failing match goes back to the pool.
func (s *filteredSearcher) firstPassing(ctx *search.SearchContext, d *search.DocumentMatch, err error) (*search.DocumentMatch, error) {
	for ; err == nil && d != nil; d, err = s.Searcher.Next(ctx) {
		s.rank = s.rank[:0]
		if err := s.dv.VisitDocValues(d.IndexInternalID, s.visit); err != nil {
			return nil, err
		}
		ok, err := s.f.pass(s.rank)
		if err != nil {
			return nil, err
		}
		if ok {
			return d, nil
		}
		ctx.DocumentMatchPool.Put(d)
	}
	return nil, err
}

// checkBudget enforces the original's predicate and binding budgets.
func (fs *filterSet) checkBudget(maxPredicates, fixedBindings int) error {
	if fs.predicates > maxPredicates {
		return invalidFilter("too many filter predicates: %d, at most %d", fs.predicates, maxPredicates)
	}
	if fs.values+fixedBindings > MaxBoundValues {
		return invalidFilter("too many filter values: %d, at most %d", fs.values, MaxBoundValues-fixedBindings)
	}
	return nil
}

// filterQuery matches the docs every clause matches and scores nothing:
// its searchers read no term frequencies or norms, and a conjunction of
// term clauses is one intersection of their postings (Bleve's unadorned
// conjunction) that the text query's searcher is advanced to. Its weight
// is 0, as the clauses' boost-0 terms weighed, so the query norm and every
// score stay those of the text query alone.
type filterQuery struct {
	clauses []query.Query
}

// Searcher implements query.Query.
func (q filterQuery) Searcher(ctx context.Context, r bindex.IndexReader, m mapping.IndexMapping, _ search.SearcherOptions) (search.Searcher, error) {
	opts := search.SearcherOptions{Score: "none"}
	subs := make([]search.Searcher, 0, len(q.clauses))
	for _, c := range q.clauses {
		s, err := c.Searcher(ctx, r, m, opts)
		if err != nil {
			for _, s := range subs {
				_ = s.Close()
			}
			return nil, err
		}
		subs = append(subs, s)
	}
	if len(subs) == 1 {
		return zeroWeight{subs[0]}, nil
	}
	s, err := searcher.NewConjunctionSearcher(ctx, r, subs, opts)
	if err != nil {
		for _, s := range subs {
			_ = s.Close()
		}
		return nil, err
	}
	return zeroWeight{s}, nil
}

// zeroWeight is a searcher that adds nothing to a query's norm.
type zeroWeight struct{ search.Searcher }

func (zeroWeight) Weight() float64        { return 0 }
func (zeroWeight) SetQueryNorm(_ float64) {}
