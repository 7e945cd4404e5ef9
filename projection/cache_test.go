package projection

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
)

func TestStateCache_EvictsLeastRecentlyUsedWithinBudget(t *testing.T) {
	st := func() *fold.State { return fold.New(dshq.HeaderRecord{FormatVersion: 2}, fold.Lenient) }
	c := newStateCache(100)
	c.put("a", st(), nil, 40)
	c.put("b", st(), nil, 40)
	if _, _, ok := c.get("a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	c.put("c", st(), nil, 40) // over budget: evicts b, the least recently used
	if _, _, ok := c.get("b"); ok {
		t.Error("b survived eviction")
	}
	for _, id := range []string{"a", "c"} {
		if _, _, ok := c.get(id); !ok {
			t.Errorf("%s was evicted", id)
		}
	}
	if c.bytes() != 80 || c.len() != 2 {
		t.Errorf("bytes %d len %d, want 80 2", c.bytes(), c.len())
	}
	c.put("a", st(), nil, 10) // a re-put replaces, not adds
	if c.bytes() != 50 {
		t.Errorf("bytes after re-put = %d, want 50", c.bytes())
	}
	c.put("huge", st(), nil, 101)
	if _, _, ok := c.get("huge"); ok || c.bytes() != 50 {
		t.Errorf("a state over the whole budget was cached (bytes %d)", c.bytes())
	}
	c.remove("c")
	if c.bytes() != 10 || c.len() != 1 {
		t.Errorf("bytes %d len %d after remove, want 10 1", c.bytes(), c.len())
	}
}

func TestProjector_ProjectsTheSameWhateverTheFoldCacheBudget(t *testing.T) {
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	big := e.start(t.TempDir(), WithBatchSize(3))
	waitGen(t, big.p, last)
	want := dumpStore(t, big.p)
	big.stop()
	for _, budget := range []int64{0, 64, 300} {
		small := e.start(t.TempDir(), WithBatchSize(3), WithFoldCacheBytes(budget))
		waitGen(t, small.p, last)
		if got := dumpStore(t, small.p); got != want {
			t.Errorf("budget %d: store differs from a run with a large cache:\n%s", budget, diffLines(got, want))
		}
		small.p.writeMu.Lock()
		used := small.p.cur.cache.bytes()
		small.p.writeMu.Unlock()
		if used > budget {
			t.Errorf("budget %d: cache holds %d bytes", budget, used)
		}
		small.stop()
	}
}

func TestProjector_FollowsLeasesAndBalancesLapsedOpenTurns(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var leases []LeaseChange
	r := e.start(t.TempDir(), WithOnCommit(func(c Commit) {
		mu.Lock()
		leases = append(leases, c.Leases...)
		mu.Unlock()
	}))
	// A session whose turn is open (the worked example cut before its
	// turn/end), with an id whose token is encoded (lease key "=…").
	id := "open turn/é"
	lines := withID(t, readLines(t, "upstream-2.5.jsonl")[:8], id)
	_, last := e.publishLog(lines)
	waitGen(t, r.p, last)
	tok := token(t, id)
	key := "=" + tok[1:]
	value, _ := json.Marshal(map[string]any{"sessionId": id, "owner": "t"})
	if _, err := e.kv.Put(context.Background(), key, value); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease to be seen", func() bool {
		live := false
		view(t, r.p, func(s Snapshot) error { live = s.IsLive(id); return nil })
		return live
	})
	view(t, r.p, func(s Snapshot) error {
		if got := s.LiveSet(); !slices.Equal(got, []string{id}) {
			t.Errorf("live set = %v", got)
		}
		info, _ := s.Session(id)
		if !s.Record(info).Live {
			t.Error("record is not live")
		}
		if cl, err := s.Closers(id); err != nil || cl != nil {
			t.Errorf("a live session got closers %v (%v)", cl, err)
		}
		return nil
	})
	if err := e.kv.Delete(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease to lapse", func() bool {
		live := true
		view(t, r.p, func(s Snapshot) error { live = s.IsLive(id); return nil })
		return !live
	})
	view(t, r.p, func(s Snapshot) error {
		cl, err := s.Closers(id)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, c := range cl {
			types = append(types, c.Record.Type)
		}
		// Seq 6 is a tool/call whose result (seq 7) was cut off.
		if want := []string{"tool/result", "step/end", "turn/end"}; !slices.Equal(types, want) {
			t.Errorf("closers = %v, want %v", types, want)
		}
		// The result closer is a surface append citing the call; the
		// others are log-only.
		if len(cl) == 3 {
			if c := cl[0]; c.Record.Surface != dshq.SurfaceCurrent || !slices.Equal(c.Sources, []int64{6}) || c.Record.Seq != 7 || c.Record.SessionID != id || c.Text == "" {
				t.Errorf("result closer %+v", c)
			}
			for _, c := range cl[1:] {
				if c.Record.Surface != dshq.SurfaceLogOnly || c.Sources != nil {
					t.Errorf("closer %s: surface %q, sources %v", c.Record.Type, c.Record.Surface, c.Sources)
				}
			}
		}
		if info, _ := s.Session(id); info.EventCount != 7 {
			t.Errorf("closers were written: %d events", info.EventCount)
		}
		return nil
	})

	// A lease that is never renewed lapses by the bucket's TTL (2 s here).
	ttlSeq := e.publish("s-ttl", line(goodHeader, "s-ttl"))
	waitGen(t, r.p, ttlSeq)
	if _, err := e.kv.Put(context.Background(), "s-ttl", value); err != nil {
		t.Fatal(err)
	}
	isLive := func() bool {
		live := false
		view(t, r.p, func(s Snapshot) error { live = s.IsLive("s-ttl"); return nil })
		return live
	}
	waitFor(t, "the TTL lease to be seen", isLive)
	waitFor(t, "the TTL lease to lapse", func() bool { return !isLive() })

	// The hook gets a lease change after View shows it: wait for the last.
	want := []LeaseChange{{tok, id, true}, {tok, id, false}, {"s-ttl", "s-ttl", true}, {"s-ttl", "s-ttl", false}}
	waitFor(t, "OnCommit to get every lease change", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(leases) >= len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(leases, want) {
		t.Errorf("lease changes = %+v, want %+v", leases, want)
	}
}

// A batch that fails after folding its records (here just before its
// commit) must leave no trace in the cache of session values and fold
// states: the same projector, run again, re-applies those records from the
// stored truth and ends as a clean run does. Were the batch's mutated value
// or state kept, the re-applied records would be counted twice.
func TestProjector_AFailedBatchLeavesTheCacheAsCommitted(t *testing.T) {
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	clean := e.start(t.TempDir(), WithBatchSize(3))
	waitGen(t, clean.p, last)
	want := dumpStore(t, clean.p)
	clean.stop()
	for _, point := range []string{"before-index", "before-commit"} {
		t.Run(point, func(t *testing.T) {
			p := e.open(t.TempDir(), WithBatchSize(3), withHook(crashAt(point, 4)))
			failed := run(t, p)
			if err := failed.wait(); !errors.Is(err, errCrash) {
				t.Fatalf("Run returned %v, want the injected failure", err)
			}
			p.writeMu.Lock()
			cached := p.cur.cache.len()
			p.writeMu.Unlock()
			if cached == 0 {
				t.Fatal("nothing cached before the failed batch: the test shows nothing")
			}
			again := run(t, p) // the same projector, its caches as the failure left them
			waitGen(t, p, last)
			if got := dumpStore(t, p); got != want {
				t.Errorf("store after a failed batch differs from a clean run:\n%s", diffLines(got, want))
			}
			again.stop()
		})
	}
}
