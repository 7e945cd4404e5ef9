package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/usage"
)

// The Usage page (docs/usage.md#the-usage-page): tokens and cost over time
// stacked by model or machine, and the top sessions and projects, from
// usage.report; it follows the feed and asks again when an event that may
// state usage is committed. Its template is usage.html, its script
// static/usage.js, which draws the charts as SVG with DOM calls (no HTML
// sink, so no Trusted Types policy of its own).

// usageTopN is how many sessions and projects the page lists.
const usageTopN = 10

// usageFilters are the page's query parameters.
type usageFilters struct {
	Since, Until, TZ, Stack, Prefix, Machine string
}

func parseUsageFilters(q url.Values) (usageFilters, error) {
	f := usageFilters{Since: q.Get("since"), Until: q.Get("until"), TZ: q.Get("tz"), Stack: q.Get("stack"),
		Prefix: q.Get("prefix"), Machine: q.Get("machine")}
	if f.TZ == "" {
		f.TZ = "UTC"
	}
	if _, err := time.LoadLocation(f.TZ); err != nil || f.TZ == "Local" {
		return f, badRequest("The time zone %q is not an IANA time zone name.", f.TZ)
	}
	switch f.Stack {
	case "":
		f.Stack = "model"
	case "model", "machine":
	default:
		return f, badRequest("Stack by model or machine, not %q.", f.Stack)
	}
	for _, d := range []string{f.Since, f.Until} {
		if d != "" {
			if _, err := time.Parse(time.DateOnly, d); err != nil {
				return f, badRequest("%q is not a date (YYYY-MM-DD).", d)
			}
		}
	}
	return f, nil
}

func (f usageFilters) body(groupBy []string, limit int) wire.UsageBody {
	b := wire.UsageBody{Since: f.Since, Until: f.Until, TimeZone: f.TZ, GroupBy: groupBy, Rollup: true, Limit: limit}
	if f.Prefix != "" {
		b.Prefix = []string{f.Prefix}
	}
	if f.Machine != "" {
		b.Machine = []string{f.Machine}
	}
	return b
}

// usageData is what the page draws: the series over time, the top lists
// and the totals, at one generation.
type usageData struct {
	Generation uint64            `json:"generation"`
	TimeZone   string            `json:"timeZone"`
	Stack      string            `json:"stack"`
	Days       []usage.ReportRow `json:"days"`
	Sessions   []usage.ReportRow `json:"sessions"`
	Projects   []usage.ReportRow `json:"projects"`
	Totals     usage.Totals      `json:"totals"`
	Prices     string            `json:"prices"`
}

// usageData asks the three reports of the page, at least at gen.
func (s *Server) usageData(ctx context.Context, f usageFilters, gen uint64) (*usageData, error) {
	var opts []query.CallOption
	if gen > 0 {
		opts = append(opts, query.WithMinGeneration(gen))
	}
	days, err := s.qc.Usage(ctx, f.body([]string{"day", f.Stack}, wire.MaxUsageLimit), opts...)
	if err != nil {
		return nil, err
	}
	opts = []query.CallOption{query.WithMinGeneration(days.Generation)}
	sessions, err := s.qc.Usage(ctx, f.body([]string{"session"}, usageTopN), opts...)
	if err != nil {
		return nil, err
	}
	projects, err := s.qc.Usage(ctx, f.body([]string{"project"}, usageTopN), opts...)
	if err != nil {
		return nil, err
	}
	return &usageData{Generation: max(days.Generation, sessions.Generation, projects.Generation), TimeZone: days.TimeZone,
		Stack: f.Stack, Days: days.Rows, Sessions: sessions.Rows, Projects: projects.Rows, Totals: days.Totals,
		Prices: days.PriceSource + " (" + days.PriceDate + ")"}, nil
}

// usagePage is the page's view data.
type usagePage struct {
	F                  usageFilters
	D                  *usageData
	JSON               string // D, for the page's script (a data attribute: no inline script)
	Cost               string
	Sessions, Projects []usageTop
	Live               string // the SSE URL
}

// usageTop is one line of a top list.
type usageTop struct {
	Label  string
	Tokens int64
	Cost   string
}

func usageTops(rows []usage.ReportRow, label func(usage.ReportRow) *string) []usageTop {
	out := make([]usageTop, 0, len(rows))
	for _, r := range rows {
		l := ""
		if p := label(r); p != nil {
			l = *p
		}
		out = append(out, usageTop{Label: l, Tokens: r.TotalTokens, Cost: usageCost(r.Totals)})
	}
	return out
}

// usageCost is a cost as the page shows it: no price is not $0.
func usageCost(t usage.Totals) string {
	switch {
	case t.TotalCost == nil:
		return "no price"
	case len(t.UnpricedModels) > 0:
		return "$" + strconv.FormatFloat(*t.TotalCost, 'f', 2, 64) + " + unpriced"
	}
	return "$" + strconv.FormatFloat(*t.TotalCost, 'f', 2, 64)
}

// usageFor reads the reports a request asks for: its filters, at least at
// its ?gen=G (the generation a "usage" live event named). ok is false when
// it answered with a failure.
func (s *Server) usageFor(w http.ResponseWriter, r *http.Request) (f usageFilters, d *usageData, ok bool) {
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	f, err := parseUsageFilters(r.URL.Query())
	var gen uint64
	if g := r.URL.Query().Get("gen"); err == nil && g != "" {
		if gen, err = strconv.ParseUint(g, 10, 64); err != nil {
			err = badRequest("%q is not a generation.", g)
		}
	}
	if err == nil {
		d, err = s.usageData(ctx, f, gen)
	}
	if err != nil {
		s.fail(w, r, err)
		return f, nil, false
	}
	return f, d, true
}

func (s *Server) usagePage(w http.ResponseWriter, r *http.Request) {
	f, d, ok := s.usageFor(w, r)
	if !ok {
		return
	}
	js, err := json.Marshal(d)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	q.Del("gen")
	q.Set("after", strconv.FormatUint(d.Generation, 10))
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, "usage-page", usagePage{F: f, D: d, JSON: string(js), Cost: usageCost(d.Totals),
		Sessions: usageTops(d.Sessions, func(r usage.ReportRow) *string { return r.SessionID }),
		Projects: usageTops(d.Projects, func(r usage.ReportRow) *string { return r.Project }), Live: "/usage/live?" + q.Encode()}); err != nil {
		s.log.Error("web: render", "page", "usage", "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

// usageDataJSON answers the page script's reads (usageFor).
func (s *Server) usageDataJSON(w http.ResponseWriter, r *http.Request) {
	_, d, ok := s.usageFor(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(d)
}

// usageLive streams a "usage" event (its generation) for every committed
// event that may state usage; the page then reads /usage/data at that
// generation. Other events only move the resume point.
func (s *Server) usageLive(w http.ResponseWriter, r *http.Request) {
	starts, err := resumePoints(r, 1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	filters := []feed.Filter{{Kinds: []feed.Kind{feed.KindEvent}}}
	s.stream(w, r, filters, starts, func(out *sse, d delivery, ids []uint64) error {
		id := joinIDs(ids)
		ev := d.m.Event
		if d.m.Kind != feed.KindEvent || ev == nil || (!ev.RawOmitted && !usage.MayStateUsage(ev.Raw)) {
			return out.mark(id)
		}
		return out.send("usage", id, map[string]uint64{"generation": d.m.Generation})
	})
}
