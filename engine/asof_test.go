package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
)

// aheadProjection opens each view's snapshot, then runs during (an append
// the index applies) before the view's function reads it: the index is then
// ahead of the snapshot, as between the projector's index batch and its store
// commit, or between a reader's snapshot and its ranking.
type aheadProjection struct {
	inner  engine.Source
	during func()
}

func (a *aheadProjection) Searchable() bool { return a.inner.Searchable() }

func (a *aheadProjection) View(ctx context.Context, min uint64, fn func(engine.Snapshot) error) error {
	return a.inner.View(ctx, min, func(s engine.Snapshot) error {
		if a.during != nil {
			a.during()
		}
		return fn(s)
	})
}

// indexAhead returns a during function that appends evs to session id and
// waits until the index (not the snapshot already open) holds them.
func indexAhead(p *pipe, id string, evs ...evSpec) func() {
	return func() {
		seq := p.events(id, evs...)
		waitIndexed(p, seq)
	}
}

func waitIndexed(p *pipe, seq uint64) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for p.proj.Index().Generation() < seq {
		if time.Now().After(deadline) {
			p.t.Fatalf("index did not reach generation %d", seq)
		}
		time.Sleep(time.Millisecond) // polls the condition; the deadline bounds it
	}
}

// TestASearchWhileTheIndexIsAheadRanksWhatTheSnapshotHolds: an event the
// index holds and the snapshot does not (it is indexed before the store
// commits it) takes no rank. A session whose best match is such an event is
// ranked by the events the snapshot holds, not dropped; an events.search
// window is filled with held events.
func TestASearchWhileTheIndexIsAheadRanksWhatTheSnapshotHolds(t *testing.T) {
	p := newPipe(t)
	for _, id := range []string{"a", "b"} {
		p.session(id, hdr{createdAt: 1})
		p.events(id, userMsg(2, "a needle somewhere in a long haystack of words in "+id),
			userMsg(3, "another needle, in a haystack of words too"),
			userMsg(4, "a third needle among many other words"))
	}
	gen := p.sync()
	proj := &aheadProjection{inner: shardhost.Local(p.proj)}
	e := engine.New(proj, engine.WithMaxSearchResults(2))

	t.Run("sessions.search keeps a session whose best match is newer than the snapshot", func(t *testing.T) {
		proj.during = indexAhead(p, "a", userMsg(5, "needle needle needle"))
		out, err := run(t, e, wire.EndpointSessionsSearch, `{"query":"needle","limit":5,"sessionFilters":[]}`)
		proj.during = nil
		if err != nil {
			t.Fatal(err)
		}
		var page dshq.SessionSearchPage
		if err := json.Unmarshal(out, &page); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range page.Items {
			ids = append(ids, h.Header.ID)
			if h.BestMatch.Seq > 2 {
				t.Errorf("session %s ranked by seq %d, which the snapshot does not hold", h.Header.ID, h.BestMatch.Seq)
			}
		}
		slices.Sort(ids)
		if page.Generation != gen || !slices.Equal(ids, []string{"a", "b"}) {
			t.Fatalf("sessions %v at generation %d; want [a b] at %d", ids, page.Generation, gen)
		}
	})
	gen = p.sync()

	t.Run("events.search fills its window with events the snapshot holds", func(t *testing.T) {
		proj.during = indexAhead(p, "b", userMsg(6, "needle needle needle"))
		out, err := run(t, e, wire.EndpointEventsSearch, `{"sessionId":"b","query":"needle","limit":5}`)
		proj.during = nil
		if err != nil {
			t.Fatal(err)
		}
		var page dshq.EventSearchPage
		if err := json.Unmarshal(out, &page); err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		for _, h := range page.Items {
			seqs = append(seqs, h.Seq)
		}
		// The window is the max results (2) of the 3 held matches.
		if page.Generation != gen || len(seqs) != 2 || slices.Contains(seqs, 3) {
			t.Fatalf("seqs %v at generation %d; want 2 of [0 1 2] at %d", seqs, page.Generation, gen)
		}
	})
}
