package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
)

// pageAll follows a search from body until it has no nextCursor (or fails
// past the bound) and returns every page with its nextCursor removed, and
// the failure's code last.
func pageAll(t *testing.T, e *engine.Engine, endpoint, body string) []string {
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

// A search pages up to the engine's max results, as of its first page,
// and a cursor past them fails with SESSION_QUERY_REPLY_TOO_LARGE; a page
// of sessions.search shows each session live as the first page saw it.
func TestSearchPagesUpToTheBound(t *testing.T) {
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
	e := engine.New(shardhost.Local(p.proj), engine.WithMaxSearchResults(30))
	t.Run("sessions.search pages of 7 up to the bound", func(t *testing.T) {
		pages := pageAll(t, e, wire.EndpointSessionsSearch, `{"query":"needle","limit":7,"sessionFilters":[]}`)
		if len(pages) != 6 || pages[5] != string(dshq.CodeReplyTooLarge) {
			t.Fatalf("%d pages, last %.80s; want 5 pages of the 30 results and %s", len(pages), pages[len(pages)-1], dshq.CodeReplyTooLarge)
		}
		if !strings.Contains(strings.Join(pages, ""), `"live":true`) {
			t.Fatal("no live session in the pages")
		}
	})
	t.Run("events.search pages of 1 to the end", func(t *testing.T) {
		pages := pageAll(t, e, wire.EndpointEventsSearch, `{"sessionId":"s39","query":"needle","limit":1}`)
		if len(pages) != 4 {
			t.Fatalf("%d pages; want 4 (s39's four needles)", len(pages))
		}
	})
	t.Run("sessions.search past the bound fails", func(t *testing.T) {
		body := `{"query":"needle","limit":30,"sessionFilters":[]}`
		out, err := run(t, e, wire.EndpointSessionsSearch, body)
		if err != nil {
			t.Fatal(err)
		}
		_, err = run(t, e, wire.EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":30,"sessionFilters":[],"cursor":%q}`, nextCursor(t, out)))
		if dshq.ErrorCode(err) != dshq.CodeReplyTooLarge {
			t.Fatalf("got %v; want %s", err, dshq.CodeReplyTooLarge)
		}
	})
}

func (h *hidingProjection) Searchable() bool { return true }

// hidingProjection presents the projection with one session's events
// hidden, as a snapshot behind its index would, its generation shifted by
// lag, and (when own) the snapshot's own index exposed.
type hidingProjection struct {
	inner engine.Source
	hide  string
	lag   uint64
	own   bool
	// reads counts Event calls.
	reads atomic.Int64
}

type hidingSnapshot struct {
	engine.Snapshot
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

// Index is the snapshot's own index when own, else one that does not vouch
// for any snapshot's state.
func (h hidingSnapshot) Index() engine.Index {
	if h.p.own {
		return h.Snapshot.Index()
	}
	return foreignIndex{h.Snapshot.Index()}
}

// foreignIndex ranks as its index does, never Exact.
type foreignIndex struct{ engine.Index }

func (f foreignIndex) RankSessionKeys(ctx context.Context, q engine.SearchQuery) (engine.Ranked, error) {
	r, err := f.Index.RankSessionKeys(ctx, q)
	r.Exact = false
	return r, err
}

func (f foreignIndex) RankEventKeys(ctx context.Context, q engine.SearchQuery) (engine.Ranked, error) {
	r, err := f.Index.RankEventKeys(ctx, q)
	r.Exact = false
	return r, err
}

func (h *hidingProjection) View(ctx context.Context, min uint64, fn func(engine.Snapshot) error) error {
	return h.inner.View(ctx, min, func(s engine.Snapshot) error {
		return fn(hidingSnapshot{s, h})
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
		// key and one per item when checked, none when trusted (the items'
		// records are the index's, read from the snapshot's own state).
		wantReads int64
	}{
		{"a snapshot that names no index has its keys checked", "b", 0, false, 3 + 1},
		{"a snapshot behind its own index has its keys checked", "b", 1, true, 3 + 1},
		{"a snapshot at its own index's ranked generation is trusted", "", 0, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proj := &hidingProjection{inner: shardhost.Local(p.proj), hide: tt.hide, lag: tt.lag, own: tt.own}
			e := engine.New(proj)
			out, err := run(t, e, wire.EndpointSessionsSearch, `{"query":"needle","limit":1}`)
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
				out, err = run(t, e, wire.EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":1,"cursor":%q}`, page.NextCursor))
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
			ev, err := run(t, e, wire.EndpointEventsSearch, `{"sessionId":"b","query":"needle","limit":1}`)
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
	inner engine.Source
	reads atomic.Int64
}

type sessionCountingSnapshot struct {
	engine.Snapshot
	p *sessionCountingProjection
}

func (s sessionCountingSnapshot) Session(id string) (dshq.SessionInfo, bool, error) {
	s.p.reads.Add(1)
	return s.Snapshot.Session(id)
}

func (c *sessionCountingProjection) Searchable() bool { return true }

func (c *sessionCountingProjection) View(ctx context.Context, min uint64, fn func(engine.Snapshot) error) error {
	return c.inner.View(ctx, min, func(s engine.Snapshot) error { return fn(sessionCountingSnapshot{s, c}) })
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
	proj := &sessionCountingProjection{inner: shardhost.Local(p.proj)}
	e := engine.New(proj)
	body := `{"query":"needle","limit":1}`
	out, err := run(t, e, wire.EndpointSessionsSearch, body)
	if err != nil {
		t.Fatal(err)
	}
	later := func() (int64, error) {
		proj.reads.Store(0)
		_, err := run(t, e, wire.EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":1,"cursor":%q}`, nextCursor(t, out)))
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
