package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// TestPartitionedListsInEveryOrderLikeOneShard pages sessions.list and
// sessions.filter in every order (created and last activity, both ways),
// with and without summaries, over one projection and over three shards
// whose lists the shards source k-way merges: the same pages byte for
// byte, cursors included; and the activity order is that of the
// summaries' lastActivityAt.
func TestPartitionedListsInEveryOrderLikeOneShard(t *testing.T) {
	st := startPartitioned(t, 3)
	ctx := context.Background()
	last := st.projectors[0].Generation()
	// pages follows endpoint to its end on both and returns one shard's
	// items.
	pages := func(endpoint string, fields map[string]any) []dshq.SessionRecord {
		t.Helper()
		var items []dshq.SessionRecord
		var wc, gc string
		for n := 0; ; n++ {
			body := func(cursor string) []byte {
				f := maps.Clone(fields)
				f["minGeneration"] = last
				if cursor != "" {
					f["cursor"] = cursor
				}
				b, _ := json.Marshal(f)
				return b
			}
			want, werr := st.whole.Raw(ctx, endpoint, body(wc))
			got, gerr := st.parted.Raw(ctx, endpoint, body(gc))
			if werr != nil || gerr != nil {
				t.Fatalf("%s %s: one shard %v, partitioned %v", endpoint, body(gc), werr, gerr)
			}
			if !bytes.Equal(want, got) {
				t.Fatalf("%s %s:\npartitioned %s\none shard   %s", endpoint, body(gc), got, want)
			}
			var p dshq.SessionPage
			if err := json.Unmarshal(want, &p); err != nil {
				t.Fatal(err)
			}
			items = append(items, p.Items...)
			wc, gc = p.NextCursor, replyCursor(got)
			if wc == "" {
				return items
			}
			if n > 1000 {
				t.Fatalf("%s: no end of pages", endpoint)
			}
		}
	}
	ids := func(items []dshq.SessionRecord) []string {
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = it.Header.ID
		}
		return out
	}
	byOrder := map[dshq.ListOrder][]string{}
	for _, o := range dshq.ListOrders {
		for _, limit := range []int{1, 7, 1000} {
			items := pages(wire.EndpointSessionsList, map[string]any{"limit": limit, "order": o, "summary": true})
			if len(items) != len(st.ids) {
				t.Fatalf("%s by %d lists %d sessions, want %d", o, limit, len(items), len(st.ids))
			}
			if limit == 1000 {
				byOrder[o] = ids(items)
			} else if got := ids(items); !slices.Equal(got, byOrder[o]) && byOrder[o] != nil {
				t.Errorf("%s paged by %d differs from one page", o, limit)
			}
			for i, it := range items {
				if it.Summary == nil {
					t.Fatalf("%s: %s has no summary", o, it.Header.ID)
				}
				if i == 0 || !o.ByActivity() {
					continue
				}
				prev, cur := items[i-1].Summary.LastActivityAt, it.Summary.LastActivityAt
				if (o.Ascending() && prev > cur) || (!o.Ascending() && prev < cur) {
					t.Fatalf("%s: %s (%d) after %s (%d)", o, it.Header.ID, cur, items[i-1].Header.ID, prev)
				}
			}
		}
		for _, filters := range []string{
			`[{"kind":"machine","values":[null]}]`,
			`[{"kind":"machine","values":["nowhere"]}]`,
			`[{"kind":"cwd-prefix","values":["/work"]}]`,
			`[{"kind":"parent","values":[null]},{"kind":"created-at","from":1790000000000}]`,
		} {
			pages(wire.EndpointSessionsFilter, map[string]any{"filters": json.RawMessage(filters), "limit": 5, "order": o})
		}
	}
	rev := slices.Clone(byOrder[dshq.OrderActivityAsc])
	slices.Reverse(rev)
	if !slices.Equal(rev, byOrder[dshq.OrderActivityDesc]) {
		t.Errorf("activity-asc is not the reverse of activity-desc")
	}
	if slices.Equal(byOrder[dshq.OrderActivityDesc], byOrder[dshq.OrderCreatedDesc]) {
		t.Errorf("the corpus's activity order is its creation order: the merge by activity is not tested")
	}
	// The default order is the original's: no summary unless asked.
	plain := pages(wire.EndpointSessionsList, map[string]any{"limit": 1000})
	if !slices.Equal(ids(plain), byOrder[dshq.OrderCreatedDesc]) || plain[0].Summary != nil {
		t.Errorf("sessions.list without order or summary changed")
	}
}

// TestActivityOrderPagesNeverRepeatASession pages the activity orders
// while sessions grow between pages: a session whose log grew since the
// first page is left out of the later pages (it moved), so no page
// returns a session twice, and a new first page shows it in its place.
func TestActivityOrderPagesNeverRepeatASession(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	for i, id := range []string{"a", "b", "c", "d"} {
		p.session(id, hdr{createdAt: int64(100 * (i + 1))})
		p.events(id, plain("turn/start", int64(1000*(i+1)), `{"turn":1}`))
	}
	gen := p.sync()
	for _, c := range []struct {
		order       dshq.ListOrder
		grows       string
		at          int64
		first, rest []string
		fresh       []string
	}{
		// In activity-desc a session that grows moves before the cursor;
		// in activity-asc after it, where it would be returned again.
		{dshq.OrderActivityDesc, "a", 9000, []string{"d", "c"}, []string{"b"}, []string{"a", "d", "c", "b"}},
		{dshq.OrderActivityAsc, "b", 9500, []string{"b", "c"}, []string{"d", "a"}, []string{"c", "d", "a", "b"}},
	} {
		t.Run(string(c.order), func(t *testing.T) {
			first, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2, Order: c.order, Summary: true}, query.WithMinGeneration(gen))
			if err != nil {
				t.Fatal(err)
			}
			if !eqStrings(ids(first.Items), c.first) {
				t.Fatalf("first page %v, want %v", ids(first.Items), c.first)
			}
			p.events(c.grows, plain("turn/start", c.at, `{"turn":2}`))
			gen = p.sync()
			var rest []string
			for cur := first.NextCursor; cur != ""; {
				page, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2, Order: c.order, Summary: true, Cursor: cur}, query.WithMinGeneration(gen))
				if err != nil {
					t.Fatal(err)
				}
				rest = append(rest, ids(page.Items)...)
				cur = page.NextCursor
			}
			if !eqStrings(rest, c.rest) {
				t.Errorf("later pages %v, want %v", rest, c.rest)
			}
			fresh, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Order: c.order}, query.WithMinGeneration(gen))
			if err != nil {
				t.Fatal(err)
			}
			if !eqStrings(ids(fresh.Items), c.fresh) {
				t.Errorf("a new first page %v, want %v", ids(fresh.Items), c.fresh)
			}
		})
	}
}
