package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
)

// epochProjection presents a projection under an epoch the test sets, as if
// a rebuild had been swapped in.
type epochProjection struct {
	inner engine.Source
	mu    sync.Mutex // guards epoch
	epoch string
}

func (e *epochProjection) Searchable() bool { return e.inner.Searchable() }

func (e *epochProjection) View(ctx context.Context, min uint64, fn func(engine.Snapshot) error) error {
	e.mu.Lock()
	epoch := e.epoch
	e.mu.Unlock()
	return e.inner.View(ctx, min, func(s engine.Snapshot) error { return fn(epochSnapshot{s, epoch}) })
}

type epochSnapshot struct {
	engine.Snapshot
	epoch string
}

func (s epochSnapshot) Lineage() string { return s.epoch }

func run(t *testing.T, e *engine.Engine, endpoint, body string) ([]byte, error) {
	t.Helper()
	req, err := wire.DecodeRequest(endpoint, []byte(body))
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
	proj := &epochProjection{inner: shardhost.Local(p.proj), epoch: "A"}
	eng := engine.New(proj)
	paged := []struct{ endpoint, body string }{
		{wire.EndpointSessionsList, `{"limit":1}`},
		{wire.EndpointSessionsFilter, `{"filters":[],"limit":1}`},
		{wire.EndpointSessionsRead, `{"sessionId":"s","limit":1}`},
		{wire.EndpointSessionsSurface, `{"sessionId":"s","limit":1}`},
		{wire.EndpointEventsList, `{"sessionId":"s","limit":1}`},
		{wire.EndpointEventsFilter, `{"sessionId":"s","filters":[],"limit":1}`},
		{wire.EndpointEventsSearch, `{"sessionId":"s","query":"needle","limit":1}`},
		{wire.EndpointSessionsSearch, `{"query":"needle","limit":1,"sessionFilters":[]}`},
	}
	cursors := map[string]string{}
	for _, tt := range paged {
		out, err := run(t, eng, tt.endpoint, tt.body)
		if err != nil {
			t.Fatalf("%s: %v", tt.endpoint, err)
		}
		if tt.endpoint != wire.EndpointSessionsSearch {
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
	reclassified := map[string]bool{wire.EndpointSessionsSurface: true, wire.EndpointEventsList: true, wire.EndpointEventsFilter: true, wire.EndpointEventsSearch: true}
	for _, tt := range paged {
		if tt.endpoint == wire.EndpointSessionsSearch {
			continue
		}
		if reclassified[tt.endpoint] {
			t.Run(tt.endpoint+" is stale after a reclassification of its session", func(t *testing.T) {
				_, err := run(t, eng, tt.endpoint, withCursor(tt.body, cursors[tt.endpoint]))
				wantErr(t, err, dshq.CodeStaleCursor, "cursor is stale because its relevant corpus changed")
			})
			continue
		}
		t.Run(tt.endpoint+" survives a reclassification (it counts no surface)", func(t *testing.T) {
			if _, err := run(t, eng, tt.endpoint, withCursor(tt.body, cursors[tt.endpoint])); err != nil {
				t.Fatal(err)
			}
		})
	}
	proj.mu.Lock()
	proj.epoch = "B"
	proj.mu.Unlock()
	for _, tt := range paged {
		if tt.endpoint == wire.EndpointSessionsSearch {
			continue
		}
		t.Run(tt.endpoint+" is stale after a rebuild", func(t *testing.T) {
			_, err := run(t, eng, tt.endpoint, withCursor(tt.body, cursors[tt.endpoint]))
			wantErr(t, err, dshq.CodeStaleCursor, "cursor is stale because the projection was rebuilt from another stream or by another version")
		})
	}
}
