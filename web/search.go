package web

import (
	"context"
	"encoding/json"
	"github.com/dshq/dshq/internal/numfmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// searchLimit is the number of hits on one search page.
const searchLimit = 20

// searchData is the search page.
type searchData struct {
	Q        string
	F        filters
	Types    string // comma-separated event types
	Surfaces []string
	// Session confines the search to one session (events.search).
	Session      string
	SessionLabel string
	Searched     bool
	Hits         []hitView
	Next, First  string
	PageNo       int
	Generation   uint64
	Harnesses    []string
	// Count is how many sessions (or, in one session, events) match;
	// CountMore is set when there are more than maxCount.
	Count     int
	CountMore bool
}

// CountText says how many match: "137 sessions match", "1,000+ events match".
func (d *searchData) CountText() string {
	what := "session"
	if d.Session != "" {
		what = "event"
	}
	n := numfmt.Thousands(int64(d.Count))
	if d.CountMore {
		n += "+"
	}
	if d.Count == 1 && !d.CountMore {
		return "1 " + what + " matches"
	}
	return n + " " + what + "s match"
}

// maxCount bounds a search's count: past it the page says "1,000+".
const maxCount = 1000

// countKey is a counted search: its request and the generation it answered at.
type countKey struct {
	req string
	gen uint64
}

// searchCounts keeps the counts of recent searches (a search's results do
// not change at one generation).
type searchCounts struct {
	mu sync.Mutex // guards m
	m  map[countKey]int
}

func (c *searchCounts) get(k countKey) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[k]
	return n, ok
}

func (c *searchCounts) put(k countKey, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > 1024 {
		c.m = map[countKey]int{}
	}
	c.m[k] = n
}

// count counts the search's results by paging through them, at most
// maxCount; page reads one page of at most limit from a cursor and returns
// its length and the next cursor.
func (s *Server) count(ctx context.Context, key any, gen uint64, page func(cursor string) (int, string, error)) (int, bool) {
	b, _ := json.Marshal(key)
	k := countKey{req: string(b), gen: gen}
	if n, ok := s.searchCounts.get(k); ok {
		return min(n, maxCount), n > maxCount
	}
	n, cursor := 0, ""
	for {
		got, next, err := page(cursor)
		if err != nil {
			return -1, false
		}
		n += got
		if next == "" || n > maxCount {
			break
		}
		cursor = next
	}
	s.searchCounts.put(k, n)
	return min(n, maxCount), n > maxCount
}

// HasSurface reports whether the surface filter includes s.
func (d *searchData) HasSurface(s string) bool {
	for _, x := range d.Surfaces {
		if x == s {
			return true
		}
	}
	return false
}

// hitView is one hit: the session (for sessions.search) and the event.
type hitView struct {
	Row     sessionRow
	Seq     int64
	Type    string
	Surface string
	Time    int64
	Snippet []segment
	URL     string
}

func (s *Server) searchPage(r *http.Request) (*view, error) {
	q := r.URL.Query()
	d := &searchData{Q: strings.TrimSpace(q.Get("q")), F: parseFilters(q), Types: q.Get("type"),
		Surfaces: q["surface"], Session: q.Get("session"), Harnesses: s.knownHarnesses(r.Context())}
	d.SessionLabel = clean(d.Session)
	v := &view{Page: "search", Title: "Search", Nav: "search", Data: d}
	if d.Q == "" {
		return v, nil
	}
	v.Title = "Search: " + clean(d.Q)
	d.Searched = true
	d.PageNo = atoi(q.Get("n")) + 1
	ev := d.eventFilters()
	var next *pageCursor
	var err error
	cur := pageCursor{api: q.Get("cursor"), skip: atoi(q.Get("skip"))}
	if d.Session != "" {
		next, err = s.searchEvents(r.Context(), d, ev, cur.api)
	} else {
		next, err = s.searchAcross(r.Context(), d, ev, cur)
	}
	if err != nil {
		return nil, err
	}
	base := d.values()
	if next != nil {
		nv := d.values()
		nv.Set("cursor", next.api)
		if next.skip > 0 {
			nv.Set("skip", strconv.Itoa(next.skip))
		}
		nv.Set("n", strconv.Itoa(d.PageNo))
		d.Next = "/search?" + nv.Encode()
	}
	if cur.api != "" || cur.skip > 0 {
		d.First = "/search?" + base.Encode()
	}
	return v, nil
}

// ClearURL is the search without its filters.
func (d *searchData) ClearURL() string {
	v := url.Values{"q": {d.Q}}
	if d.Session != "" {
		v.Set("session", d.Session)
	}
	return "/search?" + v.Encode()
}

// values returns the page's parameters without the paging ones.
func (d *searchData) values() url.Values {
	v := d.F.values()
	v.Set("q", d.Q)
	if d.Types != "" {
		v.Set("type", d.Types)
	}
	for _, sf := range d.Surfaces {
		v.Add("surface", sf)
	}
	if d.Session != "" {
		v.Set("session", d.Session)
	}
	return v
}

// eventFilters returns the type and surface filters.
func (d *searchData) eventFilters() []dshq.Filter {
	var out []dshq.Filter
	if d.Types != "" {
		var vals []*string
		for _, t := range strings.Split(d.Types, ",") {
			if t = strings.TrimSpace(t); t != "" {
				vals = append(vals, &t)
			}
		}
		out = append(out, dshq.Filter{Kind: dshq.FilterType, Values: vals})
	}
	if len(d.Surfaces) > 0 {
		var vals []*string
		for _, sf := range d.Surfaces {
			vals = append(vals, &sf)
		}
		out = append(out, dshq.Filter{Kind: dshq.FilterSurface, Values: vals})
	}
	return out
}

// searchAcross runs sessions.search: one API page (the harness filter is
// the API's).
func (s *Server) searchAcross(ctx context.Context, d *searchData, ev []dshq.Filter, cur pageCursor) (*pageCursor, error) {
	sf, err := d.F.session()
	if err != nil {
		return nil, err
	}
	items, nc, gen, err := s.searchSessions(ctx, dshq.SessionSearchRequest{Query: d.Q, SessionFilters: sf, EventFilters: ev, Limit: searchLimit, Cursor: cur.api})
	if err != nil {
		return nil, err
	}
	d.Generation = gen
	countReq := dshq.SessionSearchRequest{Query: d.Q, SessionFilters: sf, EventFilters: ev, Limit: dshq.MaxSearchLimit}
	d.Count, d.CountMore = s.count(ctx, countReq, gen, func(cursor string) (int, string, error) {
		r := countReq
		r.Cursor = cursor
		var raw rawHitPage
		err := s.call(ctx, wire.EndpointSessionsSearch, r, &raw)
		return len(raw.Items), raw.NextCursor, err
	})
	hits := items[min(cur.skip, len(items)):]
	var next *pageCursor
	if nc != "" {
		next = &pageCursor{api: nc}
	}
	titles := s.titles(ctx, hits)
	for _, h := range hits {
		row := newRow(h.Record, nil)
		row.Title = titles[h.Record.Header.ID]
		d.Hits = append(d.Hits, s.hit(row, h.BestMatch, d.Q))
	}
	return next, nil
}

func (s *Server) hit(row sessionRow, m dshq.EventSearchHit, q string) hitView {
	return hitView{Row: row, Seq: m.Seq, Type: clean(m.Type), Surface: string(m.Surface), Time: m.Time,
		Snippet: highlight(m.Snippet, q), URL: eventURL(m.SessionID, m.Seq, s.pageSize)}
}

// searchEvents runs events.search in one session.
func (s *Server) searchEvents(ctx context.Context, d *searchData, ev []dshq.Filter, cursor string) (*pageCursor, error) {
	p, err := s.qc.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: d.Session, Query: d.Q, Filters: ev, Limit: searchLimit, Cursor: cursor})
	if err != nil {
		return nil, err
	}
	d.Generation = p.Generation
	countReq := dshq.EventSearchRequest{SessionID: d.Session, Query: d.Q, Filters: ev, Limit: dshq.MaxSearchLimit}
	d.Count, d.CountMore = s.count(ctx, countReq, p.Generation, func(cursor string) (int, string, error) {
		r := countReq
		r.Cursor = cursor
		cp, err := s.qc.SearchEvents(ctx, r)
		if err != nil {
			return 0, "", err
		}
		return len(cp.Items), cp.NextCursor, nil
	})
	row := newRow(sessionRecord{SessionRecord: dshq.SessionRecord{Header: p.Session}}, nil)
	for _, h := range p.Items {
		d.Hits = append(d.Hits, s.hit(row, h, d.Q))
	}
	if p.NextCursor == "" {
		return nil, nil
	}
	return &pageCursor{api: p.NextCursor}, nil
}

// titles reads the titles of the hits' sessions in one sessions.titles call.
func (s *Server) titles(ctx context.Context, hits []searchItem) map[string]string {
	out := map[string]string{}
	if len(hits) == 0 {
		return out
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.Record.Header.ID
	}
	t, err := s.qc.ReadTitles(ctx, dshq.SessionTitlesRequest{SessionIDs: ids})
	if err != nil {
		return out
	}
	for _, it := range t.Items {
		if it.Value != nil && it.Value.Title != nil {
			out[it.SessionID] = clean(it.Value.Title.Title)
		}
	}
	return out
}
