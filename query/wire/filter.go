package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/dshq/dshq"
)

// filterScope says which clause kinds a filter array may hold.
type filterScope int

const (
	scopeSession       filterScope = iota // sessions.filter
	scopeSessionSearch                    // sessions.search sessionFilters
	scopeEvent                            // events.filter (text allowed)
	scopeEventSearch                      // search eventFilters / events.search filters
)

var (
	sessionKinds = []string{dshq.FilterID, dshq.FilterCwd, dshq.FilterCreatedAt, dshq.FilterParent, dshq.FilterAvailability, dshq.FilterTenant, dshq.FilterHarness}
	// listKinds are sessionKinds and the kinds sessions.filter alone
	// takes (additions; the index a search asks does not hold them).
	listKinds  = append(slices.Clone(sessionKinds), dshq.FilterMachine, dshq.FilterCwdPrefix)
	eventKinds = []string{dshq.FilterSeq, dshq.FilterTime, dshq.FilterType, dshq.FilterSurface}
	textKinds  = append(slices.Clone(eventKinds), dshq.FilterText)
)

// Search compile budgets (docs/search.md#budgets).
const (
	// MaxSearchPredicates is the most compiled predicates a search may hold.
	MaxSearchPredicates = 14
	// MaxSearchBindings is the most bound values a search may hold,
	// including its fixed bindings.
	MaxSearchBindings = 32766
	// sessionSearchFixedBindings: query, limit, offset.
	sessionSearchFixedBindings = 3
	// eventSearchFixedBindings: query, session id, limit, offset.
	eventSearchFixedBindings = 4
)

// decodeFilters validates and copies one filter array. A missing array is
// nil for the optional search arrays and an error for the filter endpoints.
func decodeFilters(raw json.RawMessage, name string, scope filterScope) ([]dshq.Filter, error) {
	if raw == nil && (scope == scopeSessionSearch || scope == scopeEventSearch) {
		return nil, nil
	}
	var items []json.RawMessage
	if jsonKind(raw) != kindArray || json.Unmarshal(raw, &items) != nil {
		got := "nothing"
		if raw != nil {
			got = jsonKind(raw).String()
		}
		return nil, dshq.Errorf(dshq.CodeInvalidFilter, "%s must be an array, got %s", name, got)
	}
	out := make([]dshq.Filter, 0, len(items))
	for i, it := range items {
		f, err := decodeClause(it, fmt.Sprintf("%s[%d]", name, i), scope)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func decodeClause(raw json.RawMessage, at string, scope filterScope) (dshq.Filter, error) {
	var f dshq.Filter
	var obj map[string]json.RawMessage
	if jsonKind(raw) != kindObject || json.Unmarshal(raw, &obj) != nil {
		return f, dshq.Errorf(dshq.CodeInvalidFilter, "%s must be an object, got %s", at, jsonKind(raw))
	}
	if jsonKind(obj["kind"]) != kindString || json.Unmarshal(obj["kind"], &f.Kind) != nil {
		return f, dshq.Errorf(dshq.CodeInvalidFilter, "%s.kind must be a string", at)
	}
	kinds := sessionKinds
	switch scope {
	case scopeSession:
		kinds = listKinds
	case scopeEvent:
		kinds = textKinds
	case scopeEventSearch:
		kinds = eventKinds
	}
	if f.Kind == dshq.FilterText && (scope == scopeSessionSearch || scope == scopeEventSearch) {
		return f, dshq.Errorf(dshq.CodeInvalidFilter, "metadata filters do not accept text clauses (%s)", at)
	}
	if !slices.Contains(kinds, f.Kind) {
		return f, dshq.Errorf(dshq.CodeInvalidFilter, "%s.kind must be one of %s, got %s", at, quoteList(kinds), dshq.Quote(string(f.Kind)))
	}
	allowed := []string{"kind", "values"}
	switch {
	case f.IsRange():
		allowed = []string{"kind", "from", "to"}
	case f.Kind == dshq.FilterText:
		allowed = []string{"kind", "text"}
	}
	for k := range obj {
		if !slices.Contains(allowed, k) {
			return f, dshq.Errorf(dshq.CodeInvalidFilter, "%s has unknown field %s for kind %q", at, dshq.Quote(k), f.Kind)
		}
	}
	switch {
	case f.IsRange():
		return f, decodeRange(obj, at, &f)
	case f.Kind == dshq.FilterText:
		return f, decodeText(obj, at, &f)
	}
	return f, decodeValues(obj, at, &f)
}

func decodeRange(obj map[string]json.RawMessage, at string, f *dshq.Filter) error {
	bound := func(name string) (*float64, error) {
		raw, ok := obj[name]
		if !ok {
			return nil, nil
		}
		v, ok := number(raw)
		if !ok || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, dshq.Errorf(dshq.CodeInvalidFilter, "%s.%s must be a finite number", at, name)
		}
		return &v, nil
	}
	var err error
	if f.From, err = bound("from"); err != nil {
		return err
	}
	if f.To, err = bound("to"); err != nil {
		return err
	}
	if f.From != nil && f.To != nil && *f.From > *f.To {
		return dshq.Errorf(dshq.CodeInvalidFilter, "%s.from must not be greater than %s.to", at, at)
	}
	return nil
}

func decodeText(obj map[string]json.RawMessage, at string, f *dshq.Filter) error {
	raw := obj["text"]
	if jsonKind(raw) != kindString || json.Unmarshal(raw, &f.Text) != nil {
		return dshq.Errorf(dshq.CodeInvalidFilter, "%s.text must be a string", at)
	}
	if len(splitJSSpace(f.Text)) == 0 {
		return dshq.Errorf(dshq.CodeInvalidFilter, "%s.text must not be blank", at)
	}
	return nil
}

func decodeValues(obj map[string]json.RawMessage, at string, f *dshq.Filter) error {
	nullable := f.Kind == dshq.FilterCwd || f.Kind == dshq.FilterParent || f.Kind == dshq.FilterTenant || f.Kind == dshq.FilterHarness ||
		f.Kind == dshq.FilterMachine
	want := "an array of strings"
	if nullable {
		want = "an array of strings or nulls"
	}
	var items []json.RawMessage
	raw := obj["values"]
	if jsonKind(raw) != kindArray || json.Unmarshal(raw, &items) != nil {
		return dshq.Errorf(dshq.CodeInvalidFilter, "%s.values must be %s", at, want)
	}
	f.Values = make([]*string, 0, len(items))
	for i, it := range items {
		if nullable && jsonKind(it) == kindNull {
			f.Values = append(f.Values, nil)
			continue
		}
		var s string
		if jsonKind(it) != kindString || json.Unmarshal(it, &s) != nil {
			return dshq.Errorf(dshq.CodeInvalidFilter, "%s.values must be %s; values[%d] is %s", at, want, i, jsonKind(it))
		}
		if closed := closedValues(f.Kind); closed != nil && !slices.Contains(closed, s) {
			return dshq.Errorf(dshq.CodeInvalidFilter, "%s.values[%d] must be one of %s, got %s", at, i, quoteList(closed), dshq.Quote(s))
		}
		f.Values = append(f.Values, &s)
	}
	return nil
}

func closedValues(kind string) []string {
	switch kind {
	case dshq.FilterAvailability:
		return []string{"live", "persisted"}
	case dshq.FilterSurface:
		return []string{string(dshq.SurfaceCurrent), string(dshq.SurfaceShadowed), string(dshq.SurfaceLogOnly)}
	}
	return nil
}

// canonicalFilters returns the filters in canonical form for a cursor
// fingerprint: list values sorted (nulls first, then byte order), ranges with
// explicit nulls, clauses sorted by their JSON text
// (docs/search.md#cursors-and-staleness).
func canonicalFilters(fs []dshq.Filter) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(fs))
	for _, f := range fs {
		var b []byte
		switch {
		case f.IsRange():
			b, _ = json.Marshal(struct {
				Kind string   `json:"kind"`
				From *float64 `json:"from"`
				To   *float64 `json:"to"`
			}{f.Kind, f.From, f.To})
		case f.Kind == dshq.FilterText:
			b, _ = json.Marshal(struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
			}{f.Kind, strings.Join(splitJSSpace(f.Text), " ")})
		default:
			vals := slices.Clone(f.Values)
			slices.SortFunc(vals, func(a, b *string) int {
				switch {
				case a == nil && b == nil:
					return 0
				case a == nil:
					return -1
				case b == nil:
					return 1
				}
				return strings.Compare(*a, *b)
			})
			b, _ = json.Marshal(dshq.Filter{Kind: f.Kind, Values: vals})
		}
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b json.RawMessage) int { return strings.Compare(string(a), string(b)) })
	return out
}

// budget is the predicate and binding count of compiled metadata filters,
// counted as the original compiles them to SQL: a list clause is one
// predicate (an empty list the constant false) binding its non-null values;
// availability with both values compiles to nothing; each range endpoint is
// one predicate with one binding.
func budget(fs []dshq.Filter) (predicates, bindings int) {
	for _, f := range fs {
		switch {
		case f.IsRange():
			for _, b := range []*float64{f.From, f.To} {
				if b != nil {
					predicates++
					bindings++
				}
			}
		case f.Kind == dshq.FilterAvailability:
			if len(distinct(f.Values)) != 2 {
				predicates++
			}
		default:
			predicates++
			for _, v := range f.Values {
				if v != nil {
					bindings++
				}
			}
		}
	}
	return predicates, bindings
}

// CheckSearchBudget enforces the search compile budgets on a decoded
// sessions.search or events.search request (SESSION_QUERY_INVALID_FILTER
// when its filters compile to too many predicates or bindings). The engine
// checks it after the cursor, as the original does.
func CheckSearchBudget(req *Request) error {
	if req.Endpoint == EndpointEventsSearch {
		return checkBudget(1, eventSearchFixedBindings, req.Filters)
	}
	return checkBudget(0, sessionSearchFixedBindings, req.SessionFilters, req.EventFilters)
}

// checkBudget enforces the search compile budgets. fixedPredicates is 1 for
// events.search (its session_id predicate).
func checkBudget(fixedPredicates, fixedBindings int, arrays ...[]dshq.Filter) error {
	p, b := fixedPredicates, fixedBindings
	for _, fs := range arrays {
		pp, bb := budget(fs)
		p, b = p+pp, b+bb
	}
	if p > MaxSearchPredicates {
		return dshq.Errorf(dshq.CodeInvalidFilter, "search filters compile to %d predicates; at most %d are allowed", p, MaxSearchPredicates)
	}
	if b > MaxSearchBindings {
		return dshq.Errorf(dshq.CodeInvalidFilter, "search filters bind %d values; at most %d are allowed", b, MaxSearchBindings)
	}
	return nil
}

func distinct(vals []*string) map[string]bool {
	m := map[string]bool{}
	for _, v := range vals {
		if v != nil {
			m[*v] = true
		}
	}
	return m
}

// jsSpaceClass is JavaScript's \s as an RE2 character class.
const jsSpaceClass = `[\t\n\v\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}]+`

// textPattern compiles a text clause as the original scans it: split on
// whitespace runs, each part literal, joined by "one or more whitespace",
// case-insensitive (simple Unicode case folding), unanchored.
func textPattern(text string) *regexp.Regexp {
	parts := splitJSSpace(text)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("(?i)" + strings.Join(parts, jsSpaceClass))
}

// SessionMatcher tests session records against session filters (the
// clauses ANDed, a clause's values ORed).
type SessionMatcher []dshq.Filter

// Match reports whether r passes every clause.
func (m SessionMatcher) Match(r dshq.SessionRecord) bool {
	for _, f := range m {
		if !matchSessionClause(f, r) {
			return false
		}
	}
	return true
}

func matchSessionClause(f dshq.Filter, r dshq.SessionRecord) bool {
	switch f.Kind {
	case dshq.FilterID:
		return inValues(f.Values, &r.Header.ID)
	case dshq.FilterTenant:
		var tenant *string
		if r.Tenant != "" {
			tenant = &r.Tenant
		}
		return inValues(f.Values, tenant)
	case dshq.FilterHarness:
		var harness *string
		if r.Header.Harness != "" {
			harness = &r.Header.Harness
		}
		return inValues(f.Values, harness)
	case dshq.FilterCwd:
		return inValues(f.Values, r.Header.Cwd)
	case dshq.FilterMachine:
		var machine *string
		if r.Header.Machine != "" {
			machine = &r.Header.Machine
		}
		return inValues(f.Values, machine)
	case dshq.FilterCwdPrefix:
		return underAny(f.Values, r.Header.Cwd)
	case dshq.FilterParent:
		return inValues(f.Values, r.Header.ParentSession)
	case dshq.FilterCreatedAt:
		return inRange(f, r.Header.CreatedAt)
	case dshq.FilterAvailability:
		d := distinct(f.Values)
		return (d["live"] && r.Live) || (d["persisted"] && r.Persisted)
	}
	return false
}

// EventMatcher tests search documents against event filters; text clauses
// are compiled once.
type EventMatcher struct {
	filters  []dshq.Filter
	patterns []*regexp.Regexp
}

// NewEventMatcher compiles fs, decoded event filters.
func NewEventMatcher(fs []dshq.Filter) *EventMatcher {
	m := &EventMatcher{filters: fs, patterns: make([]*regexp.Regexp, len(fs))}
	for i, f := range fs {
		if f.Kind == dshq.FilterText {
			m.patterns[i] = textPattern(f.Text)
		}
	}
	return m
}

// Match reports whether d passes every clause.
func (m *EventMatcher) Match(d dshq.SearchDocument) bool {
	for i, f := range m.filters {
		var ok bool
		switch f.Kind {
		case dshq.FilterSeq:
			ok = inRange(f, d.Seq)
		case dshq.FilterTime:
			ok = inRange(f, d.Time)
		case dshq.FilterType:
			ok = inValues(f.Values, &d.Type)
		case dshq.FilterSurface:
			s := string(d.Surface)
			ok = inValues(f.Values, &s)
		case dshq.FilterText:
			ok = m.patterns[i].MatchString(d.Text)
		}
		if !ok {
			return false
		}
	}
	return true
}

// SeqBounds returns the tightest seq range the filters allow, for scans
// (to < from when they allow none).
func (m *EventMatcher) SeqBounds() (from int64, to int64) {
	from, to = 0, math.MaxInt64
	for _, f := range m.filters {
		if f.Kind != dshq.FilterSeq {
			continue
		}
		if f.From != nil {
			from = max(from, int64(math.Ceil(max(*f.From, 0))))
		}
		if f.To != nil {
			if *f.To < 0 {
				return 0, -1
			}
			if *f.To < float64(math.MaxInt64) {
				to = min(to, int64(math.Floor(*f.To)))
			}
		}
	}
	return from, to
}

func inValues(vals []*string, v *string) bool {
	for _, x := range vals {
		if (x == nil && v == nil) || (x != nil && v != nil && *x == *v) {
			return true
		}
	}
	return false
}

// underAny reports whether cwd is one of dirs or under one (as usage.report's
// prefix: a directory and everything under it, a trailing "/" ignored).
func underAny(dirs []*string, cwd *string) bool {
	if cwd == nil {
		return false
	}
	for _, d := range dirs {
		if d == nil {
			continue
		}
		p := strings.TrimSuffix(*d, "/")
		if *cwd == p || strings.HasPrefix(*cwd, p+"/") {
			return true
		}
	}
	return false
}

func inRange(f dshq.Filter, v int64) bool {
	x := float64(v)
	return (f.From == nil || x >= *f.From) && (f.To == nil || x <= *f.To)
}
