package web

import (
	"html"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/numfmt"
	"github.com/dshq/dshq/query/wire"
)

// rowOf returns the list row of session id in body ("" when absent).
func rowOf(body, id string) string {
	start := strings.Index(body, `data-sid="`+html.EscapeString(id)+`"`)
	if start < 0 {
		return ""
	}
	end := strings.Index(body[start:], "</tr>")
	if end < 0 {
		return body[start:]
	}
	return body[start : start+end]
}

// listedIDs returns the ids of the list's rows in page order.
func listedIDs(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr class="srow[^"]*" data-sid="([^"]*)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

func TestSessionListShowsEachSessionsTotalsFromTheProjection(t *testing.T) {
	s := newStack(t)
	seedCorpus(t, s)
	// Every usage.report the page asks, counted on its subject.
	var usageAsks atomic.Int64
	sub, err := s.nc.Subscribe(dshq.QuerySubjectPrefix+"."+wire.EndpointUsageReport, func(*nats.Msg) { usageAsks.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	body := s.page(t, "/")
	asked := usageAsks.Load()
	row := rowOf(body, "s-7f3c")
	if row == "" {
		t.Fatalf("no row for s-7f3c:\n%s", body)
	}
	rep, err := s.ui.qc.SessionUsage(testContext(t), []string{"s-7f3c"})
	if err != nil || len(rep.Rows) != 1 {
		t.Fatalf("usage of s-7f3c: %v %+v", err, rep)
	}
	u := rep.Rows[0]
	// The row's tokens and cost are `dshq usage session`'s; its turns,
	// calls and span are the projection's summary of its log (one turn,
	// call_1 named twice and counted once, 100 ms to 13 000 ms).
	mustContain(t, "the sample's row", row,
		"deepseek-v4-flash",
		thousandsOf(u.Input)+" in", thousandsOf(u.Output)+" out", thousandsOf(u.CacheCreation+u.CacheRead)+" cache",
		usageCost(u.Totals),
		`data-label="Turns" data-turns>1<`, `data-label="Tool calls"><span data-calls>1</span> <span class="calls-failed" title="failed tool calls" hidden>`,
		`data-label="Duration" data-span>12.9 s<`,
		`data-label="Last activity"><time data-activity datetime="`+isoTime(1788000013000)+`"`,
		`data-label="Created"><time datetime="`+isoTime(1788000000000)+`"`,
		`<span data-count>18</span> events`)
	if u.Input != 812 || u.Output != 40 {
		t.Errorf("the sample's usage is %d in, %d out; want 812, 40", u.Input, u.Output)
	}
	hostile := rowOf(body, hostileID)
	mustContain(t, "the hostile row", hostile, `data-label="Tool calls"><span data-calls>1</span> <span class="calls-failed" title="failed tool calls"><span data-failed>1</span> failed</span>`)
	// A page of five sessions, two of them children: two reports, not five.
	if n := asked; n < 1 || n > 2 {
		t.Errorf("the list asked usage.report %d times for one page, want 1 or 2 (one per page, not per row)", n)
	}
}

func thousandsOf(n int64) string { return numfmt.Thousands(n) }

// seedActivity imports three sessions whose activity order is not their
// creation order: old-busy (2001, active in 2026, on machine box),
// mid (2017, active then) and new-quiet (2023, no event).
func seedActivity(t *testing.T, s *stack) {
	t.Helper()
	s.importLines(t,
		`{"type":"session","version":2,"id":"old-busy","createdAt":1000000000000,"cwd":"/other","isSeeded":false,"machine":"box"}`,
		`{"type":"turn/start","seq":0,"time":1790000000000,"data":{"turn":1}}`)
	s.importLines(t,
		`{"type":"session","version":2,"id":"mid","createdAt":1500000000000,"cwd":"/home/u/a/b","isSeeded":false}`,
		`{"type":"turn/start","seq":0,"time":1500000001000,"data":{"turn":1}}`)
	s.waitGeneration(t, s.importLines(t,
		`{"type":"session","version":2,"id":"new-quiet","createdAt":1700000000000,"cwd":"/home/u/x","isSeeded":false}`))
}

func TestSessionListSortsByCreationOrLastActivityAndPages(t *testing.T) {
	s := newStack(t, WithListSize(1))
	seedActivity(t, s)
	// follow reads every page of a sort, one session a page.
	follow := func(query string) []string {
		t.Helper()
		var ids []string
		path := "/?" + query
		for n := 0; n < 10; n++ {
			body := s.page(t, path)
			ids = append(ids, listedIDs(body)...)
			next := regexp.MustCompile(`<a class="next" href="([^"]*)"`).FindStringSubmatch(body)
			if next == nil {
				return ids
			}
			if !strings.Contains(next[1], "sort=") && query != "" {
				t.Fatalf("the next page of %q lost its sort: %s", query, next[1])
			}
			path = html.UnescapeString(next[1])
		}
		t.Fatalf("%q: no end of pages", query)
		return nil
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{"new-quiet", "mid", "old-busy"}},
		{"sort=created-asc", []string{"old-busy", "mid", "new-quiet"}},
		{"sort=activity", []string{"old-busy", "new-quiet", "mid"}},
		{"sort=activity-asc", []string{"mid", "new-quiet", "old-busy"}},
	} {
		if got := follow(c.query); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q lists %v, want %v", c.query, got, c.want)
		}
	}
	body := s.page(t, "/?sort=activity")
	mustContain(t, "sorted by activity", body, "Most recently active first", `<option value="activity" selected>`)
	code, bad, _ := s.get(t, "/?sort=title")
	if code != http.StatusBadRequest || !strings.Contains(bad, "The list sorts by") {
		t.Errorf("an unknown sort: %d %s", code, bad)
	}
}

func TestSessionListFiltersByPrefixAndMachineWithTheSort(t *testing.T) {
	s := newStack(t)
	seedActivity(t, s)
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"prefix=/home/u", []string{"new-quiet", "mid"}},
		{"prefix=/home/u/a/", []string{"mid"}},
		{"prefix=/home/u&sort=activity-asc", []string{"mid", "new-quiet"}},
		{"machine=box", []string{"old-busy"}},
		{"machine=box&from=2001-09-09&to=2001-09-09&sort=activity", []string{"old-busy"}},
		{"prefix=/home&avail=persisted&sort=created-asc", []string{"mid", "new-quiet"}},
	} {
		body := s.page(t, "/?"+c.query)
		if got := listedIDs(body); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q lists %v, want %v", c.query, got, c.want)
		}
	}
	body := s.page(t, "/?machine=nowhere&sort=activity")
	mustContain(t, "no match", body, "No sessions match these filters", `<a href="/?sort=activity">Clear the filters</a>`, `value="nowhere"`)
	if ids := listedIDs(body); len(ids) != 0 {
		t.Errorf("no match lists %v", ids)
	}
	row := rowOf(s.page(t, "/"), "old-busy")
	mustContain(t, "old-busy's row", row, `<span class="tag tag-machine" title="Captured on this machine">box</span>`)
}

func TestCountsCarryTheSummaryColumns(t *testing.T) {
	s := newStack(t)
	seedCorpus(t, s)
	body := s.page(t, "/api/counts?id=s-7f3c")
	mustContain(t, "counts", body, `"turns":1`, `"calls":1`, `"failed":0`, `"span":"12.9 s"`, `"activity":"`+isoTime(1788000013000)+`"`)
}
