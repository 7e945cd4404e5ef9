package web

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/numfmt"
	"github.com/dshq/dshq/query"
)

// sessionData is a session's page: the conversation (the default) or the
// event log, one page of events either way.
type sessionData struct {
	Row           sessionRow
	Inherited     int64
	InvalidFrom   *int64
	InvalidReason string
	Events        []eventView
	Page, Pages   int64
	From, To      int64
	LastPage      bool
	Links         []pageLink
	Prev, Next    string
	Generation    uint64
	// NoSurfaces is set when the session's surface cannot be read (it is
	// invalid): events are shown raw.
	NoSurfaces bool
	// Log is set on the event log (/s/{id}/log), else this is the
	// conversation.
	Log bool
	// Conv is the conversation of Events (nil on the log).
	Conv *conversation
	// Filter is the page's event filter (types, surfaces, only errors).
	Filter eventFilter
	// Scanned is how many events a filtered page looked at (From..To).
	Scanned int64
	// Synthetic is the number of crash closers shown after the stored events.
	Synthetic int
	// Totals are the session's totals (nil when they could not be read).
	Totals *totals
	// ViewURL and LogURL are the conversation's and the event log's URLs.
	ViewURL, LogURL string
}

// pageLink is one entry of the page navigation; Page < 0 is a gap.
type pageLink struct {
	Page    int64
	URL     string
	Current bool
}

// maxFilterScan bounds the events one filtered page reads: it shows the
// matches among them and links to the next stretch.
const maxFilterScan = 1000

func (s *Server) conversationPage(r *http.Request) (*view, error) { return s.sessionPage(r, false) }
func (s *Server) logPage(r *http.Request) (*view, error)          { return s.sessionPage(r, true) }

func (s *Server) sessionPage(r *http.Request, logView bool) (*view, error) {
	id := r.PathValue("id")
	q := r.URL.Query()
	ctx := r.Context()
	base := sessionURL(id)
	if logView {
		base += "/log"
	}
	if seq := q.Get("seq"); seq != "" {
		n, err := strconv.ParseInt(seq, 10, 64)
		if err != nil || n < 0 {
			return nil, badRequest("The seq %q is not an event number.", seq)
		}
		return &view{redirect: base + "?page=" + strconv.FormatInt(n/s.pageSize, 10) + "#e-" + strconv.FormatInt(n, 10)}, nil
	}
	f, err := parseEventFilter(q)
	if err != nil {
		return nil, err
	}
	st, err := s.statSession(ctx, id)
	if err != nil {
		return nil, err
	}
	pages := max(1, (st.EventCount+s.pageSize-1)/s.pageSize)
	page := pages - 1
	if !st.Session.Live {
		page = 0
	}
	if p := q.Get("page"); p != "" {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return nil, badRequest("The page %q is not a page number.", p)
		}
		if n >= pages {
			return nil, &httpError{status: http.StatusNotFound, title: "No such page",
				msg: fmt.Sprintf("This session has %s of events (%s events); page %d is past its end. Its last page is %d.",
					plural(pages, "page"), numfmt.Thousands(st.EventCount), n+1, pages), link: base + "?page=" + strconv.FormatInt(pages-1, 10), linkText: "Go to the last page"}
		}
		page = n
	}
	d := &sessionData{Row: newRow(sessionRecord{SessionRecord: st.Session, Harness: st.Harness}, st), Inherited: st.InheritedEventCount,
		InvalidFrom: st.InvalidFromSeq, InvalidReason: clean(st.InvalidReason),
		Page: page, Pages: pages, LastPage: page == pages-1, Generation: st.Generation, NoSurfaces: st.InvalidFromSeq != nil,
		Log: logView, Filter: f, ViewURL: sessionURL(id), LogURL: sessionURL(id) + "/log"}
	d.From, d.To = page*s.pageSize, (page+1)*s.pageSize-1
	if f.Any() {
		d.From = int64(atoi(q.Get("from")))
		d.To = d.From + maxFilterScan - 1
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.fillTranscript(gctx, id, st.EventCount, d) })
	var u *sessionUsage
	g.Go(func() error { d.Totals = s.sessionTotals(gctx, id, st); return nil })
	g.Go(func() error { u = s.sessionUsage(gctx, id); return nil })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d.Totals = withUsage(d.Totals, u)
	d.Row.applyTotals(d.Totals)
	d.Row.Tab = "conversation"
	if logView {
		d.Row.Tab = "log"
	}
	var kept []eventView
	for _, v := range d.Events {
		switch {
		case v.Seq >= st.EventCount && st.Session.Live:
			// A live session's log is being written: its open turn is not
			// interrupted, so no closer is shown.
			continue
		case v.Seq >= st.EventCount:
			v.Synthetic = true
			d.Synthetic++
		}
		kept = append(kept, v)
	}
	d.Events = kept
	if f.Any() {
		d.Scanned = min(d.To, max(st.EventCount-1, d.From)) - d.From + 1
		d.Events = f.apply(d.Events, s.pageSize)
		if len(d.Events) > 0 && int64(len(d.Events)) == s.pageSize {
			d.To = d.Events[len(d.Events)-1].Seq
			d.Scanned = d.To - d.From + 1
		}
		fv := f.values()
		if d.From > 0 {
			d.Prev = base + "?" + fv.Encode()
		}
		if d.To < st.EventCount-1 {
			fv.Set("from", strconv.FormatInt(d.To+1, 10))
			d.Next = base + "?" + fv.Encode()
		}
		d.LastPage = d.Next == ""
	} else {
		d.Links = pageLinks(base, page, pages)
		if page > 0 {
			d.Prev = base + "?page=" + strconv.FormatInt(page-1, 10)
		}
		if page < pages-1 {
			d.Next = base + "?page=" + strconv.FormatInt(page+1, 10)
		}
	}
	if !logView {
		d.Conv = buildConversation(d.Events)
	}
	title := d.Row.Title
	if title == "" {
		title = d.Row.Label
	}
	liveURL := sessionURL(id) + "/live?after=" + strconv.FormatUint(st.Generation, 10)
	if !logView {
		liveURL += "&view=conv"
	}
	if f.Any() {
		liveURL = "" // a filtered page is a query, not a tail
	}
	v := &view{Page: "session", Title: title, Data: d}
	if liveURL != "" {
		v.Live = liveInfo{URL: liveURL, Kind: "session"}
	}
	return v, nil
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return numfmt.Thousands(n) + " " + what + "s"
}

// fillTranscript reads the page's events (events.read windows), their
// surfaces (events.filter on the page's seq range, events.trace for
// surface events without text) and the replacement edges of the page
// (events.trace), and renders them.
func (s *Server) fillTranscript(ctx context.Context, id string, count int64, d *sessionData) error {
	var events []dshq.Event
	var tr *tracer
	if !d.NoSurfaces {
		tr = &tracer{s: s, id: id, traces: map[int64]*dshq.EventTrace{}}
	}
	surfaces := map[int64]dshq.Surface{}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		events, err = s.readRange(gctx, id, d.From, d.To, count)
		if err == nil && tr != nil {
			// The replacements' traces need only the raw events: they run
			// beside the surfaces' read.
			var reps []int64
			for _, e := range events {
				if isReplace(e) {
					reps = append(reps, e.Seq)
				}
			}
			tr.all(gctx, reps)
		}
		return err
	})
	if !d.NoSurfaces {
		g.Go(func() error { return s.readSurfaces(gctx, id, d.From, d.To, surfaces) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if tr != nil {
		tr.complete(ctx, events, surfaces)
	}
	for _, e := range events {
		v := renderEvent(id, e, inlineBytes, traceURL(id, e.Seq)+"?all=1")
		v.Surface = string(surfaces[e.Seq])
		if !d.NoSurfaces && !dshq.IsSurfaceType(e.Type) {
			v.Surface = string(dshq.SurfaceLogOnly) // the fold's rule for every other type
		}
		v.Inherited = e.Seq < d.Inherited
		v.Invalid = d.InvalidFrom != nil && e.Seq >= *d.InvalidFrom
		if tr != nil {
			tr.annotate(&v)
		}
		d.Events = append(d.Events, v)
	}
	return nil
}

// readRange reads the events from..to (fewer at the log's end) with
// events.read windows of up to 101 events, as many as the size bound lets
// each hold. count is the number of stored events; the crash closers of a
// balanced view follow them and are read too.
func (s *Server) readRange(ctx context.Context, id string, from, to, count int64) ([]dshq.Event, error) {
	var out []dshq.Event
	for c := from; c <= to; {
		target := c
		if last := count - 1; c < last {
			target = min(c+dshq.ReadWindowMax, last, to)
		}
		req := dshq.EventReadRequest{SessionID: id, Seq: target, Before: target - c, After: min(dshq.ReadWindowMax, to-target)}
		w, err := s.qc.ReadEvent(ctx, req)
		if dshq.ErrorCode(err) == dshq.CodeEventNotFound && c >= count {
			break // past the last closer
		}
		if err != nil {
			return nil, err
		}
		for _, e := range w.Events {
			if e.Seq >= c && e.Seq <= to {
				out = append(out, e)
			}
		}
		if w.EndSeq < c {
			break
		}
		c = w.EndSeq + 1
	}
	return out, nil
}

// readSurfaces fills surfaces with the surface of every event from..to that
// has semantic text (events.filter's documents).
func (s *Server) readSurfaces(ctx context.Context, id string, from, to int64, surfaces map[int64]dshq.Surface) error {
	lo, hi := float64(from), float64(to)
	req := dshq.EventFilterRequest{SessionID: id, Filters: []dshq.Filter{{Kind: dshq.FilterSeq, From: &lo, To: &hi}}, Limit: dshq.MaxListLimit}
	err := query.Follow(nil, func(cursor string, opts []query.CallOption) (string, uint64, error) {
		req.Cursor = cursor
		p, err := s.qc.FilterEvents(ctx, req, opts...)
		if err != nil {
			return "", 0, err
		}
		for _, doc := range p.Items {
			surfaces[doc.Seq] = doc.Surface
		}
		return p.NextCursor, p.Generation, nil
	})
	if dshq.ErrorCode(err) == dshq.CodeInvalidSurface {
		return nil // became invalid since the stat: shown raw
	}
	return err
}

// tracer reads and caches the event traces one page needs.
type tracer struct {
	s  *Server
	id string
	// mu guards traces.
	mu         sync.Mutex
	traces     map[int64]*dshq.EventTrace
	replacedBy map[int64]int64
}

func (t *tracer) trace(ctx context.Context, seq int64) *dshq.EventTrace {
	t.mu.Lock()
	tr, ok := t.traces[seq]
	t.mu.Unlock()
	if ok {
		return tr
	}
	tr, err := t.s.qc.TraceEvent(ctx, dshq.EventTraceRequest{SessionID: t.id, Seq: seq})
	if err != nil {
		tr = nil
	}
	t.mu.Lock()
	t.traces[seq] = tr
	t.mu.Unlock()
	return tr
}

// complete traces what the page needs beyond events.filter: the surface of
// surface events without text, what each replacement on the page replaced,
// and what replaced each shadowed event (tracing one shadowed event gives
// its replacer, whose trace names every event it shadowed).
func (t *tracer) complete(ctx context.Context, events []dshq.Event, surfaces map[int64]dshq.Surface) {
	var first []int64
	for _, e := range events {
		_, known := surfaces[e.Seq]
		if dshq.IsSurfaceType(e.Type) && !known || isReplace(e) {
			first = append(first, e.Seq)
		}
	}
	t.all(ctx, first)
	for _, seq := range first {
		if tr := t.trace(ctx, seq); tr != nil {
			surfaces[seq] = tr.Target.Surface
		}
	}
	// What the page's own traces say first: each replacement's trace names
	// what it shadowed, and every trace names its event's replacer. Only the
	// shadowed events they leave are traced (an early event's trace walks
	// its whole replacement chain, which grows with every compaction after).
	t.replacedBy = map[int64]int64{}
	for _, seq := range first {
		tr := t.trace(ctx, seq)
		if tr == nil {
			continue
		}
		for _, x := range tr.ReplacedEventSeqs {
			t.replacedBy[x] = seq
		}
		if tr.ReplacedBy != nil {
			t.replacedBy[seq] = *tr.ReplacedBy
		}
	}
	for _, e := range events {
		if surfaces[e.Seq] != dshq.SurfaceShadowed {
			continue
		}
		if _, ok := t.replacedBy[e.Seq]; ok {
			continue
		}
		tr := t.trace(ctx, e.Seq)
		if tr == nil || tr.ReplacedBy == nil {
			continue
		}
		r := *tr.ReplacedBy
		t.replacedBy[e.Seq] = r
		if rt := t.trace(ctx, r); rt != nil {
			for _, x := range rt.ReplacedEventSeqs {
				t.replacedBy[x] = r
			}
		}
	}
}

// all traces seqs, fanout at a time.
func (t *tracer) all(ctx context.Context, seqs []int64) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fanout)
	for _, seq := range seqs {
		g.Go(func() error { t.trace(gctx, seq); return nil })
	}
	_ = g.Wait()
}

// annotate adds the replacement edges to v.
func (t *tracer) annotate(v *eventView) {
	if r, ok := t.replacedBy[v.Seq]; ok {
		v.ReplacedBy = &r
	}
	if v.IsReplace {
		t.mu.Lock()
		tr := t.traces[v.Seq]
		t.mu.Unlock()
		if tr != nil {
			v.Replaced = tr.ReplacedEventSeqs
		}
	}
}

func isReplace(e dshq.Event) bool { return len(e.SurfaceOp) > 0 && e.SurfaceOp[0] == '{' }

// pageLinks returns the navigation: the first and last pages, and two on
// each side of the current one.
func pageLinks(base string, page, pages int64) []pageLink {
	var out []pageLink
	last := int64(-2)
	for p := int64(0); p < pages; p++ {
		if p != 0 && p != pages-1 && (p < page-2 || p > page+2) {
			continue
		}
		if p != last+1 {
			out = append(out, pageLink{Page: -1})
		}
		out = append(out, pageLink{Page: p, URL: base + "?page=" + strconv.FormatInt(p, 10), Current: p == page})
		last = p
	}
	return out
}
