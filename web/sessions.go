package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/usage"
)

// filters are the session filters of the list and search pages, as the URL
// carries them: cwd (a workspace), avail (live or persisted), from and to
// (creation dates, YYYY-MM-DD, UTC, inclusive) and harness; the list's
// alone: prefix (a directory and every workspace under it), machine, and
// its order, sort (listSorts).
type filters struct {
	Cwd, Avail, From, To, Harness string
	Prefix, Machine, Sort         string
}

func parseFilters(q url.Values) filters {
	return filters{
		Cwd: q.Get("cwd"), Avail: q.Get("avail"), From: q.Get("from"), To: q.Get("to"),
		Harness: q.Get("harness"), Prefix: q.Get("prefix"), Machine: q.Get("machine"), Sort: q.Get("sort"),
	}
}

// values returns the filters and the order as URL parameters (empty ones
// left out).
func (f filters) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"cwd": f.Cwd, "avail": f.Avail, "from": f.From, "to": f.To, "harness": f.Harness,
		"prefix": f.Prefix, "machine": f.Machine, "sort": f.Sort} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Any reports whether a filter is set (the order is not one).
func (f filters) Any() bool {
	f.Sort = ""
	return len(f.values()) > 0
}

// listSort is one order of the list: its URL value, the API's order and
// what the page says.
type listSort struct {
	Value, Label, Says string
	Order              dshq.ListOrder
}

// listSorts are the list's orders; the first is the default.
var listSorts = []listSort{
	{"", "Newest first", "Newest first", dshq.OrderCreatedDesc},
	{"created-asc", "Oldest first", "Oldest first", dshq.OrderCreatedAsc},
	{"activity", "Latest activity", "Most recently active first", dshq.OrderActivityDesc},
	{"activity-asc", "Least recent activity", "Least recently active first", dshq.OrderActivityAsc},
}

// sort returns the list's order, or a 400 for a value the page does not
// offer.
func (f filters) sort() (listSort, error) {
	for _, s := range listSorts {
		if s.Value == f.Sort {
			return s, nil
		}
	}
	return listSort{}, badRequest("The list sorts by %s, not %q.", sortNames(), f.Sort)
}

func sortNames() string {
	var names []string
	for _, s := range listSorts[1:] {
		names = append(names, s.Value)
	}
	return "created (the default), " + strings.Join(names, ", ")
}

// list returns the list page's API filters: session's and the list's own
// kinds (sessions.filter alone takes them).
func (f filters) list() ([]dshq.Filter, error) {
	out, err := f.session()
	if err != nil {
		return nil, err
	}
	if f.Prefix != "" {
		p := f.Prefix
		out = append(out, dshq.Filter{Kind: dshq.FilterCwdPrefix, Values: []*string{&p}})
	}
	if f.Machine != "" {
		m := f.Machine
		out = append(out, dshq.Filter{Kind: dshq.FilterMachine, Values: []*string{&m}})
	}
	return out, nil
}

// session returns the API's session filters. The harness filter's
// "deepseek-harness" is the API's null harness: every session not
// converted from a Claude Code or Codex file.
func (f filters) session() ([]dshq.Filter, error) {
	var out []dshq.Filter
	switch f.Harness {
	case "":
	case nativeHarness:
		out = append(out, dshq.Filter{Kind: dshq.FilterHarness, Values: []*string{nil}})
	default:
		h := f.Harness
		out = append(out, dshq.Filter{Kind: dshq.FilterHarness, Values: []*string{&h}})
	}
	if f.Cwd != "" {
		cwd := f.Cwd
		out = append(out, dshq.Filter{Kind: dshq.FilterCwd, Values: []*string{&cwd}})
	}
	switch f.Avail {
	case "":
	case "live", "persisted":
		a := f.Avail
		out = append(out, dshq.Filter{Kind: dshq.FilterAvailability, Values: []*string{&a}})
	default:
		return nil, badRequest("Availability is live or persisted, not %q.", f.Avail)
	}
	if f.From != "" || f.To != "" {
		r := dshq.Filter{Kind: dshq.FilterCreatedAt}
		if f.From != "" {
			t, err := time.Parse(time.DateOnly, f.From)
			if err != nil {
				return nil, badRequest("The from date %q is not YYYY-MM-DD.", f.From)
			}
			ms := float64(t.UnixMilli())
			r.From = &ms
		}
		if f.To != "" {
			t, err := time.Parse(time.DateOnly, f.To)
			if err != nil {
				return nil, badRequest("The to date %q is not YYYY-MM-DD.", f.To)
			}
			ms := float64(t.Add(24*time.Hour).UnixMilli() - 1)
			r.To = &ms
		}
		out = append(out, r)
	}
	return out, nil
}

// nativeHarness is the harness filter's value for the sessions that carry
// no harness.
const nativeHarness = "deepseek-harness"

// keeps reports whether a record passes the harness filter (the API
// applies it too) and, for records from the feed, the others.
func (f filters) keeps(r sessionRecord, all bool) bool {
	if h := r.Harness; f.Harness != "" && h != f.Harness && !(h == "" && f.Harness == nativeHarness) {
		return false
	}
	if !all {
		return true
	}
	cwd, hasCwd := r.Header.CwdOrEmpty()
	if f.Cwd != "" && cwd != f.Cwd {
		return false
	}
	if p := strings.TrimSuffix(f.Prefix, "/"); f.Prefix != "" && (!hasCwd || cwd != p && !strings.HasPrefix(cwd, p+"/")) {
		return false
	}
	if f.Machine != "" && r.Header.Machine != f.Machine {
		return false
	}
	if f.Avail == "live" && !r.Live || f.Avail == "persisted" && !r.Persisted {
		return false
	}
	if f.From != "" {
		if t, err := time.Parse(time.DateOnly, f.From); err == nil && r.Header.CreatedAt < t.UnixMilli() {
			return false
		}
	}
	if f.To != "" {
		if t, err := time.Parse(time.DateOnly, f.To); err == nil && r.Header.CreatedAt >= t.Add(24*time.Hour).UnixMilli() {
			return false
		}
	}
	return true
}

func badRequest(format string, args ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, title: "That request is not valid", msg: sprintf(format, args...)}
}

// sessionRow is one row of the list (and the session page's header).
type sessionRow struct {
	ID        string // raw, for URLs and data attributes
	Label     string // cleaned id
	Title     string
	Cwd       string // raw, for URLs
	CwdLabel  string
	HasCwd    bool
	CreatedAt int64
	Count     int64
	HasCount  bool
	Live      bool
	Persisted bool
	Kind      string // "", fork, subagent
	Depth     int64
	Parent    string // raw parent id
	Harness   string
	Invalid   bool
	Preset    string
	// Totals are the session's totals, nil when not read.
	Totals *totals
	// Machine is the cleaned machine the session was captured on.
	Machine string
	// Sum is the projection's summary of the session, nil when not read.
	Sum *dshq.SessionSummary
	// Use is the session's usage (with its subagents' for a root), nil
	// when not read or none was reported.
	Use *rowUsage
	// Tab is the session page the row heads (conversation, log, timeline,
	// lineage, event).
	Tab string
}

func newRow(r sessionRecord, st *stat) sessionRow {
	h := r.Header
	row := sessionRow{ID: h.ID, Label: clean(h.ID), CreatedAt: h.CreatedAt, Live: r.Live, Persisted: r.Persisted, Harness: r.Harness}
	if cwd, ok := h.CwdOrEmpty(); ok {
		row.Cwd, row.CwdLabel, row.HasCwd = cwd, clean(cwd), true
	}
	if h.ParentSession != nil {
		row.Parent, row.Kind = *h.ParentSession, "fork"
	}
	if h.Origin == dshq.OriginSubagent {
		row.Kind = "subagent"
	}
	if h.DelegationDepth != nil {
		row.Depth = *h.DelegationDepth
	}
	if h.AgentPreset != nil {
		row.Preset = clean(*h.AgentPreset)
	}
	if h.Machine != "" {
		row.Machine = clean(h.Machine)
	}
	row.Sum = r.Summary
	if st != nil {
		if st.Summary != nil {
			row.Sum = st.Summary
		}
		row.Count, row.HasCount = st.EventCount, true
		if st.Title != nil {
			row.Title = clean(st.Title.Title)
		}
		row.Invalid = st.InvalidFromSeq != nil
		row.Live = st.Session.Live
	}
	return row
}

// ParentLabel is the cleaned parent id.
func (r sessionRow) ParentLabel() string { return clean(r.Parent) }

// Span is the time from the first to the last event, "" without events.
func (r sessionRow) Span() string {
	if r.Sum == nil || r.Sum.FirstEventAt == nil || r.Sum.LastEventAt == nil {
		return ""
	}
	return duration(*r.Sum.LastEventAt - *r.Sum.FirstEventAt)
}

// LastActivity is when the session's latest event happened (its creation
// without events).
func (r sessionRow) LastActivity() int64 {
	if r.Sum == nil {
		return r.CreatedAt
	}
	return r.Sum.LastActivityAt
}

// rowUsage is what a row shows of a session's usage report.
type rowUsage struct {
	Models                string
	Input, Output, Cached int64
	Cost                  string
}

// applyUsage puts the report's rows on the page's rows: a root's row is
// its rolled-up report (its subagents' included, as its header and `dshq
// usage session` show it), another session's its own.
func applyUsage(rows []sessionRow, rolled, own []usage.ReportRow) {
	index := func(rs []usage.ReportRow) map[string]*usage.ReportRow {
		m := map[string]*usage.ReportRow{}
		for i := range rs {
			if id := rs[i].SessionID; id != nil {
				m[*id] = &rs[i]
			}
		}
		return m
	}
	byRoot, byOwn := index(rolled), index(own)
	for i := range rows {
		u := byOwn[rows[i].ID]
		if rows[i].Parent == "" {
			u = byRoot[rows[i].ID]
		}
		if u == nil {
			continue
		}
		models := make([]string, len(u.ModelsUsed))
		for j, m := range u.ModelsUsed {
			models[j] = clean(m)
		}
		rows[i].Use = &rowUsage{Models: strings.Join(models, ", "), Input: u.Input, Output: u.Output,
			Cached: u.CacheCreation + u.CacheRead, Cost: usageCost(u.Totals)}
	}
}

// pageUsage reads the usage of a page's sessions in at most two calls,
// whatever the page's length: the roots' rolled up (query.Client's
// SessionUsage), the others' own. A failure leaves the columns empty: the
// list still serves.
func (s *Server) pageUsage(ctx context.Context, rows []sessionRow) {
	var roots, kids []string
	for _, r := range rows {
		if r.Parent == "" {
			roots = append(roots, r.ID)
		} else {
			kids = append(kids, r.ID)
		}
	}
	var rolled, own []usage.ReportRow
	if len(roots) > 0 {
		rep, err := s.qc.SessionUsage(ctx, roots)
		if err != nil {
			s.log.Debug("web: list usage", "err", err)
		}
		rolled = rep.Rows
	}
	if len(kids) > 0 {
		rep, err := s.qc.Usage(ctx, wire.UsageBody{SessionIDs: kids, GroupBy: []string{"session"}, Limit: wire.MaxUsageLimit})
		if err != nil {
			s.log.Debug("web: list usage", "err", err)
		}
		own = rep.Rows
	}
	applyUsage(rows, rolled, own)
}

// Prepends reports whether new sessions from the feed go at the top: on
// the first page of a newest-first list.
func (d *sessionsData) Prepends() bool { return d.First == "" && d.Sort.Order == dshq.OrderCreatedDesc }

// sessionsData is the list page.
type sessionsData struct {
	F          filters
	Sort       listSort
	Sorts      []listSort
	Rows       []sessionRow
	Next       string // URL of the next page, "" on the last
	First      string // URL of the first page, "" on it
	PageNo     int
	Generation uint64
	Harnesses  []string
}

func (s *Server) sessionsPage(r *http.Request) (*view, error) {
	q := r.URL.Query()
	f := parseFilters(q)
	api, err := f.list()
	if err != nil {
		return nil, err
	}
	sort, err := f.sort()
	if err != nil {
		return nil, err
	}
	pageNo, _ := strconv.Atoi(q.Get("n"))
	cur := pageCursor{api: q.Get("cursor"), skip: atoi(q.Get("skip"))}
	recs, next, gen, err := s.scanRecords(r.Context(), api, sort.Order, cur)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(recs))
	for i, rec := range recs {
		ids[i] = rec.Header.ID
	}
	stats := s.statAll(r.Context(), ids)
	d := &sessionsData{F: f, Sort: sort, Sorts: listSorts, PageNo: max(pageNo, 0) + 1, Generation: gen, Harnesses: s.knownHarnesses(r.Context())}
	for _, rec := range recs {
		d.Rows = append(d.Rows, newRow(rec, stats[rec.Header.ID]))
	}
	s.pageUsage(r.Context(), d.Rows)
	base := f.values()
	if next != nil {
		v := f.values()
		v.Set("cursor", next.api)
		if next.skip > 0 {
			v.Set("skip", strconv.Itoa(next.skip))
		}
		v.Set("n", strconv.Itoa(d.PageNo))
		d.Next = "/?" + v.Encode()
	}
	if cur.api != "" || cur.skip > 0 {
		d.First = "/?" + base.Encode()
	}
	v := &view{Page: "sessions", Title: "Sessions", Nav: "sessions", Data: d}
	if cur.api == "" && cur.skip == 0 {
		lv := f.values()
		lv.Set("after", strconv.FormatUint(gen, 10))
		v.Live = liveInfo{URL: "/live?" + lv.Encode(), Kind: "sessions"}
	}
	return v, nil
}

// pageCursor is where a list page starts: the API cursor of the API page
// and how many of its items the UI already showed (the harness filter can
// stop inside an API page).
type pageCursor struct {
	api  string
	skip int
}

// scanRecords returns one UI page of records in order, with their
// summaries: one API page (the harness filter is the API's).
func (s *Server) scanRecords(ctx context.Context, api []dshq.Filter, order dshq.ListOrder, cur pageCursor) (recs []sessionRecord, next *pageCursor, gen uint64, err error) {
	if order == dshq.OrderCreatedDesc {
		order = "" // the original request, which any version answers
	}
	var p recordPage
	ask := func(summary bool) error {
		if len(api) == 0 {
			return s.call(ctx, wire.EndpointSessionsList, dshq.SessionListRequest{Limit: s.listSize, Cursor: cur.api, Order: order, Summary: summary}, &p)
		}
		return s.call(ctx, wire.EndpointSessionsFilter, dshq.SessionFilterRequest{Filters: api, Limit: s.listSize, Cursor: cur.api, Order: order, Summary: summary}, &p)
	}
	err = ask(true)
	if dshq.ErrorCode(err) == dshq.CodeInvalidRequest && order == "" {
		// A service older than the summaries: the list without them.
		err = ask(false)
	}
	if err != nil {
		return nil, nil, 0, err
	}
	for _, r := range p.Items {
		s.sawHarness(r.Harness)
	}
	if p.NextCursor != "" {
		next = &pageCursor{api: p.NextCursor}
	}
	return p.Items[min(cur.skip, len(p.Items)):], next, p.Generation, nil
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// counts answers /api/counts?id=…: the event counts, live state and
// summary columns of the given sessions (the list refreshes its live rows
// with it).
func (s *Server) counts(w http.ResponseWriter, r *http.Request) {
	ids := r.URL.Query()["id"]
	if len(ids) > s.listSize {
		ids = ids[:s.listSize]
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	stats := s.statAll(ctx, ids)
	type count struct {
		Count int64  `json:"count"`
		Live  bool   `json:"live"`
		Title string `json:"title,omitempty"`
		// Turns, Calls, Failed, Span and Activity (ISO 8601) are the
		// summary's, when the service keeps one.
		Turns    *int64 `json:"turns,omitempty"`
		Calls    *int64 `json:"calls,omitempty"`
		Failed   *int64 `json:"failed,omitempty"`
		Span     string `json:"span,omitempty"`
		Activity string `json:"activity,omitempty"`
	}
	out := map[string]count{}
	for id, st := range stats {
		c := count{Count: st.EventCount, Live: st.Session.Live}
		if st.Title != nil {
			c.Title = clean(st.Title.Title)
		}
		if sm := st.Summary; sm != nil {
			row := sessionRow{CreatedAt: st.Session.Header.CreatedAt, Sum: sm}
			c.Turns, c.Calls, c.Failed = &sm.Turns, &sm.ToolCalls, &sm.FailedToolCalls
			c.Span, c.Activity = row.Span(), isoTime(row.LastActivity())
		}
		out[id] = c
	}
	writeJSON(w, out)
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
