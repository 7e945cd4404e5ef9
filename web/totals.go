package web

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/usage"
)

// totals are what a session adds up to: its span, turns, tool calls and
// failures, the models that answered (its tokens and cost are the usage
// projection's: Usage). They are read from its stored events (crash closers not
// included) and kept per session: a log only grows, so a later read adds
// only the events stored since.
type totals struct {
	Events      int64 // the stored events counted
	First, Last int64 // the first and last events' times (epoch ms)
	Turns       int64
	ToolCalls   int64
	FailedCalls int64
	Models      []string
	// Usage is the session's tokens and cost from the usage projection,
	// subagents included (set per page on a copy; nil when not read).
	Usage *sessionUsage

	models map[string]bool
	calls  callSet
}

// Duration is the span from the first to the last event.
func (t *totals) Duration() int64 { return max(0, t.Last-t.First) }

// maxTotalsSessions bounds the sessions whose totals the UI keeps.
const maxTotalsSessions = 4096

// totalsCache holds the sessions' totals by id.
type totalsCache struct {
	mu sync.Mutex // guards m
	m  map[string]*totals
}

// sessionTotals returns the totals of the session st describes, reading
// only the events stored since they were last read (nil when they cannot be
// read: the page shows none).
func (s *Server) sessionTotals(ctx context.Context, id string, st *stat) *totals {
	s.totals.mu.Lock()
	cached := s.totals.m[id]
	s.totals.mu.Unlock()
	if cached != nil && cached.Events == st.EventCount {
		return cached
	}
	t := &totals{models: map[string]bool{}}
	if cached != nil && cached.Events < st.EventCount {
		*t = *cached
		t.models, t.calls = cloneSet(cached.models), cached.calls.clone()
		t.Models = append([]string(nil), cached.Models...)
	}
	if err := s.scanEvents(ctx, id, t.Events, st.EventCount, t.add); err != nil {
		return nil
	}
	sort.Strings(t.Models)
	s.totals.mu.Lock()
	if s.totals.m == nil || len(s.totals.m) >= maxTotalsSessions {
		s.totals.m = map[string]*totals{}
	}
	if old := s.totals.m[id]; old == nil || old.Events <= t.Events {
		s.totals.m[id] = t
	}
	s.totals.mu.Unlock()
	return t
}

func cloneSet(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// scanEvents calls fn with the stored events from..count-1 in seq order:
// sessions.read pages from the start, events.read windows from later on.
func (s *Server) scanEvents(ctx context.Context, id string, from, count int64, fn func(dshq.Event)) error {
	if from >= count {
		return nil
	}
	if from > 0 {
		evs, err := s.readRange(ctx, id, from, count-1, count)
		for _, e := range evs {
			fn(e)
		}
		return err
	}
	req := dshq.SessionReadRequest{SessionID: id, Limit: dshq.MaxListLimit}
	return query.Follow(nil, func(cursor string, opts []query.CallOption) (string, uint64, error) {
		req.Cursor = cursor
		page, err := s.qc.ReadSession(ctx, req, opts...)
		if err != nil {
			return "", 0, err
		}
		for _, e := range page.Events {
			if e.Seq >= count {
				return "", page.Generation, nil
			}
			fn(e)
		}
		if len(page.Events) == 0 {
			return "", page.Generation, nil
		}
		return page.NextCursor, page.Generation, nil
	})
}

// add counts one event.
func (t *totals) add(e dshq.Event) {
	if t.Events == 0 || e.Time < t.First {
		t.First = e.Time
	}
	t.Last = max(t.Last, e.Time)
	t.Events = e.Seq + 1
	f := factsOf(e)
	if e.Type == "turn/start" {
		t.Turns++
	}
	if m := f.Model; m != "" && !t.models[m] {
		t.models[m] = true
		t.Models = append(t.Models, clean(m))
	}
	for _, c := range f.Calls {
		t.calls.add(c.ID)
	}
	t.ToolCalls = t.calls.Count
	if f.Failed {
		t.FailedCalls++
	}
}

// ModelList is the models, comma-separated.
func (t *totals) ModelList() string { return strings.Join(t.Models, ", ") }

// duration renders milliseconds for people: 850 ms, 12.4 s, 3 min 05 s,
// 2 h 14 min, 3 d 4 h.
func duration(ms int64) string {
	if ms < 0 {
		return ""
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return sprintf("%d ms", ms)
	case d < time.Minute:
		return sprintf("%.1f s", d.Seconds())
	case d < time.Hour:
		return sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return sprintf("%d h %02d min", int(d.Hours()), int(d.Minutes())%60)
	}
	return sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
}

// applyTotals puts the totals on the row.
func (r *sessionRow) applyTotals(t *totals) {
	r.Totals = t
}

// sessionUsage is what usage.report says a session spent, its subagents'
// calls rolled up: the numbers `dshq usage session --session ID` prints.
type sessionUsage struct {
	usage.Totals
	Models []string
}

// sessionUsage reads the session's usage (nil when it cannot be read: the
// header shows none).
func (s *Server) sessionUsage(ctx context.Context, id string) *sessionUsage {
	rep, err := s.qc.SessionUsage(ctx, []string{id})
	if err != nil {
		s.log.Debug("web: session usage", "session", id, "err", err)
		return nil
	}
	u := &sessionUsage{Totals: rep.Totals}
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		for _, m := range r.ModelsUsed {
			if !seen[m] {
				seen[m] = true
				u.Models = append(u.Models, clean(m))
			}
		}
	}
	sort.Strings(u.Models)
	return u
}

// Cost is the cost as the usage report prints it: a model without a price
// is never $0 ("no price", or "$x + unpriced").
func (u *sessionUsage) Cost() string { return usageCost(u.Totals) }

// ExactCost is the priced models' cost to the hundredth of a cent ("" when
// none is priced).
func (u *sessionUsage) ExactCost() string {
	if u.TotalCost == nil {
		return ""
	}
	return "$" + strconv.FormatFloat(*u.TotalCost, 'f', 4, 64)
}

// Unpriced names the models the pricing table does not price.
func (u *sessionUsage) Unpriced() string { return clean(strings.Join(u.UnpricedModels, ", ")) }

// withUsage returns a copy of t (the cached totals are shared) with u.
func withUsage(t *totals, u *sessionUsage) *totals {
	if t == nil {
		return nil
	}
	c := *t
	c.Usage = u
	return &c
}
