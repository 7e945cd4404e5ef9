package web

import (
	"github.com/dshq/dshq/internal/numfmt"
	"net/url"
	"sort"
	"strings"

	"github.com/dshq/dshq"
)

// The conversation view (/s/{id}) reads a page of a session's events as
// turns: each assistant step with its tool calls and, under each call, its
// result (paired by call id, the duplicate tool/call event folded into its
// call); reasoning collapsed; the harness's bookkeeping folded into one quiet
// line per run; compactions and rewinds as visible boundaries. The event log
// (/s/{id}/log) shows the same events one row each.

// conversation is one page's events as turns.
type conversation struct {
	Turns []*convTurn
}

// convTurn is a turn, or the events before a page's first turn/start (Open
// with no start: the turn began on an earlier page, or the events precede any
// turn).
type convTurn struct {
	// Number is the turn number ("" when the turn began on an earlier page
	// or before any turn/start).
	Number    string
	StartSeq  int64
	HasStart  bool
	StartTime int64
	// End is the turn/end event, nil while the turn is open on this page.
	End       *eventView
	EndReason string
	Bad       bool
	Items     []*convItem
	// Between is set for events between two turns (not the page's first).
	Between bool
	// After is the bookkeeping logged after the turn's end, before the next
	// turn (a harness's closing notes).
	After []*convItem
	// Calls and Failed count the turn's tool calls on this page.
	Calls, Failed int
	LastTime      int64
}

// Duration is the turn's span from its start to its end (or its last event
// on the page) in milliseconds.
func (t *convTurn) Duration() int64 {
	end := t.LastTime
	if t.End != nil {
		end = t.End.Time
	}
	if !t.HasStart || end < t.StartTime {
		return -1
	}
	return end - t.StartTime
}

// convItem is one entry of a turn: an event, a run of bookkeeping events, or
// a boundary (a replacement: a compaction checkpoint, a rewind).
type convItem struct {
	Kind     string // event, fold, boundary
	Event    *eventView
	Fold     []*eventView
	Boundary string // Compaction, Rewind, Replacement
}

// foldCounts is the kinds of a fold's events in the order they first
// appear, and the number of each.
func (it *convItem) foldCounts() (order []string, n map[string]int) {
	n = map[string]int{}
	for _, v := range it.Fold {
		k := shortType(v.Type)
		if n[k] == 0 {
			order = append(order, k)
		}
		n[k]++
	}
	return order, n
}

// FoldSummary names the kinds of a fold's events: "progress ×8 · system ×2".
func (it *convItem) FoldSummary() string {
	order, n := it.foldCounts()
	sort.SliceStable(order, func(i, j int) bool { return n[order[i]] > n[order[j]] })
	parts := make([]string, 0, len(order))
	for _, k := range order {
		if n[k] > 1 {
			k += " ×" + numfmt.Thousands(int64(n[k]))
		}
		parts = append(parts, k)
	}
	return strings.Join(parts, " · ")
}

// shortType drops a harness prefix (claude-code/progress → progress).
func shortType(t string) string {
	for _, p := range []string{dshq.HarnessClaudeCode + "/", dshq.HarnessCodex + "/"} {
		if strings.HasPrefix(t, p) {
			return strings.TrimPrefix(t, p)
		}
	}
	return t
}

// isBookkeeping reports whether an event is the harness's or the log's own
// bookkeeping rather than the conversation: converted harness records
// (progress, file-history snapshots, queue operations, system notes, turn
// contexts, copies), request headers and contexts, step boundaries, titles,
// pieces of long lines, and any ignorable event of a type the UI does not
// show.
func isBookkeeping(v *eventView) bool {
	t := v.Type
	switch {
	case strings.HasPrefix(t, dshq.HarnessClaudeCode+"/"), strings.HasPrefix(t, dshq.HarnessCodex+"/"),
		strings.HasPrefix(t, "capture/"):
		return true
	}
	switch t {
	case "request/header", "request/context", "step/start", "step/end", "session/title", "assistant/chunk":
		return true
	}
	return v.Class == "other" && v.ignorable
}

// buildConversation groups a page's events (in seq order) into turns.
func buildConversation(events []eventView) *conversation {
	c := &conversation{}
	var cur, ended *convTurn     // the open turn; the turn that ended last
	calls := map[string]*block{} // open tool-call blocks by call id
	turn := func() *convTurn {
		if cur == nil {
			cur = &convTurn{Between: len(c.Turns) > 0}
			c.Turns = append(c.Turns, cur)
		}
		return cur
	}
	add := func(it *convItem) {
		t := turn()
		t.Items = append(t.Items, it)
	}
	for i := range events {
		v := &events[i]
		if cur != nil {
			cur.LastTime = max(cur.LastTime, v.Time)
		}
		switch {
		case v.Type == "turn/start":
			cur = &convTurn{Number: v.turnNumber, StartSeq: v.Seq, HasStart: true, StartTime: v.Time, LastTime: v.Time}
			c.Turns = append(c.Turns, cur)
			ended = nil
			continue
		case v.Type == "turn/end":
			t := turn()
			t.End, t.EndReason, t.Bad = v, v.Line, strings.Contains(v.Class, "turn-bad") || v.Error != ""
			if t.Number == "" {
				t.Number = v.turnNumber
			}
			cur, ended = nil, t
			continue
		case v.Type == "tool/call":
			if b := calls[v.CallID]; v.CallID != "" && b != nil && !b.HasCallSeq {
				b.CallSeq, b.HasCallSeq = v.Seq, true
				continue
			}
			turn().Calls++
		case v.Type == dshq.TypeToolResult:
			if v.Failed {
				turn().Failed++
			}
			if b := calls[v.CallID]; v.CallID != "" && b != nil && b.Result == nil {
				b.Result = v
				continue
			}
		case isBookkeeping(v):
			var items *[]*convItem
			if cur == nil && ended != nil {
				items = &ended.After
			} else {
				items = &turn().Items
			}
			if n := len(*items); n > 0 && (*items)[n-1].Kind == "fold" {
				(*items)[n-1].Fold = append((*items)[n-1].Fold, v)
			} else {
				*items = append(*items, &convItem{Kind: "fold", Fold: []*eventView{v}})
			}
			continue
		}
		ended = nil
		if v.IsReplace {
			add(&convItem{Kind: "boundary", Event: v, Boundary: boundaryKind(v)})
		} else {
			add(&convItem{Kind: "event", Event: v})
		}
		if v.Class == "assistant" {
			for j := range v.Blocks {
				if b := &v.Blocks[j]; b.Kind == "tool-call" && b.CallID != "" {
					calls[b.CallID] = b
					turn().Calls++
				}
			}
		}
	}
	return c
}

// boundaryKind names what a replacement is: a compaction checkpoint, a
// rewind (a prompt that replaced what followed the point it went back to),
// or another replacement.
func boundaryKind(v *eventView) string {
	switch {
	case v.Class == "checkpoint":
		return "Compaction"
	case v.Class == "user":
		return "Rewind"
	}
	return "Replacement"
}

// eventFilter is a page's event filter, from the URL: type (comma-separated
// event types, a trailing /* a prefix), surface (repeatable) and errors=1.
type eventFilter struct {
	Types    []string
	Surfaces []string
	Errors   bool
}

func parseEventFilter(q url.Values) (eventFilter, error) {
	var f eventFilter
	for _, t := range strings.Split(q.Get("type"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			f.Types = append(f.Types, t)
		}
	}
	for _, sf := range q["surface"] {
		if sf == "" {
			continue
		}
		if !dshq.Surface(sf).Valid() {
			return f, badRequest("The surface %q is not current, shadowed or log-only.", sf)
		}
		f.Surfaces = append(f.Surfaces, sf)
	}
	switch q.Get("errors") {
	case "", "0":
	case "1", "on", "true":
		f.Errors = true
	default:
		return f, badRequest("errors is 1 or absent, not %q.", q.Get("errors"))
	}
	return f, nil
}

// Any reports whether the filter narrows anything.
func (f eventFilter) Any() bool { return len(f.Types) > 0 || len(f.Surfaces) > 0 || f.Errors }

// TypeText is the type filter as the form shows it.
func (f eventFilter) TypeText() string { return strings.Join(f.Types, ", ") }

// HasSurface reports whether the surface filter includes s.
func (f eventFilter) HasSurface(s string) bool {
	for _, x := range f.Surfaces {
		if x == s {
			return true
		}
	}
	return false
}

func (f eventFilter) values() url.Values {
	v := url.Values{}
	if len(f.Types) > 0 {
		v.Set("type", strings.Join(f.Types, ","))
	}
	for _, s := range f.Surfaces {
		v.Add("surface", s)
	}
	if f.Errors {
		v.Set("errors", "1")
	}
	return v
}

// keeps reports whether v passes the filter.
func (f eventFilter) keeps(v *eventView) bool {
	if len(f.Types) > 0 {
		ok := false
		for _, t := range f.Types {
			if p, prefix := strings.CutSuffix(t, "*"); prefix && strings.HasPrefix(v.Type, p) || v.Type == t {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if len(f.Surfaces) > 0 && !f.HasSurface(v.Surface) {
		return false
	}
	if f.Errors && !v.isError() {
		return false
	}
	return true
}

// apply returns the events that pass, at most limit.
func (f eventFilter) apply(events []eventView, limit int64) []eventView {
	out := events[:0:0]
	for i := range events {
		if f.keeps(&events[i]) {
			out = append(out, events[i])
			if int64(len(out)) == limit {
				break
			}
		}
	}
	return out
}

// isError reports whether an event is a failure: a failed tool result, a
// turn that did not complete, an interrupted reply, a failed compaction.
func (v *eventView) isError() bool {
	if v.Error != "" || strings.Contains(v.Class, "turn-bad") {
		return true
	}
	for _, b := range v.Blocks {
		if b.IsError {
			return true
		}
	}
	return false
}
