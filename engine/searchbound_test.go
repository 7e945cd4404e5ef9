package engine_test

import (
	"fmt"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query"
)

// pageSessions follows a sessions.search from its first page until it has
// no nextCursor or a page fails; it returns the ids in page order and the
// failure.
func pageSessions(t *testing.T, p *pipe, req dshq.SessionSearchRequest, gen uint64, between func(page int)) ([]string, error) {
	t.Helper()
	ctx := ctxT(t)
	var got []string
	for n := 0; ; n++ {
		page, err := p.client.SearchSessions(ctx, req, query.WithMinGeneration(gen))
		if err != nil {
			return got, err
		}
		got = append(got, hitIDs(page.Items)...)
		if page.NextCursor == "" {
			return got, nil
		}
		if n > 1000 {
			t.Fatal("more than 1000 pages")
		}
		req.Cursor = page.NextCursor
		if between != nil {
			between(n)
		}
	}
}

// noRepeat fails when ids holds a repeat, and returns the set.
func noRepeat(t *testing.T, ids []string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("%s repeated in %v", id, ids)
		}
		seen[id] = true
	}
	return seen
}

// A trusted client pages through every match of a search, past the first
// 100 hits, as of the first page.
func TestSearchPagesPastOneHundred(t *testing.T) {
	p := newPipe(t)
	const n = 230
	for i := range n {
		id := fmt.Sprintf("s%03d", i)
		p.session(id, hdr{createdAt: int64(i)})
		p.events(id, userMsg(int64(i), "common needle word"))
	}
	p.session("many", hdr{createdAt: 1000})
	var evs []evSpec
	for i := range n {
		evs = append(evs, userMsg(int64(2000+i), fmt.Sprintf("needle event %d", i)))
	}
	p.events("many", evs...)
	gen := p.sync()

	t.Run("sessions.search returns every matching session once, later appends unseen", func(t *testing.T) {
		got, err := pageSessions(t, p, dshq.SessionSearchRequest{Query: "needle", Limit: 100}, gen, func(page int) {
			if page == 0 {
				p.session("late", hdr{createdAt: 5000})
				p.events("late", userMsg(5000, "needle late"))
				gen = p.sync()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		seen := noRepeat(t, got)
		if len(got) != n+1 || seen["late"] || !seen["s000"] || !seen["many"] {
			t.Fatalf("%d sessions (late seen: %v); want the %d that existed at the first page", len(got), seen["late"], n+1)
		}
	})
	t.Run("events.search returns every matching event once", func(t *testing.T) {
		ctx := ctxT(t)
		req := dshq.EventSearchRequest{SessionID: "many", Query: "needle", Limit: 100}
		seqs := map[int64]bool{}
		for pages := 0; ; pages++ {
			page, err := p.client.SearchEvents(ctx, req, query.WithMinGeneration(gen))
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range page.Items {
				if seqs[h.Seq] {
					t.Fatalf("seq %d repeated", h.Seq)
				}
				seqs[h.Seq] = true
			}
			if page.NextCursor == "" {
				break
			}
			req.Cursor = page.NextCursor
		}
		if len(seqs) != n {
			t.Fatalf("%d events; want %d", len(seqs), n)
		}
	})
}

// Past the engine's bound a cursor fails clearly instead of ending the
// results silently.
func TestSearchPastTheBound(t *testing.T) {
	p := newPipe(t, func(c *pipeConfig) { c.engineOpts = append(c.engineOpts, engine.WithMaxSearchResults(30)) })
	for i := range 45 {
		id := fmt.Sprintf("s%03d", i)
		p.session(id, hdr{createdAt: int64(i)})
		text := "needle"
		if i < 30 {
			text = "needle thirty"
		}
		p.events(id, userMsg(int64(i), text))
	}
	gen := p.sync()
	cases := []struct {
		name    string
		query   string
		limit   int
		want    int
		failing bool
	}{
		{"a search of exactly the bound pages to its end", "thirty", 20, 30, false},
		{"a search over the bound pages the bound, then fails", "needle", 20, 30, true},
		{"a first page as large as the bound still carries the failing cursor", "needle", 30, 30, true},
		{"a search under one page has no cursor", "thirty", 100, 30, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pageSessions(t, p, dshq.SessionSearchRequest{Query: tc.query, Limit: tc.limit}, gen, nil)
			noRepeat(t, got)
			if len(got) != tc.want {
				t.Fatalf("%d sessions before the end; want %d", len(got), tc.want)
			}
			if !tc.failing {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantErr(t, err, dshq.CodeReplyTooLarge, "sessions.search matched more than 30 results, and only the first 30 can be paged")
		})
	}
}
