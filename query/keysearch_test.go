package query

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dshq/dshq"
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
	keyed := NewEngine(FromProjector(p.proj), WithSearcher(FromIndex(p.proj.Index())), WithMaxSearchResults(30))
	if _, ok := keyed.search.(KeySearcher); !ok {
		t.Fatal("FromIndex is not a KeySearcher")
	}
	plain := NewEngine(FromProjector(p.proj), WithSearcher(plainSearcher{FromIndex(p.proj.Index())}), WithMaxSearchResults(30))
	tests := []struct{ name, endpoint, body string }{
		{"sessions.search pages of 7 up to the bound", EndpointSessionsSearch, `{"query":"needle","limit":7,"sessionFilters":[]}`},
		{"sessions.search within one page", EndpointSessionsSearch, `{"query":"haystack 3","limit":7,"sessionFilters":[]}`},
		{"events.search pages of 1", EndpointEventsSearch, `{"sessionId":"s39","query":"needle","limit":1}`},
		{"events.search pages of 2", EndpointEventsSearch, `{"sessionId":"s38","query":"needle","limit":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name+" gives the same pages", func(t *testing.T) {
			got, want := pageAll(t, keyed, tt.endpoint, tt.body), pageAll(t, plain, tt.endpoint, tt.body)
			if tt.endpoint == EndpointSessionsSearch && len(got) > 2 && !strings.Contains(strings.Join(got, ""), `"live":true`) {
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
			out, err := run(t, e, EndpointSessionsSearch, body)
			if err != nil {
				t.Fatal(err)
			}
			_, err = run(t, e, EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":30,"sessionFilters":[],"cursor":%q}`, nextCursor(t, out)))
			if dshq.ErrorCode(err) != dshq.CodeReplyTooLarge {
				t.Fatalf("got %v; want %s", err, dshq.CodeReplyTooLarge)
			}
		}
	})
	t.Run("a cursor of stored keys on an engine that cannot load keys fails clearly", func(t *testing.T) {
		store := NewMemoryCursorStore(CursorTTL)
		k := NewEngine(FromProjector(p.proj), WithSearcher(FromIndex(p.proj.Index())), WithCursorStore(store))
		pl := NewEngine(FromProjector(p.proj), WithSearcher(plainSearcher{FromIndex(p.proj.Index())}), WithCursorStore(store))
		out, err := run(t, k, EndpointSessionsSearch, `{"query":"needle","limit":5,"sessionFilters":[]}`)
		if err != nil {
			t.Fatal(err)
		}
		_, err = run(t, pl, EndpointSessionsSearch, fmt.Sprintf(`{"query":"needle","limit":5,"sessionFilters":[],"cursor":%q}`, nextCursor(t, out)))
		if dshq.ErrorCode(err) != dshq.CodeIndexFailed {
			t.Fatalf("got %v; want %s", err, dshq.CodeIndexFailed)
		}
	})
}
