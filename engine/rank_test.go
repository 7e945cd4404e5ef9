package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
)

// TestSessionRankStoredWhenLarge: a sessions.rank window larger than a
// reply is stored in chunks and named instead; read back (LoadRanking), it
// is the ranking a large reply carries, in the order a partitioned service
// merges by.
func TestSessionRankStoredWhenLarge(t *testing.T) {
	p := newPipe(t)
	for i := range 60 {
		id := fmt.Sprintf("s%02d", i)
		p.session(id, hdr{createdAt: int64(i)})
		evs := []evSpec{userMsg(int64(i%7), fmt.Sprintf("a needle in haystack %d", i))}
		for j := range i % 3 {
			evs = append(evs, userMsg(int64(100+j), fmt.Sprintf("needle needle %d.%d", i, j)))
		}
		p.events(id, evs...)
	}
	p.sync()
	p.setLive("s07", true)
	store := engine.NewMemoryCursorStore(engine.CursorTTL)
	e := engine.New(shardhost.Local(p.proj), engine.WithCursorStore(store))
	req, err := wire.DecodeRequest(wire.EndpointSessionsRank, []byte(`{"query":"needle"}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Bleve's BM25 takes its average field length from the segments' term
	// dictionaries, so a background merge of the index's segments (no write
	// needed) moves every score. The stored ranking is compared with the
	// large reply's only when a second large reply, asked after it was
	// read back, equals the first: with no write, a merge only ever joins
	// segments, so equal rankings at both ends mean none ran between.
	deadline := time.Now().Add(time.Minute)
	for attempt := 1; ; attempt++ {
		whole := decodeRanking(t, e, ctx, req, 0)
		if len(whole.Keys) != 60 || whole.Stored != "" || whole.More {
			t.Fatalf("ranking %+v", whole)
		}
		for i := 1; i < len(whole.Keys); i++ {
			a, b := whole.Keys[i-1], whole.Keys[i]
			if a.Score < b.Score || (a.Score == b.Score && (a.Time < b.Time || (a.Time == b.Time && a.SessionID > b.SessionID))) {
				t.Fatalf("keys %d and %d out of order: %+v %+v", i-1, i, a, b)
			}
		}
		small := decodeRanking(t, e, ctx, req, 3<<10)
		if small.Stored == "" || small.Chunks != 1 || len(small.Keys) != 0 {
			t.Fatalf("small reply %+v", small)
		}
		stored, err := engine.LoadRanking(ctx, store, small.Stored, small.Chunks)
		if err != nil {
			t.Fatal(err)
		}
		if again := decodeRanking(t, e, ctx, req, 0); !reflect.DeepEqual(again, whole) {
			if time.Now().After(deadline) {
				t.Fatalf("the index's scores still moved after %d attempts over a minute", attempt)
			}
			t.Logf("attempt %d: a merge moved the scores meanwhile; asking again", attempt)
			<-time.After(20 * time.Millisecond) // poll interval
			continue
		}
		if !reflect.DeepEqual(stored, whole.Keys) {
			t.Fatalf("stored %+v\nwant %+v", stored, whole.Keys)
		}
		return
	}
}

func decodeRanking(t *testing.T, e *engine.Engine, ctx context.Context, req *wire.Request, maxReply int) wire.SessionRanking {
	t.Helper()
	out, err := e.Answer(ctx, req, maxReply)
	if err != nil {
		t.Fatal(err)
	}
	var r wire.SessionRanking
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	return r
}
