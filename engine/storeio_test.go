package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
)

// openViews is a Source that counts its snapshots open.
type openViews struct {
	engine.Source
	open atomic.Int32
}

func (v *openViews) View(ctx context.Context, min uint64, fn func(engine.Snapshot) error) error {
	return v.Source.View(ctx, min, func(s engine.Snapshot) error {
		v.open.Add(1)
		defer v.open.Add(-1)
		return fn(s)
	})
}

// watchedStore is a CursorStore that notes each call and how many
// snapshots were open during it; expire makes Get report every key expired.
type watchedStore struct {
	engine.CursorStore
	views  *openViews
	expire atomic.Bool
	mu     sync.Mutex // guards calls
	calls  []string
}

func (w *watchedStore) note(op, key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, fmt.Sprintf("%s %s with %d snapshots open", op, key, w.views.open.Load()))
}

func (w *watchedStore) Put(ctx context.Context, key string, value []byte) error {
	w.note("put", key)
	return w.CursorStore.Put(ctx, key, value)
}

func (w *watchedStore) Get(ctx context.Context, key string) ([]byte, error) {
	w.note("get", key)
	if w.expire.Load() {
		return nil, engine.ErrCursorExpired
	}
	return w.CursorStore.Get(ctx, key)
}

// take returns the calls noted since the last take.
func (w *watchedStore) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.calls
	w.calls = nil
	return out
}

// The cursor store of a deployment is a key-value bucket over NATS, whose
// calls ride out a leader election for seconds. A paged search calls it
// with no snapshot open: a first page stores its hits after its snapshot,
// a later page reads them before its own, each key once. Before, both ran
// inside the snapshot (a read transaction of the projection's store); a
// clean-clone run of the cluster failover test showed the result: while a
// search waited for the bucket's new leader, the projector's commit that
// grew its store waited for that transaction, every read waited behind the
// commit, and a read-your-writes request got no answer for a minute.
func TestAPagedSearchCallsTheCursorStoreWithNoSnapshotOpen(t *testing.T) {
	p := newPipe(t)
	for i, id := range []string{"a", "b", "c"} {
		p.session(id, hdr{createdAt: int64(i + 1)})
		p.events(id, userMsg(1, "first needle"), userMsg(2, "second needle"), userMsg(3, "third needle"))
	}
	p.sync()
	views := &openViews{Source: shardhost.Local(p.proj)}
	store := &watchedStore{CursorStore: engine.NewMemoryCursorStore(engine.CursorTTL), views: views}
	eng := engine.New(views, engine.WithCursorStore(store))

	for _, tt := range []struct{ endpoint, body string }{
		{wire.EndpointSessionsSearch, `{"query":"needle","limit":1,"sessionFilters":[]}`},
		{wire.EndpointEventsSearch, `{"sessionId":"b","query":"needle","limit":1}`},
	} {
		t.Run(tt.endpoint, func(t *testing.T) {
			var pages []string
			body := tt.body
			for {
				out, err := run(t, eng, tt.endpoint, body)
				if err != nil {
					t.Fatalf("page %d: %v", len(pages)+1, err)
				}
				var page struct {
					Items      []json.RawMessage
					Hits       []json.RawMessage
					NextCursor string
				}
				if err := json.Unmarshal(out, &page); err != nil {
					t.Fatal(err)
				}
				pages = append(pages, fmt.Sprint(len(page.Items)+len(page.Hits)))
				calls := store.take()
				seen := map[string]bool{}
				for _, c := range calls {
					if !strings.HasSuffix(c, noneOpen) {
						t.Errorf("page %d: %s", len(pages), c)
					}
					if seen[c] {
						t.Errorf("page %d called the store twice: %s", len(pages), c)
					}
					seen[c] = true
				}
				if page.NextCursor == "" {
					break
				}
				if len(pages) == 1 && len(calls) == 0 {
					t.Fatal("the first page of three stored nothing: this test no longer pages through the store")
				}
				if len(pages) > 1 && len(calls) == 0 {
					t.Fatalf("page %d read nothing from the store", len(pages))
				}
				body = withCursorField(t, tt.body, page.NextCursor)
			}
			if got := fmt.Sprint(pages); got != "[1 1 1]" {
				t.Fatalf("pages held %s hits, want [1 1 1]", got)
			}
		})
	}

	// A later page whose stored hits expired reports it in order, having
	// asked the store once, outside the snapshot.
	out, err := run(t, eng, wire.EndpointSessionsSearch, `{"query":"needle","limit":1,"sessionFilters":[]}`)
	if err != nil {
		t.Fatal(err)
	}
	store.take()
	store.expire.Store(true)
	_, err = run(t, eng, wire.EndpointSessionsSearch, withCursorField(t, `{"query":"needle","limit":1,"sessionFilters":[]}`, nextCursor(t, out)))
	wantErr(t, err, dshq.CodeStaleCursor, "cursor is stale because its stored results expired")
	if calls := store.take(); len(calls) != 1 || !strings.HasSuffix(calls[0], noneOpen) {
		t.Fatalf("an expired page called the store %d times: %q; want once, with no snapshot open", len(calls), calls)
	}
}

const noneOpen = "with 0 snapshots open"

// withCursorField returns the request body with its cursor set.
func withCursorField(t *testing.T, body, cursor string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	m["cursor"] = cursor
	b, _ := json.Marshal(m)
	return string(b)
}
