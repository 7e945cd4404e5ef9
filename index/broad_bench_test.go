package index

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dshq/dshq"
)

// broadCorpus is newBenchCorpus's text in 2000 sessions of 25 docs plus one
// session of 10 000 docs ("session-big"), every doc containing the word
// "step": a broad search matches all 60 000 docs.
func broadCorpus() []Doc {
	c := newBenchCorpus(60_000)
	for i := range c.docs {
		d := &c.docs[i]
		d.SessionID = fmt.Sprintf("session-%05d", i/25)
		d.Seq = int64(i % 25)
		if i >= 50_000 {
			d.SessionID, d.Seq = "session-big", int64(i-50_000)
		}
		d.Text = "step " + d.Text
	}
	return c.docs
}

// BenchmarkBroadSearch ranks up to MaxLimit hits of a word every doc
// contains, as the query service does for the first page of a paged search
// (all 2001 sessions; 10 000 of session-big's events), and reports
// the latency percentiles over b.N searches and the allocations per search.
// The Rank cases rank the same hits without loading docs; the ThenHits cases
// add the docs and snippets of one default page, as the query service needs
// for the first page. cpu-ms/op is the process's CPU time per search (the
// index's background merges included), steadier than wall time on a shared
// machine:
//
//	go test -run '^$' -bench BenchmarkBroadSearch -benchtime 40x ./index/
func BenchmarkBroadSearch(b *testing.B) {
	x := openLoaded(b, broadCorpus(), 1000)
	ctx := context.Background()
	cases := []struct {
		name   string
		want   int
		search func() (int, error)
	}{
		{"SearchSessions", 2001, func() (int, error) {
			p, err := x.SearchSessions(ctx, SessionQuery{Query: "step", Limit: MaxLimit, SnippetChars: dshq.SnippetChars})
			return len(p.Hits), err
		}},
		{"SearchEvents", MaxLimit, func() (int, error) {
			p, err := x.SearchEvents(ctx, EventQuery{SessionID: "session-big", Query: "step", Limit: MaxLimit, SnippetChars: dshq.SnippetChars})
			return len(p.Hits), err
		}},
		{"RankSessions", 2001, func() (int, error) {
			r, err := x.RankSessions(ctx, SessionQuery{Query: "step", Limit: MaxLimit})
			return len(r.Keys), err
		}},
		{"RankEvents", MaxLimit, func() (int, error) {
			r, err := x.RankEvents(ctx, EventQuery{SessionID: "session-big", Query: "step", Limit: MaxLimit})
			return len(r.Keys), err
		}},
		{"RankSessionsThenHitsOfAPage", dshq.DefaultSearchLimit, func() (int, error) {
			r, err := x.RankSessions(ctx, SessionQuery{Query: "step", Limit: MaxLimit})
			if err != nil {
				return 0, err
			}
			hs, err := x.Hits(ctx, "step", r.Keys[:dshq.DefaultSearchLimit], dshq.SnippetChars)
			return len(hs), err
		}},
		{"RankEventsThenHitsOfAPage", dshq.DefaultSearchLimit, func() (int, error) {
			r, err := x.RankEvents(ctx, EventQuery{SessionID: "session-big", Query: "step", Limit: MaxLimit})
			if err != nil {
				return 0, err
			}
			hs, err := x.Hits(ctx, "step", r.Keys[:dshq.DefaultSearchLimit], dshq.SnippetChars)
			return len(hs), err
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var ds []time.Duration
			cpu := cpuTime()
			for b.Loop() {
				start := time.Now()
				n, err := c.search()
				if err != nil {
					b.Fatal(err)
				}
				if n != c.want {
					b.Fatalf("%d hits, want %d", n, c.want)
				}
				ds = append(ds, time.Since(start))
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(len(ds)), "cpu-ms/op")
			reportPercentiles(b, ds)
		})
	}
}

func reportPercentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ds[len(ds)/2]), "p50-ms")
	b.ReportMetric(ms(ds[(len(ds)*99)/100]), "p99-ms")
}
