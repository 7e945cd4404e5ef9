package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query"
)

func ids(items []dshq.SessionRecord) []string {
	out := make([]string, len(items))
	for i, r := range items {
		out[i] = r.Header.ID
	}
	return out
}

func eqStrings(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestSessionsListAndFilter(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("older", hdr{createdAt: 1, cwd: "/p"})
	p.session("z", hdr{createdAt: 2})
	p.session("a", hdr{createdAt: 2, cwd: "/p", parent: "older"})
	p.session("B", hdr{createdAt: 2, cwd: "/q"})
	gen := p.sync()

	t.Run("sessions are listed createdAt desc then id in byte order", func(t *testing.T) {
		page, err := p.client.ListSessions(ctx, dshq.SessionListRequest{}, query.WithMinGeneration(gen))
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(page.Items); !eqStrings(got, []string{"B", "a", "z", "older"}) {
			t.Fatalf("order = %v", got)
		}
		if page.Generation < gen || page.NextCursor != "" {
			t.Fatalf("generation %d (want ≥ %d), nextCursor %q", page.Generation, gen, page.NextCursor)
		}
		if !page.Items[0].Persisted || page.Items[0].Live {
			t.Fatalf("record %+v: want persisted, not live", page.Items[0])
		}
	})

	t.Run("later pages are answered as of the first page", func(t *testing.T) {
		first, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !eqStrings(ids(first.Items), []string{"B", "a"}) || first.NextCursor == "" {
			t.Fatalf("first page %v, cursor %q", ids(first.Items), first.NextCursor)
		}
		p.session("new", hdr{createdAt: 3})
		p.session("m", hdr{createdAt: 2})
		g := p.sync()
		second, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2, Cursor: first.NextCursor}, query.WithMinGeneration(g))
		if err != nil {
			t.Fatal(err)
		}
		if !eqStrings(ids(second.Items), []string{"z", "older"}) || second.NextCursor != "" {
			t.Fatalf("second page %v, cursor %q; want [z older] and no cursor", ids(second.Items), second.NextCursor)
		}
		fresh, err := p.client.ListSessions(ctx, dshq.SessionListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if !eqStrings(ids(fresh.Items), []string{"new", "B", "a", "m", "z", "older"}) {
			t.Fatalf("fresh list %v", ids(fresh.Items))
		}
	})

	t.Run("a list cursor is refused by sessions.filter", func(t *testing.T) {
		first, _ := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 1})
		_, err := p.client.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: []dshq.Filter{}, Limit: 1, Cursor: first.NextCursor})
		wantErr(t, err, dshq.CodeInvalidCursor, "cursor is invalid: it belongs to another endpoint")
	})

	t.Run("a cursor with another limit is refused", func(t *testing.T) {
		first, _ := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 1})
		_, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2, Cursor: first.NextCursor})
		wantErr(t, err, dshq.CodeInvalidCursor, "cursor is invalid: it belongs to another request")
	})

	str := dshq.Str
	cases := []struct {
		name    string
		filters []dshq.Filter
		want    []string
	}{
		{"a cwd clause with null matches sessions without cwd", []dshq.Filter{{Kind: "cwd", Values: []*string{nil}}}, []string{"new", "m", "z"}},
		{"a cwd clause matches exact strings", []dshq.Filter{{Kind: "cwd", Values: []*string{str("/p")}}}, []string{"a", "older"}},
		{"a parent clause matches the parent", []dshq.Filter{{Kind: "parent", Values: []*string{str("older")}}}, []string{"a"}},
		{"clauses are ANDed and values ORed", []dshq.Filter{{Kind: "cwd", Values: []*string{str("/p"), str("/q")}}, {Kind: "created-at", From: ptr(2.0), To: ptr(2.0)}}, []string{"B", "a"}},
		{"an empty value list matches nothing", []dshq.Filter{{Kind: "id", Values: []*string{}}}, []string{}},
		{"persisted availability matches every session", []dshq.Filter{{Kind: "availability", Values: []*string{str("persisted")}}}, []string{"new", "B", "a", "m", "z", "older"}},
		{"live availability matches only leased sessions", []dshq.Filter{{Kind: "availability", Values: []*string{str("live")}}}, []string{"z"}},
	}
	p.setLive("z", true)
	t.Run("a leased session is one record, live and persisted", func(t *testing.T) {
		page, err := p.client.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: []dshq.Filter{{Kind: "id", Values: []*string{str("z")}}}})
		if err != nil || len(page.Items) != 1 || !page.Items[0].Live || !page.Items[0].Persisted {
			t.Fatalf("%v %+v", err, page)
		}
	})
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			page, err := p.client.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: tt.filters})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(page.Items); !eqStrings(got, tt.want) {
				t.Fatalf("filter = %v; want %v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestSessionsTrace(t *testing.T) {
	p := newPipe(t)
	p.session("root", hdr{createdAt: 1})
	p.session("b", hdr{createdAt: 4, parent: "root"})
	p.session("a", hdr{createdAt: 4, parent: "root"})
	p.session("older", hdr{createdAt: 3, parent: "root"})
	p.session("grandchild", hdr{createdAt: 5, parent: "a"})
	p.session("orphan", hdr{createdAt: 6, parent: "missing-parent"})
	p.session("x", hdr{createdAt: 7, parent: "y"})
	p.session("y", hdr{createdAt: 7, parent: "x"})
	p.session("below-cycle", hdr{createdAt: 8, parent: "x"})
	const depth = 3000
	p.session("chain-0", hdr{createdAt: 1})
	for i := 1; i < depth; i++ {
		p.session(fmt.Sprintf("chain-%d", i), hdr{createdAt: int64(i + 1), parent: fmt.Sprintf("chain-%d", i-1)})
	}
	gen := p.sync()
	ctx := ctxT(t) // after the 3000 publishes, which a loaded machine makes slow

	t.Run("siblings are ordered by createdAt then id and the root is itself", func(t *testing.T) {
		tr, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "root"}, query.WithMinGeneration(gen))
		if err != nil {
			t.Fatal(err)
		}
		var kids []string
		for _, n := range tr.Descendants {
			kids = append(kids, n.Session.Header.ID)
		}
		if !eqStrings(kids, []string{"older", "a", "b"}) {
			t.Fatalf("children = %v", kids)
		}
		if len(tr.Descendants[1].Descendants) != 1 || tr.Descendants[1].Descendants[0].Session.Header.ID != "grandchild" {
			t.Fatalf("a's descendants = %+v", tr.Descendants[1].Descendants)
		}
		if !tr.Complete || tr.Root == nil || tr.Root.Header.ID != "root" || len(tr.Ancestors) != 0 {
			t.Fatalf("trace = %+v", tr)
		}
	})

	t.Run("ancestors are nearest first and the root is the last one", func(t *testing.T) {
		tr, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "grandchild"})
		if err != nil {
			t.Fatal(err)
		}
		if !eqStrings(ids(tr.Ancestors), []string{"a", "root"}) || tr.Root.Header.ID != "root" {
			t.Fatalf("ancestors %v root %v", ids(tr.Ancestors), tr.Root)
		}
	})

	t.Run("a parent outside the corpus leaves the trace incomplete", func(t *testing.T) {
		tr, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "orphan"})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Complete || tr.UnresolvedParentID == nil || *tr.UnresolvedParentID != "missing-parent" || len(tr.Ancestors) != 0 || tr.Root != nil {
			t.Fatalf("trace = %+v", tr)
		}
	})

	t.Run("two sessions parenting each other are an invalid lineage", func(t *testing.T) {
		_, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "x"})
		wantErr(t, err, dshq.CodeInvalidLineage, `session lineage contains a cycle at "x"`)
	})

	t.Run("a cycle above the target is an invalid lineage", func(t *testing.T) {
		_, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "below-cycle"})
		wantErr(t, err, dshq.CodeInvalidLineage, `session lineage contains a cycle at "x"`)
	})

	t.Run("an unknown session is not found", func(t *testing.T) {
		_, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "nope"})
		wantErr(t, err, dshq.CodeSessionNotFound, `session "nope" was not found`)
	})

	t.Run("a 3000-level chain is traced from its leaf and from its root", func(t *testing.T) {
		leaf, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: fmt.Sprintf("chain-%d", depth-1)}, query.WithTimeoutMs(30000))
		if err != nil {
			t.Fatal(err)
		}
		if len(leaf.Ancestors) != depth-1 || leaf.Root.Header.ID != "chain-0" {
			t.Fatalf("%d ancestors, root %v", len(leaf.Ancestors), leaf.Root)
		}
		root, err := p.client.ReadTitles(ctx, dshq.SessionTitlesRequest{SessionIDs: []string{"chain-0"}})
		if err != nil || len(root.Items) != 1 {
			t.Fatal(err)
		}
		tr, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "chain-0"})
		if err != nil {
			t.Fatal(err)
		}
		n, levels := tr.Descendants, 0
		for len(n) == 1 {
			levels++
			n = n[0].Descendants
		}
		if levels != depth-1 {
			t.Fatalf("descendant chain has %d levels; want %d", levels, depth-1)
		}
	})

}

func TestSessionsTraceTooLarge(t *testing.T) {
	p := newPipe(t, func(c *pipeConfig) { c.engineOpts = append(c.engineOpts, engine.WithMaxReplyBytes(64<<10)) })
	p.session("wide", hdr{createdAt: 9})
	for i := range 600 {
		p.session(fmt.Sprintf("wide-child-%04d", i), hdr{createdAt: 10, parent: "wide", cwd: "/a/long/workspace/path/that/takes/room"})
	}
	gen := p.sync()
	_, err := p.client.TraceSession(ctxT(t), dshq.SessionTraceRequest{SessionID: "wide"}, query.WithMinGeneration(gen))
	wantErr(t, err, dshq.CodeReplyTooLarge, "sessions.trace reply would be ")
	if want := "bytes; the reply limit is 65536 bytes"; !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("message %q does not say the limit", err)
	}
}

func TestSessionTitles(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("titled", hdr{createdAt: 1})
	p.events("titled",
		plain("session/title", 5, `{"title":"First","messageSeqs":[],"source":{"kind":"user"}}`),
		plain("session/title", 6, `{"title":"Second","messageSeqs":[],"source":{"kind":"fallback"}}`))
	p.session("untitled", hdr{createdAt: 2})
	gen := p.sync()
	out, err := p.client.ReadTitles(ctx, dshq.SessionTitlesRequest{SessionIDs: []string{"titled", "missing", "untitled", "titled"}}, query.WithMinGeneration(gen))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 3 {
		t.Fatalf("items = %+v; want one per unique id", out.Items)
	}
	t.Run("the latest title wins", func(t *testing.T) {
		it := out.Items[0]
		if it.SessionID != "titled" || it.Status != "fulfilled" || it.Value.Title == nil || it.Value.Title.Title != "Second" || it.Value.Title.EventSeq != 1 || it.Value.Title.UpdatedAt != 6 {
			t.Fatalf("item = %+v", it)
		}
	})
	t.Run("a missing id is rejected alone", func(t *testing.T) {
		it := out.Items[1]
		if it.SessionID != "missing" || it.Status != "rejected" || it.Reason.Code != dshq.CodeSessionNotFound || it.Reason.Message != `session "missing" was not found` {
			t.Fatalf("item = %+v", it)
		}
	})
	t.Run("a session without a title is fulfilled without one", func(t *testing.T) {
		it := out.Items[2]
		if it.Status != "fulfilled" || it.Value.Title != nil || it.Value.Session.ID != "untitled" {
			t.Fatalf("item = %+v", it)
		}
	})
}

func TestConsistency(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	gen := p.session("s", hdr{createdAt: 1})
	t.Run("minGeneration gives read-your-writes", func(t *testing.T) {
		page, err := p.client.ListSessions(ctx, dshq.SessionListRequest{}, query.WithMinGeneration(gen))
		if err != nil {
			t.Fatal(err)
		}
		if page.Generation < gen || len(page.Items) != 1 {
			t.Fatalf("generation %d, items %v", page.Generation, ids(page.Items))
		}
	})
	t.Run("a generation not reached in time is NOT_CAUGHT_UP", func(t *testing.T) {
		_, err := p.client.ListSessions(ctx, dshq.SessionListRequest{}, query.WithMinGeneration(gen+1000), query.WithTimeoutMs(50))
		wantErr(t, err, dshq.CodeNotCaughtUp, "projection is at generation")
	})
}
