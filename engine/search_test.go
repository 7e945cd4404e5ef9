package engine_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
)

func hitIDs(items []dshq.SessionSearchHit) []string {
	out := make([]string, len(items))
	for i, h := range items {
		out[i] = h.Header.ID
	}
	return out
}

func assistantText(time int64, reasoning, text string) evSpec {
	return evSpec{typ: dshq.TypeAssistantMessage, time: time, extra: `"surfaceOp":"append"`,
		data: fmt.Sprintf(`{"message":{"id":"m-a%d","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"reasoning","text":%q},{"type":"text","text":%q}]}}`, time, reasoning, text)}
}

func TestSearch(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("reason", hdr{createdAt: 1, cwd: "/w"})
	p.events("reason", assistantText(10, "secretthought", "visible answer"))
	p.session("ai", hdr{createdAt: 2, cwd: "/w"})
	p.events("ai", userMsg(11, "An AI helper"))
	p.session("braid", hdr{createdAt: 3})
	p.events("braid", userMsg(12, "BRAID"))
	p.session("cafe", hdr{createdAt: 4})
	p.events("cafe", userMsg(13, "Le café — au\nlait "+strings.Repeat("long text ", 60)))
	p.session("lit", hdr{createdAt: 5})
	p.events("lit", userMsg(14, `say "needle" exactly`), userMsg(15, "needle OR absent"))
	p.session("shadow", hdr{createdAt: 6})
	p.events("shadow", userMsg(16, "needle original"), userReplace(17, "needle replacement", 0, 0, "[0]"))
	p.session("alpha", hdr{createdAt: 7})
	p.events("alpha", userMsg(18, "alpha middle beta"))
	p.session("empty", hdr{createdAt: 8})
	gen := p.sync()

	search := func(t *testing.T, req dshq.SessionSearchRequest) *dshq.SessionSearchPage {
		t.Helper()
		page, err := p.client.SearchSessions(ctx, req, query.WithMinGeneration(gen))
		if err != nil {
			t.Fatalf("search %+v: %v", req, err)
		}
		return page
	}
	cases := []struct {
		name  string
		query string
		want  []string
	}{
		{"reasoning text is never searchable", "secretthought", []string{}},
		{"visible answer text is searchable", "visible answer", []string{"reason"}},
		{"a token matches a whole word only", "AI", []string{"ai"}},
		{"query operators are literal text", "needle OR absent", []string{"lit"}},
		{"quotes are literal text", `say "needle"`, []string{"lit"}},
		{"a query with no word matches nothing", "*", []string{}},
		{"diacritics are folded", "CAFE", []string{"cafe"}},
		{"a phrase needs adjacent words", "alpha beta", []string{}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if got := hitIDs(search(t, dshq.SessionSearchRequest{Query: tt.query}).Items); !eq(got, tt.want) {
				t.Fatalf("hits %v; want %v", got, tt.want)
			}
		})
	}
	t.Run("a snippet keeps accents and dashes, drops newlines and is bounded", func(t *testing.T) {
		page := search(t, dshq.SessionSearchRequest{Query: "cafe"})
		s := page.Items[0].BestMatch.Snippet
		if !strings.Contains(s, "café — au lait") || strings.Contains(s, "\n") || utf8.RuneCountInString(s) > dshq.SnippetChars {
			t.Fatalf("snippet %q", s)
		}
	})
	t.Run("metadata filters apply before ranking", func(t *testing.T) {
		page := search(t, dshq.SessionSearchRequest{Query: "needle", SessionFilters: []dshq.Filter{{Kind: "id", Values: []*string{dshq.Str("shadow")}}},
			EventFilters: []dshq.Filter{{Kind: "surface", Values: []*string{dshq.Str("shadowed")}}}})
		if len(page.Items) != 1 || page.Items[0].BestMatch.Seq != 0 || page.Items[0].BestMatch.Surface != dshq.SurfaceShadowed {
			t.Fatalf("hits %+v", page.Items)
		}
	})
	t.Run("a cwd clause restricts the sessions", func(t *testing.T) {
		page := search(t, dshq.SessionSearchRequest{Query: "answer", SessionFilters: []dshq.Filter{{Kind: "cwd", Values: []*string{nil}}}})
		if len(page.Items) != 0 {
			t.Fatalf("hits %v", hitIDs(page.Items))
		}
	})
	t.Run("live availability finds only leased sessions", func(t *testing.T) {
		live := []dshq.Filter{{Kind: "availability", Values: []*string{dshq.Str("live")}}}
		if got := hitIDs(search(t, dshq.SessionSearchRequest{Query: "needle", SessionFilters: live}).Items); len(got) != 0 {
			t.Fatalf("hits %v before the lease", got)
		}
		p.setLive("lit", true)
		page := search(t, dshq.SessionSearchRequest{Query: "needle", SessionFilters: live})
		if !eq(hitIDs(page.Items), []string{"lit"}) || !page.Items[0].Live {
			t.Fatalf("hits %+v", page.Items)
		}
	})
	t.Run("events.search returns the header even for an empty page", func(t *testing.T) {
		page, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "empty", Query: "needle"})
		if err != nil || page.Session.ID != "empty" || len(page.Items) != 0 {
			t.Fatalf("%v %+v", err, page)
		}
	})
	t.Run("events.search ranks the events of one session", func(t *testing.T) {
		page, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "shadow", Query: "needle"})
		if err != nil || len(page.Items) != 2 {
			t.Fatalf("%v %+v", err, page)
		}
	})
	t.Run("an unknown events.search target is reported before its cursor", func(t *testing.T) {
		_, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "nope", Query: "needle", Cursor: "garbage"})
		wantErr(t, err, dshq.CodeSessionNotFound, `session "nope" was not found`)
	})
	t.Run("a malformed cursor is INVALID_CURSOR", func(t *testing.T) {
		_, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "shadow", Query: "needle", Cursor: "not-json"})
		wantErr(t, err, dshq.CodeInvalidCursor, "cursor is invalid")
	})
}

func TestSearchPaging(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("pg", hdr{createdAt: 1})
	p.events("pg", userMsg(1, "pager one"), userMsg(2, "pager two"), userMsg(3, "pager three"))
	for i := range 5 {
		id := fmt.Sprintf("zs%d", i)
		p.session(id, hdr{createdAt: int64(10 + i)})
		p.events(id, userMsg(int64(20+i), "zebra crossing"))
	}
	p.session("other", hdr{createdAt: 2})
	gen := p.sync()

	t.Run("three events with limit 1 are three distinct pages", func(t *testing.T) {
		seen := map[int64]bool{}
		cur := ""
		for range 3 {
			page, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "pg", Query: "pager", Limit: 1, Cursor: cur}, query.WithMinGeneration(gen))
			if err != nil || len(page.Items) != 1 {
				t.Fatalf("%v %+v", err, page)
			}
			seen[page.Items[0].Seq] = true
			cur = page.NextCursor
		}
		if len(seen) != 3 || cur != "" {
			t.Fatalf("seen %v, last cursor %q", seen, cur)
		}
	})
	t.Run("a cursor with another query is INVALID_CURSOR", func(t *testing.T) {
		page, _ := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "pg", Query: "pager", Limit: 1})
		_, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "pg", Query: "pager two", Limit: 1, Cursor: page.NextCursor})
		wantErr(t, err, dshq.CodeInvalidCursor, "cursor is invalid: it belongs to another request")
	})
	t.Run("session pages are answered as of the first page", func(t *testing.T) {
		first, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "zebra", Limit: 2})
		if err != nil || len(first.Items) != 2 {
			t.Fatalf("%v %+v", err, first)
		}
		p.session("zs-new", hdr{createdAt: 100})
		p.events("zs-new", userMsg(200, "zebra zebra zebra crossing"))
		p.events("other", userMsg(201, "zebra"))
		g := p.sync()
		got := hitIDs(first.Items)
		for cur := first.NextCursor; cur != ""; {
			page, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "zebra", Limit: 2, Cursor: cur}, query.WithMinGeneration(g))
			if err != nil {
				t.Fatalf("later page: %v", err)
			}
			got = append(got, hitIDs(page.Items)...)
			cur = page.NextCursor
		}
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] || !strings.HasPrefix(id, "zs") || id == "zs-new" {
				t.Fatalf("pages %v: repeat or post-first-page hit %q", got, id)
			}
			seen[id] = true
		}
		if len(got) != 5 {
			t.Fatalf("pages %v; want the 5 sessions of the first page", got)
		}
	})
	t.Run("appending to the target does not make its cursor stale", func(t *testing.T) {
		first, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "pg", Query: "pager", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		g := p.events("pg", userMsg(4, "pager four"))
		p.sync()
		next, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "pg", Query: "pager", Limit: 1, Cursor: first.NextCursor}, query.WithMinGeneration(g))
		if err != nil || len(next.Items) != 1 || next.Items[0].Seq == 3 {
			t.Fatalf("%v %+v", err, next)
		}
	})
	t.Run("a reclassification in a counted session makes the cursor stale", func(t *testing.T) {
		first, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "pg", Query: "pager", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		g := p.events("pg", userReplace(5, "pager summary", 0, 1, "[0,1]"))
		p.sync()
		_, err = p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "pg", Query: "pager", Limit: 1, Cursor: first.NextCursor}, query.WithMinGeneration(g))
		wantErr(t, err, dshq.CodeStaleCursor, "cursor is stale because its relevant corpus changed")
	})
}

func TestSearchBudgets(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("s", hdr{createdAt: 1})
	p.events("s", userMsg(1, "needle"))
	gen := p.sync()
	clauses := func(n int, kind string, vals ...*string) []dshq.Filter {
		out := make([]dshq.Filter, n)
		for i := range out {
			out[i] = dshq.Filter{Kind: kind, Values: vals}
		}
		return out
	}
	values := func(n int, prefix string) []*string {
		out := make([]*string, n)
		for i := range out {
			out[i] = dshq.Str(fmt.Sprintf("%s%d", prefix, i))
		}
		return out
	}
	types := []*string{dshq.Str("user/message")}
	nullable := []*string{nil, dshq.Str("/x")}
	sessionCases := []struct {
		name    string
		req     dshq.SessionSearchRequest
		message string
	}{
		{"14 nullable session clauses are within budget", dshq.SessionSearchRequest{SessionFilters: clauses(14, "cwd", nullable...)}, ""},
		{"7 session and 8 event clauses are over budget", dshq.SessionSearchRequest{SessionFilters: clauses(7, "cwd", nullable...), EventFilters: clauses(8, "type", types...)},
			"search filters compile to 15 predicates; at most 14 are allowed"},
		{"1100 clauses are over budget", dshq.SessionSearchRequest{EventFilters: clauses(1100, "type", types...)},
			"search filters compile to 1100 predicates; at most 14 are allowed"},
		{"16383 + 16383 values are over the binding budget", dshq.SessionSearchRequest{SessionFilters: []dshq.Filter{{Kind: "id", Values: values(16383, "a")}, {Kind: "id", Values: values(16383, "b")}}},
			"search filters bind 32769 values; at most 32766 are allowed"},
	}
	for _, tt := range sessionCases {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Query = "needle"
			_, err := p.client.SearchSessions(ctx, tt.req, query.WithMinGeneration(gen))
			if tt.message == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, dshq.CodeInvalidFilter, tt.message)
		})
	}
	t.Run("13 event clauses are within the events.search budget", func(t *testing.T) {
		if _, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "s", Query: "needle", Filters: clauses(13, "type", types...)}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("14 event clauses are over the events.search budget", func(t *testing.T) {
		_, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "s", Query: "needle", Filters: clauses(14, "type", types...)})
		wantErr(t, err, dshq.CodeInvalidFilter, "search filters compile to 15 predicates; at most 14 are allowed")
	})
}

func TestServeWithALocalShardAnswersWithoutTheShardHop(t *testing.T) {
	for _, local := range []bool{true, false} {
		t.Run(fmt.Sprintf("local shard %v", local), func(t *testing.T) {
			p := newPipe(t, func(c *pipeConfig) { c.localShard = local })
			ctx := ctxT(t)
			p.session("near", hdr{createdAt: 1, cwd: "/w"})
			p.events("near", userMsg(10, "a local needle"))
			gen := p.sync()
			before, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "needle"}, query.WithMinGeneration(gen))
			if err != nil {
				t.Fatal(err)
			}
			if len(before.Items) != 1 || before.Generation < gen {
				t.Fatalf("before: %+v", before)
			}
			// Without the shard on NATS, only an in-process shard answers.
			if err := p.stopShard(); err != nil {
				t.Fatal(err)
			}
			after, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "needle"}, query.WithMinGeneration(gen))
			if !local {
				if dshq.ErrorCode(err) != dshq.CodePersistenceFailed || !strings.Contains(err.Error(), "projection shard 0 is not available") {
					t.Fatalf("remote shard stopped: err = %v, want %s naming the shard", err, dshq.CodePersistenceFailed)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("local answer differs:\n%+v\nwant\n%+v", after, before)
			}
			// Strict decoding still happens once, in the service.
			_, err = p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: " "})
			if dshq.ErrorCode(err) != dshq.CodeInvalidQuery {
				t.Fatalf("blank query: err = %v, want %s", err, dshq.CodeInvalidQuery)
			}
		})
	}
}
