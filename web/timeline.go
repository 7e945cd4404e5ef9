package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/numfmt"
	"github.com/dshq/dshq/query/wire"
)

// The timeline (/s/{id}/timeline) is a waterfall of a session's turns,
// model requests and tool calls on one time axis, their durations from the
// events' times, with its subagents as nested lanes. It is server-rendered
// SVG: bars are rects placed by attributes (no style attribute, no script),
// each a link to its event in the conversation.

// Timeline bounds.
const (
	// maxTimelineRows is the most rows one timeline page draws.
	maxTimelineRows = 400
	// maxTimelineLanes bounds the subagents whose lanes are read.
	maxTimelineLanes = 48
	// timelineWidth is the track's viewBox width: bars are placed in
	// thousandths of the page's span.
	timelineWidth = 1000
)

// tlSpan is one row of the timeline: a subagent's lane, a turn, a model
// request (from the event it answers to its last message) or a tool call
// (from its call to its result).
type tlSpan struct {
	Kind       string // lane, turn, request, tool
	Label      string
	Detail     string
	SessionID  string
	Seq        int64 // the event the row links to (a lane links to its session)
	Start, End int64 // epoch ms
	// Open is set for a span without an end in the log (a call without a
	// result, a turn without turn/end): it is drawn to the last event.
	Open   bool
	Failed bool
	// Depth is 0 for the session's rows, 1… for its subagents' lanes.
	Depth int
	// Nested is set for a request or call inside a turn.
	Nested bool
	callID string
}

// tlBuilder turns one session's events, in seq order, into spans. A log
// only grows, so a builder is kept (timelineCache) and later given only the
// events stored since.
type tlBuilder struct {
	id    string
	spans []*tlSpan
	turn  *tlSpan
	req   *tlSpan
	open  map[string]*tlSpan // the tool spans by call id
	seen  callSet            // the calls counted
	// input is the time of the latest event a model request answers: the
	// user's message, a tool result, a step's or turn's start.
	input       int64
	first, last int64
	events      int64 // the events read: the next one's seq
	// turns and requests count the spans of their kind (seen counts the
	// tool spans).
	turns, requests int
}

func newTLBuilder(id string) *tlBuilder {
	return &tlBuilder{id: id, open: map[string]*tlSpan{}}
}

func (b *tlBuilder) span(kind, label string, seq, start int64) *tlSpan {
	sp := &tlSpan{Kind: kind, Label: label, SessionID: b.id, Seq: seq, Start: start, End: start,
		Nested: kind != "turn" && b.turn != nil}
	b.spans = append(b.spans, sp)
	return sp
}

// add reads one event.
func (b *tlBuilder) add(e dshq.Event) {
	if b.events == 0 || e.Time < b.first {
		b.first = e.Time
	}
	b.events = e.Seq + 1
	b.last = max(b.last, e.Time)
	if b.turn != nil && !isBookkeeping(&eventView{Type: e.Type, ignorable: e.Ignorable}) && e.Type != "turn/end" {
		// A turn ends at its last message, call or result, or at its
		// turn/end unless converted: a converted turn/end is written when
		// the harness logged the next prompt.
		b.turn.End = max(b.turn.End, e.Time)
	}
	f := factsOf(e)
	switch e.Type {
	case "turn/start":
		b.closeTurn()
		b.turn = b.span("turn", turnLabel(f), e.Seq, e.Time)
		b.turns++
		b.req, b.input = nil, e.Time
	case "turn/end":
		if b.turn == nil {
			b.turn = b.span("turn", turnLabel(f), e.Seq, e.Time)
			b.turns++
		}
		if !f.Captured {
			b.turn.End = max(b.turn.End, e.Time) // a harness's own turn/end is on time
		}
		if f.Reason != "" {
			b.turn.Failed, b.turn.Detail = true, clean(f.Reason)
		}
		b.turn, b.req = nil, nil
	case dshq.TypeAssistantMessage:
		b.assistant(e, f)
	case "tool/call":
		b.calls(f, e)
	case dshq.TypeToolResult:
		b.result(e, f)
		b.req, b.input = nil, e.Time
	case dshq.TypeUserMessage, "step/start":
		b.req, b.input = nil, e.Time
	case "step/end":
		b.req = nil
	}
}

func (b *tlBuilder) assistant(e dshq.Event, f eventFacts) {
	if b.req == nil {
		start := b.input
		if start == 0 || start > e.Time {
			start = e.Time
		}
		label := "Model request"
		if f.Model != "" {
			label = clean(f.Model)
		}
		b.req = b.span("request", label, e.Seq, start)
		b.requests++
	}
	b.req.End = max(b.req.End, e.Time)
	if f.Interrupted {
		b.req.Failed, b.req.Detail = true, "interrupted"
	}
	b.calls(f, e)
}

// calls opens a span for each call the event makes that is not open yet
// (a tool/call repeats its assistant message's tool-call block).
func (b *tlBuilder) calls(f eventFacts, e dshq.Event) {
	for _, c := range f.Calls {
		if !b.seen.add(c.ID) {
			continue
		}
		name := c.Name
		if name == "" {
			name = "tool call"
		}
		sp := b.span("tool", clean(name), e.Seq, e.Time)
		sp.Open, sp.callID = true, c.ID
		if c.ID != "" {
			b.open[c.ID] = sp
		}
	}
}

func (b *tlBuilder) result(e dshq.Event, f eventFacts) {
	sp := b.open[f.ResultOf]
	if sp == nil || !sp.Open {
		return
	}
	sp.End, sp.Open = max(sp.Start, e.Time), false
	sp.Failed = f.Failed
}

func (b *tlBuilder) closeTurn() {
	if b.turn != nil {
		b.turn.Open = true
		b.turn = nil
	}
}

// rows returns copies of the spans at depth, what the log left open
// ending at its last event (the builder itself stays open for more).
func (b *tlBuilder) rows(depth int) []*tlSpan {
	out := make([]*tlSpan, len(b.spans))
	for i, sp := range b.spans {
		c := *sp
		c.Depth = depth
		if sp == b.turn {
			c.Open = true
		}
		if c.Open && c.Kind != "turn" {
			c.End = max(c.Start, b.last)
		}
		out[i] = &c
	}
	return out
}

// maxTimelines bounds the sessions whose timeline builders the UI keeps.
const maxTimelines = 256

// timelineCache holds timeline builders by session id. A page takes a
// builder out while it reads more events into it (a concurrent page
// builds its own) and puts it back.
type timelineCache struct {
	mu sync.Mutex // guards m
	m  map[string]*tlBuilder
}

func (c *timelineCache) take(id string) *tlBuilder {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.m[id]
	delete(c.m, id)
	return b
}

func (c *timelineCache) put(b *tlBuilder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxTimelines {
		c.m = map[string]*tlBuilder{}
	}
	if old := c.m[b.id]; old == nil || old.events < b.events {
		c.m[b.id] = b
	}
}

// timelineData is the timeline page.
type timelineData struct {
	Row        sessionRow
	Rows       []tlRow
	Axis       []string // the tick labels, at 0, ¼, ½, ¾ and the end of the span
	Start      int64
	Span       int64
	Turns      int
	Requests   int
	Tools      int
	Lanes      int
	LanesCut   bool
	Page       int64
	Pages      int64
	Prev, Next string
	Empty      bool
	// Gaps are the idle stretches drawn short; Idle the shortest such.
	Gaps []tlGap
	Idle int64
}

// tlGap is an idle stretch on the track.
type tlGap struct{ X, W, Title string }

// tlRow is a span placed on the page's axis.
type tlRow struct {
	*tlSpan
	URL      string
	X, W     string // the bar in viewBox units
	Offset   string // from the page's start
	Duration string
}

// DepthClass bounds the lane indentation the stylesheet knows.
func (r tlRow) DepthClass() int { return min(r.Depth, 3) }

// Title is the bar's tooltip.
func (r tlRow) Title() string {
	t := r.Label + " · " + r.Duration
	if r.Open {
		t += " (no end in the log)"
	}
	if r.Failed {
		t += " · failed"
	}
	if r.Kind != "lane" {
		t += " · #" + strconv.FormatInt(r.Seq, 10)
	}
	return t
}

// lane is a session whose spans the timeline draws.
type lane struct {
	id    string
	title string
	depth int
	count int64
	b     *tlBuilder
	spans []*tlSpan
}

func (s *Server) timelinePage(r *http.Request) (*view, error) {
	id := r.PathValue("id")
	ctx := r.Context()
	page := int64(0)
	if p := r.URL.Query().Get("page"); p != "" {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return nil, badRequest("The page %q is not a page number.", p)
		}
		page = n
	}
	st, err := s.statSession(ctx, id)
	if err != nil {
		return nil, err
	}
	lanes, cut, err := s.timelineLanes(ctx, id, st)
	if err != nil {
		return nil, err
	}
	d := &timelineData{Row: newRow(sessionRecord{SessionRecord: st.Session, Harness: st.Harness}, st), LanesCut: cut, Lanes: len(lanes) - 1}
	d.Row.Tab = "timeline"
	var u *sessionUsage
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fanout)
	g.Go(func() error { d.Row.applyTotals(s.sessionTotals(gctx, id, st)); return nil })
	g.Go(func() error { u = s.sessionUsage(gctx, id); return nil })
	for _, l := range lanes {
		g.Go(func() error {
			l.b = s.timelines.take(l.id)
			if l.b == nil || l.b.events > l.count {
				l.b = newTLBuilder(l.id)
			}
			err := s.scanEvents(gctx, l.id, l.b.events, l.count, l.b.add)
			s.timelines.put(l.b)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d.Row.applyTotals(withUsage(d.Row.Totals, u))
	spans := mergeLanes(lanes)
	d.Turns, d.Requests, d.Tools = lanes[0].b.turns, lanes[0].b.requests, int(lanes[0].b.seen.Count)
	d.Pages = max(1, (int64(len(spans))+maxTimelineRows-1)/maxTimelineRows)
	if page >= d.Pages {
		base := sessionURL(id) + "/timeline"
		return nil, &httpError{status: http.StatusNotFound, title: "No such page",
			msg:  fmt.Sprintf("This timeline has %s (%s rows); page %d is past its end.", plural(d.Pages, "page"), numfmt.Thousands(int64(len(spans))), page+1),
			link: base + "?page=" + strconv.FormatInt(d.Pages-1, 10), linkText: "Go to the last page"}
	}
	d.Page = page
	lo, hi := page*maxTimelineRows, min(int64(len(spans)), (page+1)*maxTimelineRows)
	d.place(spans[lo:hi], s.pageSize)
	d.Empty = len(spans) == 0
	base := sessionURL(id) + "/timeline?page="
	if page > 0 {
		d.Prev = base + strconv.FormatInt(page-1, 10)
	}
	if page < d.Pages-1 {
		d.Next = base + strconv.FormatInt(page+1, 10)
	}
	title := d.Row.Title
	if title == "" {
		title = d.Row.Label
	}
	return &view{Page: "timeline", Title: "Timeline · " + title, Data: d}, nil
}

// timelineLanes returns the session and its subagents (depth first, at
// most maxTimelineLanes of them; cut says some were left out), each with
// its event count.
func (s *Server) timelineLanes(ctx context.Context, id string, st *stat) (lanes []*lane, cut bool, err error) {
	lanes = []*lane{{id: id, count: st.EventCount}}
	var lt struct {
		Descendants []wireLineage `json:"descendants"`
	}
	if err := s.call(ctx, wire.EndpointSessionsTrace, dshq.SessionTraceRequest{SessionID: id}, &lt); err != nil {
		return nil, false, err
	}
	var walk func([]wireLineage, int)
	walk = func(ns []wireLineage, depth int) {
		for _, n := range ns {
			if n.Session.Header.Origin != dshq.OriginSubagent {
				continue // a fork is a session of its own, not a lane
			}
			if len(lanes) > maxTimelineLanes {
				cut = true
				return
			}
			cid := n.Session.Header.ID
			lanes = append(lanes, &lane{id: cid, depth: depth})
			walk(n.Descendants, depth+1)
		}
	}
	walk(lt.Descendants, 1)
	ids := make([]string, 0, len(lanes)-1)
	for _, l := range lanes[1:] {
		ids = append(ids, l.id)
	}
	stats := s.statAll(ctx, ids)
	kept := lanes[:1]
	for _, l := range lanes[1:] {
		cst := stats[l.id]
		if cst == nil {
			continue
		}
		l.count = cst.EventCount
		if cst.Title != nil {
			l.title = clean(cst.Title.Title)
		}
		kept = append(kept, l)
	}
	return kept, cut, nil
}

// mergeLanes returns the rows of every lane: the session's, and each
// subagent's lane (its head, then its rows) placed among its parent's rows
// at its start, so it follows the call that started it.
func mergeLanes(lanes []*lane) []*tlSpan {
	for _, l := range lanes {
		l.spans = l.b.rows(l.depth)
	}
	// Children come after their parent in lanes (depth first): fold them
	// in from the last, so a lane holds its own subagents when its parent
	// takes it.
	for i := len(lanes) - 1; i > 0; i-- {
		l := lanes[i]
		if l.b.events == 0 {
			continue
		}
		parent := lanes[0]
		for j := i - 1; j >= 0; j-- {
			if lanes[j].depth == l.depth-1 {
				parent = lanes[j]
				break
			}
		}
		label, detail := l.title, clean(l.id)
		if label == "" {
			label, detail = detail, ""
		}
		head := &tlSpan{Kind: "lane", Label: label, Detail: detail, SessionID: l.id, Seq: -1,
			Start: l.b.first, End: l.b.last, Depth: l.depth}
		block := append([]*tlSpan{head}, l.spans...)
		ps := parent.spans
		at := len(ps)
		for k, sp := range ps {
			// Before the parent's next row, or a sibling lane that began later.
			if (sp.Depth == parent.depth || sp.Kind == "lane" && sp.Depth == l.depth) && sp.Start > head.Start {
				at = k
				break
			}
		}
		parent.spans = append(ps[:at:at], append(block, ps[at:]...)...)
	}
	return lanes[0].spans
}

// place puts spans on the page's axis: from the earliest start to the
// latest end among them, idle gaps drawn short.
func (d *timelineData) place(spans []*tlSpan, pageSize int64) {
	if len(spans) == 0 {
		return
	}
	ax := newAxis(spans)
	d.Start, d.Span = ax.lo, ax.hi-ax.lo
	for i := 0; i <= 4; i++ {
		d.Axis = append(d.Axis, "+"+duration(ax.at(float64(i)*timelineWidth/4)-ax.lo))
	}
	for _, g := range ax.gaps {
		d.Gaps = append(d.Gaps, tlGap{X: fmtUnit(g.x), W: fmtUnit(gapWidth), Title: "idle " + duration(g.to-g.from)})
	}
	d.Idle = ax.idle
	const minW = 3.0 // an instant stays visible
	for _, sp := range spans {
		x := ax.pos(sp.Start)
		w := max(ax.pos(sp.End)-x, minW)
		x = min(x, timelineWidth-w)
		row := tlRow{tlSpan: sp, X: fmtUnit(x), W: fmtUnit(w),
			Offset: "+" + duration(sp.Start-ax.lo), Duration: duration(sp.End - sp.Start)}
		if sp.Kind == "lane" {
			row.URL = sessionURL(sp.SessionID) + "/timeline"
		} else {
			row.URL = eventURL(sp.SessionID, sp.Seq, pageSize)
		}
		d.Rows = append(d.Rows, row)
	}
}

func fmtUnit(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// gapWidth is how wide an idle gap is drawn, in viewBox units.
const gapWidth = 16.0

// minIdle is the shortest stretch without activity drawn short: a person
// away, not a slow tool.
const minIdle = 60 * 1000

// tlAxis maps times to the track: linear over the stretches some span
// covers, each idle gap (longer than minIdle and than a quarter of the
// covered time) drawn gapWidth wide.
type tlAxis struct {
	lo, hi int64
	gaps   []axisGap
	scale  float64 // units per ms of covered time
	idle   int64
}

type axisGap struct {
	from, to int64
	x        float64
}

func newAxis(spans []*tlSpan) *tlAxis {
	iv := make([][2]int64, 0, len(spans))
	for _, sp := range spans {
		iv = append(iv, [2]int64{sp.Start, sp.End})
	}
	slices.SortFunc(iv, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	ax := &tlAxis{lo: iv[0][0], hi: iv[0][1]}
	var holes [][2]int64
	end := iv[0][1]
	for _, v := range iv[1:] {
		if v[0] > end {
			holes = append(holes, [2]int64{end, v[0]})
		}
		end = max(end, v[1])
	}
	ax.hi = end
	covered := ax.hi - ax.lo
	for _, h := range holes {
		covered -= h[1] - h[0]
	}
	long := max(int64(minIdle), covered/4)
	for _, h := range holes {
		if h[1]-h[0] > long {
			ax.gaps = append(ax.gaps, axisGap{from: h[0], to: h[1]})
		}
	}
	if len(ax.gaps) > 0 {
		ax.idle = long
	}
	linear := float64(ax.hi - ax.lo)
	for _, g := range ax.gaps {
		linear -= float64(g.to - g.from)
	}
	ax.scale = (timelineWidth - gapWidth*float64(len(ax.gaps))) / max(linear, 1)
	for i := range ax.gaps {
		ax.gaps[i].x = ax.pos(ax.gaps[i].from)
	}
	return ax
}

// pos is t's place on the track.
func (ax *tlAxis) pos(t int64) float64 {
	x, from := 0.0, ax.lo
	for _, g := range ax.gaps {
		if t <= g.from {
			break
		}
		x += float64(g.from-from) * ax.scale
		if t < g.to {
			return x + gapWidth*float64(t-g.from)/float64(g.to-g.from)
		}
		x += gapWidth
		from = g.to
	}
	return min(x+float64(t-from)*ax.scale, timelineWidth)
}

// at is the time at track place x (pos's inverse).
func (ax *tlAxis) at(x float64) int64 {
	cur, from := 0.0, ax.lo
	for _, g := range ax.gaps {
		w := float64(g.from-from) * ax.scale
		if x <= cur+w {
			break
		}
		cur += w
		if x < cur+gapWidth {
			return g.from + int64((x-cur)/gapWidth*float64(g.to-g.from))
		}
		cur += gapWidth
		from = g.to
	}
	return min(from+int64((x-cur)/ax.scale), ax.hi)
}
