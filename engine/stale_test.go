package engine

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
)

// epochProjection presents a projection under an epoch the test sets, as if
// a rebuild had been swapped in.
type epochProjection struct {
	inner Projection
	mu    sync.Mutex // guards epoch
	epoch string
}

func (e *epochProjection) View(ctx context.Context, min uint64, fn func(Snapshot) error) error {
	e.mu.Lock()
	epoch := e.epoch
	e.mu.Unlock()
	return e.inner.View(ctx, min, func(s Snapshot) error { return fn(epochSnapshot{s, epoch}) })
}

type epochSnapshot struct {
	Snapshot
	epoch string
}

func (s epochSnapshot) Epoch() string { return s.epoch }

func run(t *testing.T, e *Engine, endpoint, body string) ([]byte, error) {
	t.Helper()
	req, err := query.DecodeRequest(endpoint, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return e.Run(context.Background(), req)
}

func nextCursor(t *testing.T, out []byte) string {
	t.Helper()
	var v struct{ NextCursor string }
	if err := json.Unmarshal(out, &v); err != nil || v.NextCursor == "" {
		t.Fatalf("no nextCursor in %s (%v)", out, err)
	}
	return v.NextCursor
}

func TestStaleCursors(t *testing.T) {
	p := newPipe(t)
	p.session("s", hdr{createdAt: 1})
	p.events("s", userMsg(1, "one needle"), userMsg(2, "two needle"), userMsg(3, "three needle"))
	p.session("t", hdr{createdAt: 2})
	p.sync()
	proj := &epochProjection{inner: FromProjector(p.proj), epoch: "A"}
	engine := New(proj, WithSearcher(FromIndex(p.proj.Index())))
	paged := []struct{ endpoint, body string }{
		{query.EndpointSessionsList, `{"limit":1}`},
		{query.EndpointSessionsFilter, `{"filters":[],"limit":1}`},
		{query.EndpointSessionsRead, `{"sessionId":"s","limit":1}`},
		{query.EndpointSessionsSurface, `{"sessionId":"s","limit":1}`},
		{query.EndpointEventsList, `{"sessionId":"s","limit":1}`},
		{query.EndpointEventsFilter, `{"sessionId":"s","filters":[],"limit":1}`},
		{query.EndpointEventsSearch, `{"sessionId":"s","query":"needle","limit":1}`},
		{query.EndpointSessionsSearch, `{"query":"needle","limit":1,"sessionFilters":[]}`},
	}
	cursors := map[string]string{}
	for _, tt := range paged {
		out, err := run(t, engine, tt.endpoint, tt.body)
		if err != nil {
			t.Fatalf("%s: %v", tt.endpoint, err)
		}
		if tt.endpoint != query.EndpointSessionsSearch {
			cursors[tt.endpoint] = nextCursor(t, out)
		}
	}
	// The surface of s is reclassified after the first pages.
	p.events("s", userReplace(4, "summary", 0, 1, "[0,1]"))
	p.sync()
	withCursor := func(body, cur string) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		m["cursor"] = cur
		b, _ := json.Marshal(m)
		return string(b)
	}
	reclassified := map[string]bool{query.EndpointSessionsSurface: true, query.EndpointEventsList: true, query.EndpointEventsFilter: true, query.EndpointEventsSearch: true}
	for _, tt := range paged {
		if tt.endpoint == query.EndpointSessionsSearch {
			continue
		}
		if reclassified[tt.endpoint] {
			t.Run(tt.endpoint+" is stale after a reclassification of its session", func(t *testing.T) {
				_, err := run(t, engine, tt.endpoint, withCursor(tt.body, cursors[tt.endpoint]))
				wantErr(t, err, dshq.CodeStaleCursor, "cursor is stale because its relevant corpus changed")
			})
			continue
		}
		t.Run(tt.endpoint+" survives a reclassification (it counts no surface)", func(t *testing.T) {
			if _, err := run(t, engine, tt.endpoint, withCursor(tt.body, cursors[tt.endpoint])); err != nil {
				t.Fatal(err)
			}
		})
	}
	proj.mu.Lock()
	proj.epoch = "B"
	proj.mu.Unlock()
	for _, tt := range paged {
		if tt.endpoint == query.EndpointSessionsSearch {
			continue
		}
		t.Run(tt.endpoint+" is stale after a rebuild", func(t *testing.T) {
			_, err := run(t, engine, tt.endpoint, withCursor(tt.body, cursors[tt.endpoint]))
			wantErr(t, err, dshq.CodeStaleCursor, "cursor is stale because the projection was rebuilt from another stream or by another version")
		})
	}
}
