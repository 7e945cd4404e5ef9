// Package toolstest provides an in-memory implementation of tools.Service
// with the trusted query API's semantics (docs/query.md, docs/search.md): real
// folds (package fold), filters ANDed and ORed as the service does, search
// that ignores workspaces (the service is trusted; the tools must authorize),
// paging with generation-bound cursors, lineage with cycle detection, read
// windows and event traces. Tests of the tools run against it and against
// the real pipeline alike.
package toolstest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/record"
)

// DefaultPageSize is the page size of a search without a limit (the
// service's default limit).
const DefaultPageSize = dshq.DefaultSearchLimit

// Call is one recorded service call.
type Call struct {
	Op      string
	Request any
}

type session struct {
	rec    dshq.SessionRecord
	events []dshq.Event
	fold   *fold.Result
	// invalid is the fold failure, nil for a valid log.
	invalid error
}

// Fake is an in-memory query service. It is safe for concurrent use.
type Fake struct {
	mu sync.Mutex // guards every field below
	// sessions by id.
	sessions map[string]*session
	// generation changes on every corpus change; cursors carry it.
	generation uint64
	calls      []Call
	pageSize   int
	fail       func(op string) error
}

// New returns an empty Fake.
func New() *Fake {
	return &Fake{sessions: map[string]*session{}, pageSize: DefaultPageSize}
}

// SetPageSize sets the page size of searches (default DefaultPageSize).
func (f *Fake) SetPageSize(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageSize = n
}

// FailWith makes every call for which fn returns an error fail with it
// (injection of service failures). nil clears it.
func (f *Fake) FailWith(fn func(op string) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fn
}

// Calls returns the calls made so far.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// AddJSONL adds a session from a log in the upstream JSONL layout (header
// line, then one event per line). live marks it as held by a harness.
func (f *Fake) AddJSONL(jsonl []byte, live bool) error {
	sc := bufio.NewScanner(bytes.NewReader(jsonl))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	var (
		h      dshq.HeaderRecord
		events []dshq.Event
		first  = true
	)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if first {
			var err error
			if h, err = record.ParseHeader(slices.Clone(line)); err != nil {
				return fmt.Errorf("header: %w", err)
			}
			first = false
			continue
		}
		e, err := record.ParseEvent(slices.Clone(line))
		if err != nil {
			return fmt.Errorf("event %d: %w", len(events), err)
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if first {
		return fmt.Errorf("empty log")
	}
	f.Add(h, events, live)
	return nil
}

// Add adds (or replaces) a session of no tenant.
func (f *Fake) Add(h dshq.HeaderRecord, events []dshq.Event, live bool) {
	f.AddInTenant("", h, events, live)
}

// AddInTenant adds (or replaces) a session of tenant ("" for none), as the
// projection holds a session written on dsh.log.<tenant>.<token>.
func (f *Fake) AddInTenant(tenant string, h dshq.HeaderRecord, events []dshq.Event, live bool) {
	res, err := fold.Fold(h, events, fold.Lenient)
	s := &session{
		rec:     dshq.SessionRecord{Header: h.Header, Tenant: tenant, Live: live, Persisted: true},
		events:  events,
		fold:    res,
		invalid: err,
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sessions[h.Header.ID] = s
	f.generation++
}

// begin records a call and returns an injected failure, if any.
func (f *Fake) begin(ctx context.Context, op string, req any) error {
	f.calls = append(f.calls, Call{Op: op, Request: req})
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.fail != nil {
		return f.fail(op)
	}
	return nil
}

// byNewest orders records createdAt desc, id asc (byte order).
func byNewest(a, b *session) int {
	if a.rec.Header.CreatedAt != b.rec.Header.CreatedAt {
		if a.rec.Header.CreatedAt > b.rec.Header.CreatedAt {
			return -1
		}
		return 1
	}
	return strings.Compare(a.rec.Header.ID, b.rec.Header.ID)
}

func (f *Fake) sorted() []*session {
	out := make([]*session, 0, len(f.sessions))
	for _, s := range f.sessions {
		out = append(out, s)
	}
	slices.SortFunc(out, byNewest)
	return out
}

// FilterSessions implements tools.Service.
func (f *Fake) FilterSessions(ctx context.Context, filters []dshq.Filter) ([]dshq.SessionRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "sessions.filter", filters); err != nil {
		return nil, err
	}
	if err := checkFilters(filters, sessionKinds); err != nil {
		return nil, err
	}
	out := []dshq.SessionRecord{}
	for _, s := range f.sorted() {
		if matchSession(s.rec, filters) {
			out = append(out, s.rec)
		}
	}
	return out, nil
}

var (
	sessionKinds = []string{dshq.FilterID, dshq.FilterCwd, dshq.FilterCreatedAt, dshq.FilterParent, dshq.FilterAvailability, dshq.FilterTenant}
	eventKinds   = []string{dshq.FilterSeq, dshq.FilterTime, dshq.FilterType, dshq.FilterSurface}
)

func checkFilters(filters []dshq.Filter, kinds []string) error {
	for _, fl := range filters {
		if !slices.Contains(kinds, fl.Kind) {
			return dshq.Errorf(dshq.CodeInvalidFilter, "unknown filter kind %q", fl.Kind)
		}
		if fl.IsRange() && fl.From != nil && fl.To != nil && *fl.From > *fl.To {
			return dshq.Errorf(dshq.CodeInvalidFilter, "%s range from must be less than or equal to to", fl.Kind)
		}
		for _, v := range fl.Values {
			if v == nil && fl.Kind != dshq.FilterCwd && fl.Kind != dshq.FilterParent && fl.Kind != dshq.FilterTenant {
				return dshq.Errorf(dshq.CodeInvalidFilter, "%s values must be strings", fl.Kind)
			}
		}
	}
	return nil
}

func inList(values []*string, v *string) bool {
	for _, x := range values {
		if (x == nil && v == nil) || (x != nil && v != nil && *x == *v) {
			return true
		}
	}
	return false
}

func inRange(fl dshq.Filter, v int64) bool {
	return (fl.From == nil || float64(v) >= *fl.From) && (fl.To == nil || float64(v) <= *fl.To)
}

func matchSession(r dshq.SessionRecord, filters []dshq.Filter) bool {
	for _, fl := range filters {
		ok := false
		switch fl.Kind {
		case dshq.FilterID:
			ok = inList(fl.Values, &r.Header.ID)
		case dshq.FilterCwd:
			ok = inList(fl.Values, r.Header.Cwd)
		case dshq.FilterTenant:
			var tenant *string
			if r.Tenant != "" {
				tenant = &r.Tenant
			}
			ok = inList(fl.Values, tenant)
		case dshq.FilterParent:
			ok = inList(fl.Values, r.Header.ParentSession)
		case dshq.FilterCreatedAt:
			ok = inRange(fl, r.Header.CreatedAt)
		case dshq.FilterAvailability:
			ok = (r.Live && inList(fl.Values, dshq.Str("live"))) || (r.Persisted && inList(fl.Values, dshq.Str("persisted")))
		}
		if !ok {
			return false
		}
	}
	return true
}

func matchEvent(d dshq.SearchDocument, filters []dshq.Filter) bool {
	for _, fl := range filters {
		ok := false
		switch fl.Kind {
		case dshq.FilterSeq:
			ok = inRange(fl, d.Seq)
		case dshq.FilterTime:
			ok = inRange(fl, d.Time)
		case dshq.FilterType:
			ok = inList(fl.Values, &d.Type)
		case dshq.FilterSurface:
			s := string(d.Surface)
			ok = inList(fl.Values, &s)
		}
		if !ok {
			return false
		}
	}
	return true
}

// tokens splits text into lowercase alphanumeric tokens.
func tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// matches counts non-overlapping occurrences of the phrase in text.
func matches(text string, phrase []string) int {
	if len(phrase) == 0 {
		return 0
	}
	toks := tokens(text)
	n := 0
	for i := 0; i+len(phrase) <= len(toks); {
		if slices.Equal(toks[i:i+len(phrase)], phrase) {
			n++
			i += len(phrase)
			continue
		}
		i++
	}
	return n
}

func snippet(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(s) <= dshq.SnippetChars {
		return s
	}
	r := []rune(s)
	return string(r[:dshq.SnippetChars-1]) + "…"
}

type candidate struct {
	hit   dshq.EventSearchHit
	count int
	size  int
}

// better orders candidates by match count desc, length asc, time desc, then
// (across sessions) id asc, then seq desc.
func better(a, b candidate) int {
	switch {
	case a.count != b.count:
		return b.count - a.count
	case a.size != b.size:
		return a.size - b.size
	case a.hit.Time != b.hit.Time:
		if a.hit.Time > b.hit.Time {
			return -1
		}
		return 1
	case a.hit.SessionID != b.hit.SessionID:
		return strings.Compare(a.hit.SessionID, b.hit.SessionID)
	case a.hit.Seq != b.hit.Seq:
		if a.hit.Seq > b.hit.Seq {
			return -1
		}
		return 1
	}
	return 0
}

func (f *Fake) candidates(s *session, phrase []string, filters []dshq.Filter) []candidate {
	if s.invalid != nil {
		return nil
	}
	var out []candidate
	for _, d := range s.fold.Documents() {
		d.SessionID = s.rec.Header.ID
		if !matchEvent(d, filters) {
			continue
		}
		if n := matches(d.Text, phrase); n > 0 {
			out = append(out, candidate{
				hit:   dshq.EventSearchHit{EventRecord: d.EventRecord, Snippet: snippet(d.Text)},
				count: n, size: utf8.RuneCountInString(d.Text)})
		}
	}
	return out
}

func checkQuery(q string) ([]string, error) {
	q = strings.Join(strings.Fields(q), " ")
	if q == "" || strings.ContainsRune(q, 0) {
		return nil, dshq.Errorf(dshq.CodeInvalidQuery, "query must be non-blank text without NUL")
	}
	return tokens(q), nil
}

// page cuts items at cursor (an offset bound to the generation).
func (f *Fake) page(n int, cursor string) (start, end int, next string, err error) {
	if cursor != "" {
		gen, off, ok := strings.Cut(cursor, ":")
		o, err := strconv.Atoi(off)
		if !ok || err != nil || o < 0 {
			return 0, 0, "", dshq.Errorf(dshq.CodeInvalidCursor, "cursor %q is invalid", cursor)
		}
		if gen != strconv.FormatUint(f.generation, 10) {
			return 0, 0, "", dshq.Errorf(dshq.CodeStaleCursor, "cursor is stale because its relevant corpus changed")
		}
		start = min(o, n)
	}
	end = min(n, start+f.pageSize)
	if end < n {
		next = fmt.Sprintf("%d:%d", f.generation, end)
	}
	return start, end, next, nil
}

// SearchSessions implements tools.Service.
func (f *Fake) SearchSessions(ctx context.Context, req dshq.SessionSearchRequest) (dshq.SessionSearchPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "sessions.search", req); err != nil {
		return dshq.SessionSearchPage{}, err
	}
	if err := checkFilters(req.SessionFilters, sessionKinds); err != nil {
		return dshq.SessionSearchPage{}, err
	}
	if err := checkFilters(req.EventFilters, eventKinds); err != nil {
		return dshq.SessionSearchPage{}, err
	}
	phrase, err := checkQuery(req.Query)
	if err != nil {
		return dshq.SessionSearchPage{}, err
	}
	type best struct {
		rec dshq.SessionRecord
		c   candidate
	}
	var all []best
	for _, s := range f.sorted() {
		if !matchSession(s.rec, req.SessionFilters) {
			continue
		}
		cands := f.candidates(s, phrase, req.EventFilters)
		if len(cands) == 0 {
			continue
		}
		slices.SortFunc(cands, better)
		all = append(all, best{s.rec, cands[0]})
	}
	slices.SortFunc(all, func(a, b best) int { return better(a.c, b.c) })
	start, end, next, err := f.page(len(all), req.Cursor)
	if err != nil {
		return dshq.SessionSearchPage{}, err
	}
	out := dshq.SessionSearchPage{Items: []dshq.SessionSearchHit{}, NextCursor: next, Generation: f.generation}
	for _, b := range all[start:end] {
		out.Items = append(out.Items, dshq.SessionSearchHit{SessionRecord: b.rec, BestMatch: b.c.hit})
	}
	return out, nil
}

func (f *Fake) lookup(id string) (*session, error) {
	s, ok := f.sessions[id]
	if !ok {
		return nil, dshq.Errorf(dshq.CodeSessionNotFound, "session %q was not found", id)
	}
	return s, nil
}

func (s *session) checkValid() error {
	if s.invalid != nil {
		return &dshq.Error{Code: dshq.CodeInvalidSurface, Message: "invalid session surface: " + s.invalid.Error(), Err: s.invalid}
	}
	return nil
}

// SearchEvents implements tools.Service.
func (f *Fake) SearchEvents(ctx context.Context, req dshq.EventSearchRequest) (dshq.EventSearchPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "events.search", req); err != nil {
		return dshq.EventSearchPage{}, err
	}
	if err := checkFilters(req.Filters, eventKinds); err != nil {
		return dshq.EventSearchPage{}, err
	}
	phrase, err := checkQuery(req.Query)
	if err != nil {
		return dshq.EventSearchPage{}, err
	}
	s, err := f.lookup(req.SessionID)
	if err != nil {
		return dshq.EventSearchPage{}, err
	}
	if err := s.checkValid(); err != nil {
		return dshq.EventSearchPage{}, err
	}
	cands := f.candidates(s, phrase, req.Filters)
	slices.SortFunc(cands, better)
	start, end, next, err := f.page(len(cands), req.Cursor)
	if err != nil {
		return dshq.EventSearchPage{}, err
	}
	out := dshq.EventSearchPage{Session: s.rec.Header, Items: []dshq.EventSearchHit{}, NextCursor: next, Generation: f.generation}
	for _, c := range cands[start:end] {
		out.Items = append(out.Items, c.hit)
	}
	return out, nil
}

// TraceSession implements tools.Service (docs/lineage.md#tracing-a-lineage).
func (f *Fake) TraceSession(ctx context.Context, id string) (dshq.LineageTrace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "sessions.trace", id); err != nil {
		return dshq.LineageTrace{}, err
	}
	target, err := f.lookup(id)
	if err != nil {
		return dshq.LineageTrace{}, err
	}
	out := dshq.LineageTrace{Target: target.rec, Ancestors: []dshq.SessionRecord{}, Generation: f.generation}
	seen := map[string]bool{id: true}
	for p := target.rec.Header.ParentSession; p != nil; {
		if seen[*p] {
			return dshq.LineageTrace{}, dshq.Errorf(dshq.CodeInvalidLineage, "session lineage contains a cycle at %q", *p)
		}
		seen[*p] = true
		parent, ok := f.sessions[*p]
		if !ok {
			out.UnresolvedParentID = dshq.Str(*p)
			break
		}
		out.Ancestors = append(out.Ancestors, parent.rec)
		p = parent.rec.Header.ParentSession
	}
	if out.UnresolvedParentID == nil {
		out.Complete = true
		root := target.rec
		if n := len(out.Ancestors); n > 0 {
			root = out.Ancestors[n-1]
		}
		out.Root = &root
	}
	children := map[string][]*session{}
	for _, s := range f.sorted() {
		if p := s.rec.Header.ParentSession; p != nil {
			children[*p] = append(children[*p], s)
		}
	}
	for _, kids := range children {
		slices.SortFunc(kids, bySiblingOrder)
	}
	out.Descendants = forest(id, children)
	return out, nil
}

// bySiblingOrder orders siblings createdAt asc, then id asc.
func bySiblingOrder(a, b *session) int {
	if a.rec.Header.CreatedAt != b.rec.Header.CreatedAt {
		if a.rec.Header.CreatedAt < b.rec.Header.CreatedAt {
			return -1
		}
		return 1
	}
	return strings.Compare(a.rec.Header.ID, b.rec.Header.ID)
}

func forest(id string, children map[string][]*session) []dshq.LineageNode {
	kids := children[id]
	out := make([]dshq.LineageNode, len(kids))
	for i, k := range kids {
		out[i] = dshq.LineageNode{Session: k.rec, Descendants: forest(k.rec.Header.ID, children)}
	}
	return out
}

// Titles implements tools.Service.
func (f *Fake) Titles(ctx context.Context, ids []string) ([]dshq.TitleResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "sessions.titles", ids); err != nil {
		return nil, err
	}
	out := []dshq.TitleResult{}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		s, err := f.lookup(id)
		if err != nil {
			out = append(out, dshq.TitleResult{SessionID: id, Status: "rejected",
				Reason: &dshq.ErrorBody{Code: dshq.ErrorCode(err), Message: err.Error()}})
			continue
		}
		v := &dshq.TitleValue{Session: s.rec.Header}
		if s.fold != nil {
			v.Title = s.fold.Title
		}
		out = append(out, dshq.TitleResult{SessionID: id, Status: "fulfilled", Value: v})
	}
	return out, nil
}

// ReadEvent implements tools.Service (docs/query.md#event-read-windows).
func (f *Fake) ReadEvent(ctx context.Context, req dshq.EventReadRequest) (dshq.EventWindow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "events.read", req); err != nil {
		return dshq.EventWindow{}, err
	}
	for _, w := range []struct {
		name string
		v    int64
	}{{"before", req.Before}, {"after", req.After}} {
		if w.v < 0 || w.v > dshq.ReadWindowMax {
			return dshq.EventWindow{}, dshq.Errorf(dshq.CodeInvalidWindow, "%s must be an integer between 0 and %d", w.name, dshq.ReadWindowMax)
		}
	}
	s, err := f.lookup(req.SessionID)
	if err != nil {
		return dshq.EventWindow{}, err
	}
	n := int64(len(s.events))
	if req.Seq < 0 || req.Seq >= n {
		return dshq.EventWindow{}, dshq.Errorf(dshq.CodeEventNotFound, "session %q has no event at seq %d", req.SessionID, req.Seq)
	}
	start, end := max(0, req.Seq-req.Before), min(n-1, req.Seq+req.After)
	return dshq.EventWindow{Session: s.rec.Header, Target: s.events[req.Seq],
		Events: slices.Clone(s.events[start : end+1]), StartSeq: start, EndSeq: end, Generation: f.generation}, nil
}

// TraceEvent implements tools.Service (docs/events-and-surfaces.md#event-traces).
func (f *Fake) TraceEvent(ctx context.Context, req dshq.EventTraceRequest) (dshq.EventTrace, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "events.trace", req); err != nil {
		return dshq.EventTrace{}, err
	}
	s, err := f.lookup(req.SessionID)
	if err != nil {
		return dshq.EventTrace{}, err
	}
	if req.Seq < 0 || req.Seq >= int64(len(s.events)) {
		return dshq.EventTrace{}, dshq.Errorf(dshq.CodeEventNotFound, "session %q has no event at seq %d", req.SessionID, req.Seq)
	}
	if err := s.checkValid(); err != nil {
		return dshq.EventTrace{}, err
	}
	tr, _ := s.fold.Trace(req.Seq)
	tr.Target.SessionID = req.SessionID
	return dshq.EventTrace{Session: s.rec.Header, Target: tr.Target, ReplacedBy: tr.ReplacedBy,
		ReplacementChain: tr.ReplacementChain, ReplacedEventSeqs: tr.ReplacedEventSeqs,
		SourceEventSeqs: tr.SourceEventSeqs, DerivedEventSeqs: tr.DerivedEventSeqs, Generation: f.generation}, nil
}

// LastStepStart implements tools.Service.
func (f *Fake) LastStepStart(ctx context.Context, id string) (int64, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin(ctx, "last step start", id); err != nil {
		return 0, false, err
	}
	s, err := f.lookup(id)
	if err != nil {
		return 0, false, err
	}
	if s.fold == nil || s.fold.LastStepStart == nil {
		return 0, false, nil
	}
	return *s.fold.LastStepStart, true, nil
}
