package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/index"
	"github.com/dshq/dshq/query"
)

// plainSearcher hides the KeySearcher methods of a Searcher, so the Engine
// stores whole hits as it does for a Searcher that cannot rank keys.
type plainSearcher struct{ Searcher }

// pageAll follows a search from body until it has no nextCursor (or fails
// past the bound) and returns every page with its nextCursor removed, and
// the failure's code last.
func pageAll(t *testing.T, e *Engine, endpoint, body string) []string {
	t.Helper()
	var pages []string
	for n := 0; ; n++ {
		out, err := run(t, e, endpoint, body)
		if dshq.ErrorCode(err) == dshq.CodeReplyTooLarge {
			return append(pages, string(dshq.ErrorCode(err)))
		}
		if err != nil {
			t.Fatalf("page %d: %v", n, err)
		}
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		cur, _ := m["nextCursor"].(string)
		delete(m, "nextCursor")
		b, _ := json.Marshal(m)
		pages = append(pages, string(b))
		if cur == "" {
			return pages
		}
		var req map[string]any
		_ = json.Unmarshal([]byte(body), &req)
		req["cursor"] = cur
		nb, _ := json.Marshal(req)
		body = string(nb)
	}
}

// Ranking keys and loading each page's docs answers exactly as storing
// whole hits on the first page does.
func TestKeyedSearchMatchesStoredHits(t *testing.T) {
	p := newPipe(t)
	for i := range 40 {
		id := fmt.Sprintf("s%02d", i)
		p.session(id, hdr{createdAt: int64(i)})
		evs := []evSpec{userMsg(int64(10*i), fmt.Sprintf("a needle in haystack %d", i))}
		for j := range i % 4 {
			evs = append(evs, userMsg(int64(10*i+j+1), fmt.Sprintf("needle needle %d.%d and more words around it", i, j)))
		}
		p.events(id, evs...)
	}
	p.sync()
	p.setLive("s39", true)
	p.setLive("s02", true)
	keyed := New(FromProjector(p.proj), WithSearcher(FromIndex(p.proj.Index())), WithMaxSearchResults(30))
	if _, ok := keyed.search.(KeySearcher); !ok {
		t.Fatal("FromIndex is not a KeySearcher")
	}
	plain := New(FromProjector(p.proj), WithSearcher(plainSearcher{FromIndex(p.proj.Index())}), WithMaxSearchResults(30))
	tests := []struct{ name, endpoint, body string }{
		{"sessions.search pages of 7 up to the bound", query.EndpointSessionsSearch, `{"query":"needle","limit":7,"sessionFilters":[]}`},
		{"sessions.search within one page", query.EndpointSessionsSearch, `{"query":"haystack 3","limit":7,"sessionFilters":[]}`},
		{"events.search pages of 1", query.EndpointEventsSearch, `{"sessionId":"s39","query":"needle","limit":1}`},
		{"events.search pages of 2", query.EndpointEventsSearch, `{"sessionId":"s38","query":"needle","limit":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name+" gives the same pages", func(t *testing.T) {
			got, want := pageAll(t, keyed, tt.endpoint, tt.body), pageAll(t, plain, tt.endpoint, tt.body)
			if tt.endpoint == query.EndpointSessionsSearch && len(got) > 2 && !strings.Contains(strings.Join(got, ""), `"live":true`) {
				t.Fatal("no live session in the pages")
			}
			if len(got) != len(want) {
				t.Fatalf("%d pages; want %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("page %d:\n got %s\nwant %s", i, got[i], want[i])
				}
			}
		})
	}
	t.Run("sessions.search past the bound fails as with stored hits", func(t *testing.T) {
		for _, e := range []*Engine{keyed, plain} {
			body := `{"query":"needle","limit":30,"sessionFilters":[]}`
			out, err := run(t, e, query.EndpointSessionsSearch, body)
			if err != nil {
				t.Fatal(err)
			}
			_, err = run(t, e, query.EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":30,"sessionFilters":[],"cursor":%q}`, nextCursor(t, out)))
			if dshq.ErrorCode(err) != dshq.CodeReplyTooLarge {
				t.Fatalf("got %v; want %s", err, dshq.CodeReplyTooLarge)
			}
		}
	})
	t.Run("a cursor of stored keys on an engine that cannot load keys fails clearly", func(t *testing.T) {
		store, key := NewMemoryCursorStore(CursorTTL), query.NewCursorKey()
		k := New(FromProjector(p.proj), WithSearcher(FromIndex(p.proj.Index())), WithCursorStore(store), WithCursorKey(key))
		pl := New(FromProjector(p.proj), WithSearcher(plainSearcher{FromIndex(p.proj.Index())}), WithCursorStore(store), WithCursorKey(key))
		out, err := run(t, k, query.EndpointSessionsSearch, `{"query":"needle","limit":5,"sessionFilters":[]}`)
		if err != nil {
			t.Fatal(err)
		}
		_, err = run(t, pl, query.EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":5,"sessionFilters":[],"cursor":%q}`, nextCursor(t, out)))
		if dshq.ErrorCode(err) != dshq.CodeIndexFailed {
			t.Fatalf("got %v; want %s", err, dshq.CodeIndexFailed)
		}
	})
}

// hidingProjection presents the projection with one session's events
// hidden, as a snapshot behind its index would, its generation shifted by
// lag, and (when own) the snapshot's own index exposed.
type hidingProjection struct {
	inner Projection
	hide  string
	lag   uint64
	own   bool
	// reads counts Event calls.
	reads atomic.Int64
}

type hidingSnapshot struct {
	Snapshot
	p *hidingProjection
}

func (h hidingSnapshot) Generation() uint64 { return h.Snapshot.Generation() - h.p.lag }

func (h hidingSnapshot) Event(id string, seq int64) (dshq.StoredEvent, bool, error) {
	h.p.reads.Add(1)
	if id == h.p.hide {
		return dshq.StoredEvent{}, false, nil
	}
	return h.Snapshot.Event(id, seq)
}

type ownIndexSnapshot struct{ hidingSnapshot }

func (o ownIndexSnapshot) Index() *index.Index {
	return o.Snapshot.(interface{ Index() *index.Index }).Index()
}

func (h *hidingProjection) View(ctx context.Context, min uint64, fn func(Snapshot) error) error {
	return h.inner.View(ctx, min, func(s Snapshot) error {
		hs := hidingSnapshot{s, h}
		if h.own {
			return fn(ownIndexSnapshot{hs})
		}
		return fn(hs)
	})
}

// TestKeysAreCheckedUnlessTheRankingReadTheSnapshotsOwnState: a ranked key
// the snapshot does not hold is dropped whenever the ranking may have read
// another state than the snapshot's (another generation, an index the
// snapshot does not name); only a ranking of exactly the snapshot's own
// index state skips the checks.
func TestKeysAreCheckedUnlessTheRankingReadTheSnapshotsOwnState(t *testing.T) {
	p := newPipe(t)
	for _, id := range []string{"a", "b", "c"} {
		p.session(id, hdr{createdAt: 1})
		p.events(id, userMsg(2, "needle in "+id), userMsg(3, "another needle"))
	}
	p.sync()
	tests := []struct {
		name, hide string
		lag        uint64
		own        bool
		// wantReads is the Event reads of the first page: one per ranked
		// key and one per item when checked, one per item when trusted.
		wantReads int64
	}{
		{"a snapshot that names no index has its keys checked", "b", 0, false, 3 + 1},
		{"a snapshot behind its own index has its keys checked", "b", 1, true, 3 + 1},
		{"a snapshot at its own index's ranked generation is trusted", "", 0, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proj := &hidingProjection{inner: FromProjector(p.proj), hide: tt.hide, lag: tt.lag, own: tt.own}
			e := New(proj, WithSearcher(FromIndexFunc(p.proj.Index)))
			out, err := run(t, e, query.EndpointSessionsSearch, `{"query":"needle","limit":1}`)
			if err != nil {
				t.Fatal(err)
			}
			if n := proj.reads.Load(); n != tt.wantReads {
				t.Fatalf("first page read %d events; want %d", n, tt.wantReads)
			}
			var page dshq.SessionSearchPage
			if err := json.Unmarshal(out, &page); err != nil {
				t.Fatal(err)
			}
			ids := []string{}
			for n := 0; ; n++ {
				for _, h := range page.Items {
					ids = append(ids, h.Header.ID)
				}
				if page.NextCursor == "" {
					break
				}
				out, err = run(t, e, query.EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":1,"cursor":%q}`, page.NextCursor))
				if err != nil {
					t.Fatalf("page %d: %v", n+1, err)
				}
				page = dshq.SessionSearchPage{}
				if err := json.Unmarshal(out, &page); err != nil {
					t.Fatal(err)
				}
			}
			want := []string{"a", "b", "c"}
			if tt.hide != "" {
				want = slices.DeleteFunc(want, func(id string) bool { return id == tt.hide })
			}
			slices.Sort(ids)
			if !slices.Equal(ids, want) {
				t.Fatalf("sessions %v; want %v", ids, want)
			}
			ev, err := run(t, e, query.EndpointEventsSearch, `{"sessionId":"b","query":"needle","limit":1}`)
			if err != nil {
				t.Fatal(err)
			}
			var evs dshq.EventSearchPage
			if err := json.Unmarshal(ev, &evs); err != nil {
				t.Fatal(err)
			}
			if held := tt.hide != "b"; (len(evs.Items) == 1) != held {
				t.Fatalf("events.search of b: %d items; b's events held: %v", len(evs.Items), held)
			}
		})
	}
}

// sessionCountingProjection counts Session reads.
type sessionCountingProjection struct {
	inner Projection
	reads atomic.Int64
}

type sessionCountingSnapshot struct {
	Snapshot
	p *sessionCountingProjection
}

func (s sessionCountingSnapshot) Session(id string) (dshq.SessionInfo, bool, error) {
	s.p.reads.Add(1)
	return s.Snapshot.Session(id)
}

func (c *sessionCountingProjection) View(ctx context.Context, min uint64, fn func(Snapshot) error) error {
	return c.inner.View(ctx, min, func(s Snapshot) error { return fn(sessionCountingSnapshot{s, c}) })
}

// TestALaterPageChecksItsSessionsOnlyAfterTheGenerationMoved: at the first
// page's generation a later page reads only its own items' sessions; once
// the projection moved on it checks every session the results count
// (TestStaleCursors: a reclassified one makes the cursor stale).
func TestALaterPageChecksItsSessionsOnlyAfterTheGenerationMoved(t *testing.T) {
	p := newPipe(t)
	for _, id := range []string{"a", "b", "c", "d"} {
		p.session(id, hdr{createdAt: 1})
		p.events(id, userMsg(2, "needle in "+id))
	}
	p.sync()
	proj := &sessionCountingProjection{inner: FromProjector(p.proj)}
	e := New(proj, WithSearcher(FromIndexFunc(p.proj.Index)))
	body := `{"query":"needle","limit":1}`
	out, err := run(t, e, query.EndpointSessionsSearch, body)
	if err != nil {
		t.Fatal(err)
	}
	later := func() (int64, error) {
		proj.reads.Store(0)
		_, err := run(t, e, query.EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":1,"cursor":%q}`, nextCursor(t, out)))
		return proj.reads.Load(), err
	}
	if n, err := later(); err != nil || n != 1 {
		t.Fatalf("at the first page's generation: %d session reads (%v); want 1, the item's", n, err)
	}
	p.session("other", hdr{createdAt: 2})
	p.sync()
	if n, err := later(); err != nil || n != 4+1 {
		t.Fatalf("after an unrelated append: %d session reads (%v); want the 4 counted sessions' and the item's", n, err)
	}
}
