package index

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dshq/dshq"
)

// BenchmarkPageHits loads a page of hits (docs and snippets) as the query
// service does for each page it serves: the first 20 keys of a ranking
// across sessions (20 sessions) and of one session's ranking, over
// commonPhraseCorpus in batches of 1,000 (many segments, as a live index
// has). Compare trees alternating, -count 6:
//
//	go test -run '^$' -bench PageHits -count 6 ./index/ -args -phrase-bench-docs 50000
func BenchmarkPageHits(b *testing.B) {
	docs := commonPhraseCorpus(*phraseBenchDocs)
	x := openLoaded(b, docs, 1000)
	ctx := context.Background()
	// The one session: the one with the most docs saying "timeout" (a fixed
	// session may have none).
	most := map[string]int{}
	var busiest string
	for _, d := range docs {
		if strings.Contains(d.Text, "timeout") {
			if most[d.SessionID]++; most[d.SessionID] > most[busiest] {
				busiest = d.SessionID
			}
		}
	}
	across, err := x.RankSessions(ctx, SessionQuery{Query: "retry budget", Limit: dshq.DefaultSearchLimit})
	if err != nil {
		b.Fatal(err)
	}
	within, err := x.RankEvents(ctx, EventQuery{SessionID: busiest, Query: "timeout", Limit: dshq.DefaultSearchLimit})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		q    string
		keys []Key
	}{{"AcrossSessions", "retry budget", across.Keys}, {"OneSession", "timeout", within.Keys}} {
		b.Run(c.name, func(b *testing.B) {
			if len(c.keys) == 0 {
				b.Fatal("no keys")
			}
			b.ReportAllocs()
			var ds []time.Duration
			for b.Loop() {
				t0 := time.Now()
				hits, err := x.Hits(ctx, c.q, c.keys, 0)
				if err != nil || len(hits) != len(c.keys) {
					b.Fatalf("%d hits of %d keys: %v", len(hits), len(c.keys), err)
				}
				ds = append(ds, time.Since(t0))
			}
			b.ReportMetric(float64(len(c.keys)), "keys")
			reportPercentiles(b, ds)
		})
	}
}

// BenchmarkRareSessionSearch is the index's part of sessions.search for a
// rare phrase, as the query service asks it: the ranking of a first page
// (RankSessions) and the hits of its keys (Hits), over commonPhraseCorpus in
// batches of 1,000 (many segments). Profile it with -cpuprofile and
// -memprofile (docs/profiling-search.md):
//
//	go test -run '^$' -bench RareSessionSearch -benchmem ./index/ -args -phrase-bench-docs 50000
func BenchmarkRareSessionSearch(b *testing.B) {
	x := openLoaded(b, commonPhraseCorpus(*phraseBenchDocs), 1000)
	settle(b, x)
	ctx := context.Background()
	const q = "quasar pulsar"
	b.ReportAllocs()
	var ds []time.Duration
	keys := 0
	for b.Loop() {
		t0 := time.Now()
		r, err := x.RankSessions(ctx, SessionQuery{Query: q, Limit: dshq.DefaultSearchLimit + 1})
		if err != nil || len(r.Keys) == 0 {
			b.Fatalf("%d keys: %v", len(r.Keys), err)
		}
		hits, err := x.Hits(ctx, q, r.Keys, 0)
		if err != nil || len(hits) != len(r.Keys) {
			b.Fatalf("%d hits of %d keys: %v", len(hits), len(r.Keys), err)
		}
		ds = append(ds, time.Since(t0))
		keys = len(r.Keys)
	}
	b.ReportMetric(float64(keys), "keys")
	reportPercentiles(b, ds)
}

// settle waits, up to a minute, until x's merger and persister are idle at
// two polls 100 ms apart with nothing merged between, so that the measured
// requests do not share the machine with the load's merges.
func settle(b *testing.B, x *Index) {
	st := x.ScorchStats()
	if st == nil {
		return
	}
	state := func() [3]uint64 {
		root := atomic.LoadUint64(&st.CurRootEpoch)
		busy := uint64(0)
		if atomic.LoadUint64(&st.LastMergedEpoch) != root || atomic.LoadUint64(&st.LastPersistedEpoch) != root {
			busy = 1
		}
		return [3]uint64{atomic.LoadUint64(&st.TotFileMergeZapBeg) + atomic.LoadUint64(&st.TotMemMergeZapBeg),
			atomic.LoadUint64(&st.TotFileMergeZapEnd) + atomic.LoadUint64(&st.TotMemMergeZapEnd), busy}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	prev := state()
	for start := time.Now(); time.Since(start) < time.Minute; {
		<-tick.C
		cur := state()
		if cur == prev && cur[0] == cur[1] && cur[2] == 0 {
			b.Logf("index settled in %v", time.Since(start))
			return
		}
		prev = cur
	}
	b.Log("index did not settle in a minute")
}
