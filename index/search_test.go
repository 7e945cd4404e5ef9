package index

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/dshq/dshq"
)

// TestFiltersApplyBeforeRanking (docs/search.md#grouping-by-session): all
// surfaces are searchable, and a surface filter picks the shadowed original as
// the session's best match although the current replacement ranks higher
// unfiltered.
func TestFiltersApplyBeforeRanking(t *testing.T) {
	x, _ := openTest(t)
	orig := doc("s", 0, 10, "needle in the original long message text")
	orig.Surface = dshq.SurfaceShadowed
	repl := doc("s", 2, 20, "needle needle")
	logOnly := doc("s", 3, 30, "interrupted needle")
	logOnly.Type, logOnly.Surface = "turn/end", dshq.SurfaceLogOnly
	apply(t, x, 1, orig, repl, logOnly)

	all := searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle"})
	if got := keys(all); len(got) != 3 || got[0] != (hitKey{"s", 2}) {
		t.Fatalf("unfiltered hits = %v, want all three surfaces with seq 2 first", got)
	}
	scores := map[int64]float64{}
	for _, h := range all.Hits {
		scores[h.Seq] = h.Score
	}
	for _, c := range []struct {
		name    string
		surface string
		want    int64
	}{
		{"a shadowed filter picks the shadowed original", "shadowed", 0},
		{"a current filter picks the replacement", "current", 2},
		{"a log-only filter picks the log-only event", "log-only", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := searchSessions(t, x, SessionQuery{Query: "needle", EventFilters: []dshq.Filter{{Kind: dshq.FilterSurface, Values: strs(c.surface)}}})
			if got := keys(p); !reflect.DeepEqual(got, []hitKey{{"s", c.want}}) {
				t.Fatalf("best match = %v, want seq %d", got, c.want)
			}
			if p.Hits[0].Score != scores[c.want] {
				t.Fatalf("filtered score %v, unfiltered %v: a filter changed the score", p.Hits[0].Score, scores[c.want])
			}
		})
	}
}

// TestPhraseRanking (docs/search.md#the-query-is-a-literal-phrase): the exact
// short docs rank before a longer one, their tie broken by session id, and a
// doc with the words apart is not a match.
func TestPhraseRanking(t *testing.T) {
	x, _ := openTest(t)
	apply(t, x, 1,
		doc("a", 0, 1, "alpha beta and then a much longer tail of words"),
		doc("b", 0, 1, "alpha beta"),
		doc("c", 0, 1, "alpha middle beta"),
		doc("d", 0, 1, "alpha beta"),
	)
	p := searchSessions(t, x, SessionQuery{Query: "alpha beta"})
	want := []hitKey{{"b", 0}, {"d", 0}, {"a", 0}}
	if got := keys(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("ranking = %v, want %v", got, want)
	}
}

// TestSnippetOfAHit (docs/search.md#snippets): CAFE finds café; the snippet
// keeps café and the em dash, drops newlines and stays within the limit.
func TestSnippetOfAHit(t *testing.T) {
	dir := t.TempDir() + "/index"
	x, err := Open(dir, Options{SnippetChars: 40})
	must(t, err)
	defer x.Close()
	text := strings.Repeat("filler words here\n", 10) + "the café — open late\nnext line"
	apply(t, x, 1, doc("s", 0, 1, text))
	if p := searchSessions(t, x, SessionQuery{Query: "CAFE", SnippetChars: 12}); len(p.Hits) != 1 || p.Hits[0].Snippet != "…the café —…" {
		t.Fatalf("snippet with a per-query limit of 12: %+v", p.Hits)
	}
	p := searchSessions(t, x, SessionQuery{Query: "CAFE"})
	if len(p.Hits) != 1 {
		t.Fatalf("hits = %d, want 1", len(p.Hits))
	}
	sn := p.Hits[0].Snippet
	if !strings.Contains(sn, "café — open") || strings.Contains(sn, "\n") || utf8.RuneCountInString(sn) > 40 {
		t.Fatalf("snippet %q: want café and — kept, no newline, ≤ 40 code points", sn)
	}
	if want := Snippet(text, strings.Index(text, "café"), 40); sn != want {
		t.Fatalf("snippet %q, want %q (the match starts at café)", sn, want)
	}
}

// TestEqualScoresBreakTies (docs/search.md#ranking): equal docs rank by time
// desc, then session id asc in byte order, then seq desc.
func TestEqualScoresBreakTies(t *testing.T) {
	x, _ := openTest(t)
	var docs []Doc
	for i := 0; i < 12; i++ {
		docs = append(docs, doc(fmt.Sprintf("filler-%02d", i), 0, 50, "one needle among other filler words"))
	}
	docs = append(docs,
		doc("z-persisted", 0, 50, "needle needle"),
		doc("a-live", 0, 50, "needle needle"),
		doc("é", 0, 50, "needle needle"),
		doc("B", 0, 50, "needle needle"),
		doc("late", 0, 60, "needle needle"),
		doc("multi", 1, 50, "needle needle"),
		doc("multi", 7, 50, "needle needle"),
	)
	apply(t, x, 1, docs...)
	p := searchSessions(t, x, SessionQuery{Query: "needle", Limit: 6})
	want := []hitKey{{"late", 0}, {"B", 0}, {"a-live", 0}, {"multi", 7}, {"z-persisted", 0}, {"é", 0}}
	if got := keys(p); !reflect.DeepEqual(got, want) || !p.More {
		t.Fatalf("sessions = %v (more %v), want %v with more", got, p.More, want)
	}
	ev := searchEvents(t, x, EventQuery{SessionID: "multi", Query: "needle"})
	if got := keys(ev); !reflect.DeepEqual(got, []hitKey{{"multi", 7}, {"multi", 1}}) {
		t.Fatalf("events = %v, want seq 7 then 1", got)
	}
}

// TestGroupingKeepsEachSessionsBestDoc: a session with many matching docs
// appears once, with its strongest doc, and does not crowd out others.
func TestGroupingKeepsEachSessionsBestDoc(t *testing.T) {
	x, _ := openTest(t)
	var docs []Doc
	for i := 0; i < 300; i++ {
		docs = append(docs, doc("big", int64(i), int64(1000+i), "needle needle"))
	}
	for i := 0; i < 5; i++ {
		docs = append(docs, doc(fmt.Sprintf("small-%d", i), 0, int64(i), "needle in a longer document with more words"))
	}
	apply(t, x, 1, docs...)
	p := searchSessions(t, x, SessionQuery{Query: "needle", Limit: 10})
	want := []hitKey{{"big", 299}, {"small-4", 0}, {"small-3", 0}, {"small-2", 0}, {"small-1", 0}, {"small-0", 0}}
	if got := keys(p); !reflect.DeepEqual(got, want) || p.More {
		t.Fatalf("sessions = %v (more %v), want %v", got, p.More, want)
	}
}

// TestPagingVisitsEveryResultOnce: on a fixed index, following pages yields
// the unpaged result exactly, in both scopes.
func TestPagingVisitsEveryResultOnce(t *testing.T) {
	x, _ := openTest(t)
	var docs []Doc
	for i := 0; i < 37; i++ {
		sid := fmt.Sprintf("s%02d", i)
		for j := 0; j < 1+i%4; j++ {
			// a few score levels and repeated times make ties common
			text := strings.Repeat("needle ", 1+(i+j)%3) + strings.Repeat("pad ", j%2)
			docs = append(docs, doc(sid, int64(j), int64(i%5), text))
		}
		docs = append(docs, doc("one", int64(i), int64(i%3), strings.Repeat("needle ", 1+i%2)))
	}
	apply(t, x, 1, docs...)

	all := searchSessions(t, x, SessionQuery{Query: "needle", Limit: dshq.MaxSearchLimit})
	if len(all.Hits) != 38 || all.More {
		t.Fatalf("unpaged: %d sessions (more %v), want 38", len(all.Hits), all.More)
	}
	for _, limit := range []int{1, 7, 38} {
		t.Run(fmt.Sprintf("sessions with limit %d", limit), func(t *testing.T) {
			var got []hitKey
			for off := 0; ; off += limit {
				p := searchSessions(t, x, SessionQuery{Query: "needle", Offset: off, Limit: limit})
				got = append(got, keys(p)...)
				if !p.More {
					break
				}
			}
			if !reflect.DeepEqual(got, keys(all)) {
				t.Fatalf("paged %v\nwant  %v", got, keys(all))
			}
		})
	}
	allEv := searchEvents(t, x, EventQuery{SessionID: "one", Query: "needle", Limit: dshq.MaxSearchLimit})
	if len(allEv.Hits) != 37 {
		t.Fatalf("unpaged events: %d, want 37", len(allEv.Hits))
	}
	t.Run("events with limit 5", func(t *testing.T) {
		var got []hitKey
		for off := 0; ; off += 5 {
			p := searchEvents(t, x, EventQuery{SessionID: "one", Query: "needle", Offset: off, Limit: 5})
			got = append(got, keys(p)...)
			if !p.More {
				break
			}
		}
		if !reflect.DeepEqual(got, keys(allEv)) {
			t.Fatalf("paged %v\nwant  %v", got, keys(allEv))
		}
	})
	if p := searchSessions(t, x, SessionQuery{Query: "needle", Offset: 1000}); len(p.Hits) != 0 || p.More {
		t.Fatalf("a page past the end: %v (more %v)", keys(p), p.More)
	}
}

// TestAsOfHidesLaterAppends: a later page of a paged search, asked as of the
// first page's generation, does not see docs indexed after it, even when a
// surface change rewrites an older doc.
func TestAsOfHidesLaterAppends(t *testing.T) {
	x, _ := openTest(t)
	apply(t, x, 10, doc("s", 0, 1, "needle one"), doc("t", 0, 1, "needle two"))
	first := searchSessions(t, x, SessionQuery{Query: "needle", Limit: 1})
	if first.Generation != 10 {
		t.Fatalf("generation = %d, want 10", first.Generation)
	}
	apply(t, x, 11, doc("u", 0, 1, "needle needle three"), doc("s", 1, 1, "needle needle"))
	var b Batch
	shadowed := doc("t", 0, 1, "needle two")
	shadowed.Surface, shadowed.Generation = dshq.SurfaceShadowed, 10
	b.Upsert(shadowed)
	must(t, x.Apply(context.Background(), &b, 12))

	asOf := searchSessions(t, x, SessionQuery{Query: "needle", Limit: 10, AsOf: first.Generation})
	if got := keys(asOf); len(got) != 2 || got[0].seq != 0 || got[1].seq != 0 {
		t.Fatalf("as of generation 10: %v, want s#0 and t#0 only", got)
	}
	now := searchSessions(t, x, SessionQuery{Query: "needle", Limit: 10})
	if len(now.Hits) != 3 || now.Generation != 12 {
		t.Fatalf("current: %v at %d, want 3 sessions at 12", keys(now), now.Generation)
	}
	ev := searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle", AsOf: 10})
	if got := keys(ev); !reflect.DeepEqual(got, []hitKey{{"s", 0}}) {
		t.Fatalf("events as of 10: %v, want s#0", got)
	}
}

func TestSessionFilters(t *testing.T) {
	x, _ := openTest(t)
	mk := func(sid string, cwd, parent *string, created int64) Doc {
		d := doc(sid, 0, 1, "needle")
		d.Cwd, d.Parent, d.CreatedAt = cwd, parent, created
		return d
	}
	inTenant := func(d Doc, tenant string) Doc { d.Tenant = tenant; return d }
	from := func(d Doc, harness string) Doc { d.Harness = &harness; return d }
	apply(t, x, 1,
		mk("a", dshq.Str("/w"), nil, 100),
		from(inTenant(mk("b", dshq.Str("/w"), dshq.Str("a"), 200), "teamA"), dshq.HarnessClaudeCode),
		from(inTenant(mk("c", nil, dshq.Str("a"), 300), "teamB"), dshq.HarnessCodex),
		mk("d", dshq.Str(""), dshq.Str("b"), 400),
	)
	null := []*string{nil}
	for _, c := range []struct {
		name    string
		filters []dshq.Filter
		live    []string
		want    string
	}{
		{"no filter keeps every session", nil, nil, "abcd"},
		{"an id filter keeps the listed ids", []dshq.Filter{{Kind: dshq.FilterID, Values: strs("b", "d", "zz")}}, nil, "bd"},
		{"an empty list matches nothing", []dshq.Filter{{Kind: dshq.FilterID, Values: []*string{}}}, nil, ""},
		{"a cwd filter is exact", []dshq.Filter{{Kind: dshq.FilterCwd, Values: strs("/w")}}, nil, "ab"},
		{"a null cwd matches sessions without one", []dshq.Filter{{Kind: dshq.FilterCwd, Values: null}}, nil, "c"},
		{"an empty cwd is not a missing cwd", []dshq.Filter{{Kind: dshq.FilterCwd, Values: strs("")}}, nil, "d"},
		{"a tenant filter is exact", []dshq.Filter{{Kind: dshq.FilterTenant, Values: strs("teamA")}}, nil, "b"},
		{"a null tenant matches the sessions of no tenant", []dshq.Filter{{Kind: dshq.FilterTenant, Values: null}}, nil, "ad"},
		{"a tenant filter mixes values and null", []dshq.Filter{{Kind: dshq.FilterTenant, Values: append(strs("teamB"), nil)}}, nil, "acd"},
		{"a tenant and a cwd are ANDed", []dshq.Filter{{Kind: dshq.FilterTenant, Values: null}, {Kind: dshq.FilterCwd, Values: strs("/w")}}, nil, "a"},
		{"a harness filter is exact", []dshq.Filter{{Kind: dshq.FilterHarness, Values: strs(dshq.HarnessCodex)}}, nil, "c"},
		{"a null harness matches the native sessions", []dshq.Filter{{Kind: dshq.FilterHarness, Values: null}}, nil, "ad"},
		{"a harness filter mixes values and null", []dshq.Filter{{Kind: dshq.FilterHarness, Values: append(strs(dshq.HarnessClaudeCode), nil)}}, nil, "abd"},
		{"a parent filter mixes values and null", []dshq.Filter{{Kind: dshq.FilterParent, Values: append(strs("b"), nil)}}, nil, "ad"},
		{"a created-at range is inclusive", []dshq.Filter{{Kind: dshq.FilterCreatedAt, From: f64(200), To: f64(300)}}, nil, "bc"},
		{"a fractional bound compares as a number", []dshq.Filter{{Kind: dshq.FilterCreatedAt, From: f64(199.5)}}, nil, "bcd"},
		{"clauses are ANDed", []dshq.Filter{{Kind: dshq.FilterCwd, Values: strs("/w")}, {Kind: dshq.FilterParent, Values: strs("a")}}, nil, "b"},
		{"two clauses of one kind are ANDed", []dshq.Filter{{Kind: dshq.FilterID, Values: strs("a", "b")}, {Kind: dshq.FilterID, Values: strs("b", "c")}}, nil, "b"},
		{"availability live keeps the live set", []dshq.Filter{{Kind: dshq.FilterAvailability, Values: strs("live")}}, []string{"c", "x"}, "c"},
		{"availability live with nothing live matches nothing", []dshq.Filter{{Kind: dshq.FilterAvailability, Values: strs("live")}}, nil, ""},
		{"every indexed session is persisted", []dshq.Filter{{Kind: dshq.FilterAvailability, Values: strs("persisted")}}, nil, "abcd"},
		{"an empty availability matches nothing", []dshq.Filter{{Kind: dshq.FilterAvailability, Values: []*string{}}}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := searchSessions(t, x, SessionQuery{Query: "needle", SessionFilters: c.filters, LiveSessionIDs: c.live})
			var got []string
			for _, h := range p.Hits {
				got = append(got, h.SessionID)
			}
			if strings.Join(got, "") != c.want {
				// equal docs at equal times rank by id, so the order is alphabetical
				t.Fatalf("sessions = %q, want %q", got, c.want)
			}
		})
	}
	// The hit carries the denormalized header fields back.
	p := searchSessions(t, x, SessionQuery{Query: "needle", SessionFilters: []dshq.Filter{{Kind: dshq.FilterID, Values: strs("b")}}})
	h := p.Hits[0]
	if h.Cwd == nil || *h.Cwd != "/w" || h.Parent == nil || *h.Parent != "a" || h.CreatedAt != 200 || h.Tenant != "teamA" {
		t.Fatalf("hit header fields = %v %v %d %q", h.Cwd, h.Parent, h.CreatedAt, h.Tenant)
	}
}

func TestEventFilters(t *testing.T) {
	x, _ := openTest(t)
	d := func(seq, time int64, typ string, s dshq.Surface) Doc {
		v := doc("s", seq, time, "needle")
		v.Type, v.Surface = typ, s
		return v
	}
	apply(t, x, 1,
		d(0, 100, dshq.TypeUserMessage, dshq.SurfaceShadowed),
		d(1, 200, dshq.TypeAssistantMessage, dshq.SurfaceCurrent),
		d(2, 300, "tool/call", dshq.SurfaceLogOnly),
		d(3, 400, dshq.TypeToolResult, dshq.SurfaceCurrent),
		doc("other", 5, 250, "needle"),
	)
	for _, c := range []struct {
		name    string
		filters []dshq.Filter
		want    []int64
	}{
		{"no filter keeps the session's docs, newest first", nil, []int64{3, 2, 1, 0}},
		{"a seq range is inclusive", []dshq.Filter{{Kind: dshq.FilterSeq, From: f64(1), To: f64(2)}}, []int64{2, 1}},
		{"an open-ended time range", []dshq.Filter{{Kind: dshq.FilterTime, To: f64(200)}}, []int64{1, 0}},
		{"fractional bounds round inward", []dshq.Filter{{Kind: dshq.FilterTime, From: f64(199.5), To: f64(300.5)}}, []int64{2, 1}},
		{"a range between two integers matches nothing", []dshq.Filter{{Kind: dshq.FilterSeq, From: f64(1.2), To: f64(1.8)}}, nil},
		{"huge bounds include everything", []dshq.Filter{{Kind: dshq.FilterTime, From: f64(-1e300), To: f64(1e300)}}, []int64{3, 2, 1, 0}},
		{"a huge lower bound excludes everything", []dshq.Filter{{Kind: dshq.FilterSeq, From: f64(1e300)}}, nil},
		{"two ranges both apply", []dshq.Filter{{Kind: dshq.FilterSeq, From: f64(1)}, {Kind: dshq.FilterTime, To: f64(300)}}, []int64{2, 1}},
		{"a type filter", []dshq.Filter{{Kind: dshq.FilterType, Values: strs("tool/call", dshq.TypeUserMessage)}}, []int64{2, 0}},
		{"a surface filter", []dshq.Filter{{Kind: dshq.FilterSurface, Values: strs("current")}}, []int64{3, 1}},
		{"an empty type list matches nothing", []dshq.Filter{{Kind: dshq.FilterType, Values: []*string{}}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle", Filters: c.filters})
			var got []int64
			for _, h := range p.Hits {
				if h.SessionID != "s" {
					t.Fatalf("hit from session %q", h.SessionID)
				}
				got = append(got, h.Seq)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("seqs = %v, want %v", got, c.want)
			}
		})
	}
}

func TestInvalidRequestsAreTypedErrors(t *testing.T) {
	x, _ := openTest(t)
	apply(t, x, 1, doc("s", 0, 1, "needle"))
	nullable := func(n int) dshq.Filter {
		return dshq.Filter{Kind: dshq.FilterCwd, Values: append(strs("/w"), nil)}
	}
	repeat := func(f dshq.Filter, n int) []dshq.Filter {
		out := make([]dshq.Filter, n)
		for i := range out {
			out[i] = f
		}
		return out
	}
	values := func(n int) []*string {
		out := make([]*string, n)
		for i := range out {
			out[i] = dshq.Str(fmt.Sprint(i))
		}
		return out
	}
	typeClause := dshq.Filter{Kind: dshq.FilterType, Values: strs("x")}
	for _, c := range []struct {
		name string
		q    SessionQuery
		ev   *EventQuery
		want dshq.Code
	}{
		{"a blank query", SessionQuery{Query: " \n\t "}, nil, dshq.CodeInvalidQuery},
		{"an unknown filter kind", SessionQuery{Query: "x", SessionFilters: []dshq.Filter{{Kind: "color"}}}, nil, dshq.CodeInvalidFilter},
		{"a text filter", SessionQuery{Query: "x", EventFilters: []dshq.Filter{{Kind: dshq.FilterText, Text: "x"}}}, nil, dshq.CodeInvalidFilter},
		{"an event kind among session filters", SessionQuery{Query: "x", SessionFilters: []dshq.Filter{typeClause}}, nil, dshq.CodeInvalidFilter},
		{"a session kind among event filters", SessionQuery{Query: "x", EventFilters: []dshq.Filter{{Kind: dshq.FilterID, Values: strs("s")}}}, nil, dshq.CodeInvalidFilter},
		{"a null id", SessionQuery{Query: "x", SessionFilters: []dshq.Filter{{Kind: dshq.FilterID, Values: []*string{nil}}}}, nil, dshq.CodeInvalidFilter},
		{"an unknown surface", SessionQuery{Query: "x", EventFilters: []dshq.Filter{{Kind: dshq.FilterSurface, Values: strs("future")}}}, nil, dshq.CodeInvalidFilter},
		{"an unknown availability", SessionQuery{Query: "x", SessionFilters: []dshq.Filter{{Kind: dshq.FilterAvailability, Values: strs("remote")}}}, nil, dshq.CodeInvalidFilter},
		{"a reversed range", SessionQuery{Query: "x", EventFilters: []dshq.Filter{{Kind: dshq.FilterTime, From: f64(2), To: f64(1)}}}, nil, dshq.CodeInvalidFilter},
		{"an infinite bound", SessionQuery{Query: "x", EventFilters: []dshq.Filter{{Kind: dshq.FilterSeq, From: f64(math.Inf(1))}}}, nil, dshq.CodeInvalidFilter},
		{"fourteen nullable session clauses are fine", SessionQuery{Query: "x", SessionFilters: repeat(nullable(0), 14)}, nil, ""},
		{"seven session and eight event clauses are too many", SessionQuery{Query: "x", SessionFilters: repeat(nullable(0), 7), EventFilters: repeat(typeClause, 8)}, nil, dshq.CodeInvalidFilter},
		{"1100 clauses are too many", SessionQuery{Query: "x", SessionFilters: repeat(nullable(0), 1100)}, nil, dshq.CodeInvalidFilter},
		{"16383 plus 16383 values are too many", SessionQuery{Query: "x", SessionFilters: []dshq.Filter{{Kind: dshq.FilterID, Values: values(16383)}, {Kind: dshq.FilterCwd, Values: values(16383)}}}, nil, dshq.CodeInvalidFilter},
		{"thirteen event clauses are fine in event scope", SessionQuery{}, &EventQuery{SessionID: "s", Query: "x", Filters: repeat(typeClause, 13)}, ""},
		{"fourteen event clauses are too many in event scope", SessionQuery{}, &EventQuery{SessionID: "s", Query: "x", Filters: repeat(typeClause, 14)}, dshq.CodeInvalidFilter},
		{"a limit over the maximum", SessionQuery{Query: "x", Limit: MaxLimit + 1}, nil, dshq.CodeInvalidLimit},
		{"an offset beyond any page", SessionQuery{Query: "x", Offset: math.MaxInt32 + 1}, nil, dshq.CodeInvalidCursor},
		{"a negative snippet length", SessionQuery{Query: "x", SnippetChars: -1}, nil, dshq.CodeInvalidConfig},
		{"a negative limit", SessionQuery{}, &EventQuery{SessionID: "s", Query: "x", Limit: -1}, dshq.CodeInvalidLimit},
		{"a negative offset", SessionQuery{Query: "x", Offset: -1}, nil, dshq.CodeInvalidCursor},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.ev != nil {
				_, err = x.SearchEvents(context.Background(), *c.ev)
			} else {
				_, err = x.SearchSessions(context.Background(), c.q)
			}
			if code := dshq.ErrorCode(err); code != c.want || (c.want == "") != (err == nil) {
				t.Fatalf("error %v (code %q), want code %q", err, code, c.want)
			}
		})
	}
}

// TestHostileQueries: queries are data. None of these may error (except as
// typed), panic, or match what it does not literally contain.
func TestHostileQueries(t *testing.T) {
	x, _ := openTest(t)
	long := strings.Repeat("lorem ipsum dolor sit amet ", 400) // 10 800 chars
	apply(t, x, 1,
		doc("s", 0, 1, "needle and a .*+?[](){}|^$\\ regex"),
		doc("s", 1, 2, long),
		doc("s", 2, 3, "中文字块"+strings.Repeat("中", 3000)),
	)
	for _, c := range []struct {
		name  string
		query string
		want  []int64
	}{
		{"a 10k-character query matching nothing", strings.Repeat("x", 10000), nil},
		{"a 10k-character phrase found whole", long, []int64{1}},
		{"a huge CJK phrase", strings.Repeat("中", 3000), []int64{2}},
		{"regex metacharacters are separators", ".*+?[](){}|^$\\", nil},
		{"regex metacharacters between words", "needle .* and", []int64{0}},
		{"query-string syntax is text", "+needle -absent field:value ~2 ^3", nil},
		{"NUL inside a query", "needle\x00and", []int64{0}},
		{"marker noncharacters inside a query", "needle\uFDD0and", []int64{0}},
		{"invalid UTF-8 inside a query", "needle\xffand", []int64{0}},
		{"a lone combining mark", "\u0301", nil},
		{"a star", "*", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := searchEvents(t, x, EventQuery{SessionID: "s", Query: c.query})
			var got []int64
			for _, h := range p.Hits {
				got = append(got, h.Seq)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("seqs = %v, want %v", got, c.want)
			}
			if _, err := x.SearchSessions(context.Background(), SessionQuery{Query: c.query}); err != nil {
				t.Fatalf("session scope: %v", err)
			}
		})
	}
}

func TestACanceledSearchIsAborted(t *testing.T) {
	x, _ := openTest(t)
	apply(t, x, 1, doc("s", 0, 1, "needle"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := x.SearchSessions(ctx, SessionQuery{Query: "needle"})
	if code := dshq.ErrorCode(err); code != dshq.CodeAborted {
		t.Fatalf("error %v (code %q), want %q", err, code, dshq.CodeAborted)
	}
	var b Batch
	b.Upsert(doc("s", 1, 1, "more"))
	if code := dshq.ErrorCode(x.Apply(ctx, &b, 2)); code != dshq.CodeAborted {
		t.Fatalf("apply code %q, want %q", code, dshq.CodeAborted)
	}
	if x.Generation() != 1 {
		t.Fatalf("a canceled apply moved the generation to %d", x.Generation())
	}
}

// TestSearchesRunBesideApply exercises concurrent readers and the writer
// under the race detector: every search sees a consistent generation.
func TestSearchesRunBesideApply(t *testing.T) {
	x, _ := openTest(t)
	apply(t, x, 1, doc("s", 0, 1, "needle"))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				p, err := x.SearchSessions(ctx, SessionQuery{Query: "needle"})
				if err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
				if err == nil && uint64(len(p.Hits)) < min(p.Generation, 20) {
					errs <- fmt.Errorf("generation %d with only %d sessions", p.Generation, len(p.Hits))
					return
				}
			}
		}()
	}
	for g := uint64(2); g <= 10; g++ {
		apply(t, x, g, doc(fmt.Sprintf("s%02d", g), 0, 1, "needle"))
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestFastRankingMatchesTheFullSort: session search ranks by score alone
// first and tie-breaks in Go, falling back to Bleve's full sort when a round
// is all ties. On a corpus with many exact ties around round boundaries it
// must give exactly the grouping of Bleve's full sort.
func TestFastRankingMatchesTheFullSort(t *testing.T) {
	x, _ := openTest(t)
	r := rand.New(rand.NewPCG(7, 7))
	var docs []Doc
	for i := 0; i < 1500; i++ {
		sid := fmt.Sprintf("s%03d", r.IntN(400))
		text := strings.Repeat("needle ", 1+r.IntN(2)) + strings.Repeat("pad ", r.IntN(3))
		if i%3 == 0 {
			text = "needle" // a large group of exact ties
		}
		docs = append(docs, doc(sid, int64(i), int64(r.IntN(4)), text))
	}
	apply(t, x, 1, docs...)

	// The reference: every match in Bleve's full sort, grouped in Go.
	_, tq := x.phrase("needle")
	req := bleve.NewSearchRequestOptions(tq, len(docs), 0, false)
	req.SortByCustom(rankOrder())
	res, err := x.idx.Search(req)
	must(t, err)
	var want []hitKey
	seen := map[string]bool{}
	for _, h := range res.Hits {
		_, sid, seq, err := ParseDocID(h.ID)
		must(t, err)
		if !seen[sid] {
			seen[sid] = true
			want = append(want, hitKey{sid, seq})
		}
	}
	for _, c := range []struct{ offset, limit int }{{0, 20}, {0, 100}, {37, 13}, {0, MaxLimit}, {390, 50}} {
		t.Run(fmt.Sprintf("offset %d limit %d", c.offset, c.limit), func(t *testing.T) {
			p := searchSessions(t, x, SessionQuery{Query: "needle", Offset: c.offset, Limit: c.limit})
			end := min(len(want), c.offset+c.limit)
			if got := keys(p); !reflect.DeepEqual(got, want[c.offset:end]) {
				t.Fatalf("got  %v\nwant %v", got, want[c.offset:end])
			}
			if p.More != (end < len(want)) {
				t.Fatalf("more = %v with %d of %d", p.More, end, len(want))
			}
		})
	}
}

// TestRankKeyOrdersLikeTheTieBreak: the one keyword Bleve sorts ties by
// orders exactly as the tie-break rule says (time desc, session id asc by
// bytes, seq desc), for any session id bytes and negative times.
func TestRankKeyOrdersLikeTheTieBreak(t *testing.T) {
	type tie struct {
		time int64
		sid  string
		seq  int64
	}
	less := func(a, b tie) bool {
		switch {
		case a.time != b.time:
			return a.time > b.time
		case a.sid != b.sid:
			return a.sid < b.sid
		}
		return a.seq > b.seq
	}
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"\x00", "\x01", "\x02", "a", "b", "é", "\xff", ""}
	gen := func() tie {
		var sid strings.Builder
		for range r.IntN(4) {
			sid.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		times := []int64{-1 << 53, -5, 0, 7, 1 << 53}
		return tie{sid: sid.String(), seq: int64(r.IntN(3)) * 1e9, time: times[r.IntN(len(times))]}
	}
	for range 20000 {
		a, b := gen(), gen()
		ka, kb := rankKey(a.time, a.sid, a.seq, 0, 0), rankKey(b.time, b.sid, b.seq, 0, 0)
		if (ka < kb) != less(a, b) || (ka == kb) != (a == b) {
			t.Fatalf("rank keys disagree for %+v and %+v: %q vs %q", a, b, ka, kb)
		}
	}
}

// TestScoringIsBM25 checks the scores against the BM25 formula as Bleve
// v2.6.3 implements it (k1 1.2, b 0.75, tf = √freq) after a reopen, so the
// scoring model is stored with the index mapping. Bleve's average field
// length is its field cardinality (distinct terms, here needle, pad, other)
// over the doc count, rounded up, not the mean token count.
func TestScoringIsBM25(t *testing.T) {
	x, dir := openTest(t)
	apply(t, x, 1, doc("a", 0, 1, "needle"), doc("b", 0, 1, "needle pad pad"), doc("c", 0, 1, "other"))
	must(t, x.Close())
	y, err := Open(dir, Options{})
	must(t, err)
	defer y.Close()
	p := searchSessions(t, y, SessionQuery{Query: "needle"})
	const n, df, avgdl = 3.0, 2.0, 1.0 // ceil(3 distinct terms / 3 docs)
	idf := math.Log(1 + (n-df+0.5)/(df+0.5))
	bm25 := func(freq, dl float64) float64 {
		tf := math.Sqrt(freq)
		return idf * tf * 1.2 / (tf + 1.2*(1-0.75+0.75*dl/avgdl))
	}
	want := map[string]float64{"a": bm25(1, 1), "b": bm25(1, 3)}
	if len(p.Hits) != 2 {
		t.Fatalf("hits = %v", keys(p))
	}
	for _, h := range p.Hits {
		if math.Abs(h.Score-want[h.SessionID]) > 1e-3*want[h.SessionID] {
			t.Errorf("session %s score %v, BM25 gives %v", h.SessionID, h.Score, want[h.SessionID])
		}
	}
}

// FuzzSearchAgreesWithMatcher: for any query, the index returns exactly the
// docs in which the pure phrase matcher finds the query's terms, each with a
// snippet within the limit.
func FuzzSearchAgreesWithMatcher(f *testing.F) {
	texts := []string{
		"An AI helper — café au lait",
		"alpha beta gamma alpha beta",
		"alpha middle beta",
		"我们在中文环境中测试 alpha",
		"我用Go写代码，然后测试代码",
		"コーヒーを飲む ｺｰﾋｰ",
		"say \"needle\" exactly (AI)+ snake_case",
		"needle needle needle",
		"Straße İstanbul naïve CAFÉ",
		"x",
	}
	for _, s := range []string{"alpha beta", "中文", "代码", "needle", "*", "cafe", "ｺｰﾋｰ", "beta gamma alpha", "测试 alpha", "x"} {
		f.Add(s)
	}
	x, err := Open(filepath.Join(f.TempDir(), "index"), Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = x.Close() })
	var b Batch
	for i, s := range texts {
		b.Upsert(doc("s", int64(i), int64(i), s))
	}
	if err := x.Apply(context.Background(), &b, 1); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		p, err := x.SearchEvents(context.Background(), EventQuery{SessionID: "s", Query: q, Limit: MaxLimit, SnippetChars: 20})
		norm, nerr := NormalizeQuery(q)
		if nerr != nil {
			if dshq.ErrorCode(err) != dshq.CodeInvalidQuery {
				t.Fatalf("blank query %q: error %v", q, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("query %q: %v", q, err)
		}
		terms := x.an.phraseTerms(norm)
		got := map[int64]bool{}
		for _, h := range p.Hits {
			got[h.Seq] = true
			if utf8.RuneCountInString(h.Snippet) > 20 {
				t.Fatalf("query %q: snippet %q over 20 code points", q, h.Snippet)
			}
		}
		for i, s := range texts {
			want := len(terms) > 0 && x.an.matchStart(Sanitize(s), terms) >= 0
			if got[int64(i)] != want {
				t.Fatalf("query %q (terms %q), doc %q: hit %v, matcher %v", q, terms, s, got[int64(i)], want)
			}
		}
	})
}

// TestAsOfUsesADocsOwnCreationGeneration: a doc re-fed in a later batch with
// the generation it was first indexed at stays visible to searches as of
// that generation; without one it takes the batch's.
func TestAsOfUsesADocsOwnCreationGeneration(t *testing.T) {
	x, _ := openTest(t)
	refed := doc("s", 0, 1, "needle refed")
	refed.Generation = 5
	apply(t, x, 20, refed, doc("s", 1, 1, "needle new"))
	ev := searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle", AsOf: 5})
	if got := keys(ev); !reflect.DeepEqual(got, []hitKey{{"s", 0}}) {
		t.Fatalf("events as of 5: %v, want s#0 only", got)
	}
	if got := keys(searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle", AsOf: 20})); len(got) != 2 {
		t.Fatalf("events as of 20: %v, want both", got)
	}
	var b Batch
	tooBig := doc("s", 2, 1, "needle")
	tooBig.Generation = maxExactNumber + 1
	b.Upsert(tooBig)
	if err := x.Apply(context.Background(), &b, 21); !errors.Is(err, ErrInvalidDoc) {
		t.Fatalf("a generation beyond 2^53: err = %v, want ErrInvalidDoc", err)
	}
}
