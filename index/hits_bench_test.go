package index

import (
	"context"
	"strings"
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
