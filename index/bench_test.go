package index

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/dshq/dshq"
)

var benchDocs = flag.Int("bench.docs", 100_000, "docs in the benchmark corpus")

// benchCorpus is a deterministic corpus of mixed English and Chinese event
// text: sessions of 50 docs, words drawn Zipf-like from a vocabulary.
type benchCorpus struct {
	docs    []Doc
	queries []string
}

func newBenchCorpus(n int) benchCorpus {
	r := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 3000)
	for i := range words {
		var b strings.Builder
		for j := 0; j < 3+r.IntN(6); j++ {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		words[i] = b.String()
	}
	const han = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严"
	hanRunes := []rune(han)
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(words)-1))
	text := func() string {
		var parts []string
		for k := 0; k < 2+r.IntN(10); k++ {
			if r.IntN(3) == 0 {
				var b strings.Builder
				for j := 0; j < 2+r.IntN(12); j++ {
					b.WriteRune(hanRunes[r.IntN(len(hanRunes))])
				}
				parts = append(parts, b.String())
				continue
			}
			for j := 0; j < 1+r.IntN(8); j++ {
				parts = append(parts, words[zipf.Uint64()])
			}
		}
		return strings.Join(parts, " ")
	}
	c := benchCorpus{docs: make([]Doc, n)}
	for i := range c.docs {
		sid := fmt.Sprintf("session-%05d", i/50)
		c.docs[i] = Doc{
			SessionID: sid, Cwd: dshq.Str(fmt.Sprintf("/work/%d", i/50%20)), CreatedAt: int64(i / 50),
			Seq: int64(i % 50), Type: dshq.TypeAssistantMessage, Time: int64(1_700_000_000_000 + i*1000),
			Surface: dshq.SurfaceCurrent, Text: text(),
		}
	}
	for i := 0; i < 400; i++ {
		switch i % 4 {
		case 0: // one common word
			c.queries = append(c.queries, words[zipf.Uint64()])
		case 1: // a two-word phrase taken from a doc
			f := strings.Fields(c.docs[r.IntN(n)].Text)
			k := r.IntN(len(f))
			c.queries = append(c.queries, strings.Join(f[k:min(len(f), k+2)], " "))
		case 2: // a Chinese run
			k := r.IntN(len(hanRunes) - 3)
			c.queries = append(c.queries, string(hanRunes[k:k+2+r.IntN(2)]))
		default: // a rare word
			c.queries = append(c.queries, words[len(words)-1-r.IntN(1000)])
		}
	}
	return c
}

// BenchmarkCorpus indexes the corpus in batches of 1000 and measures search
// latency, for this package and for raw Bleve with its default mapping on
// the same machine and data. Run it on demand:
//
//	go test -run '^$' -bench BenchmarkCorpus -benchtime 1x ./index/
func BenchmarkCorpus(b *testing.B) {
	c := newBenchCorpus(*benchDocs)
	ctx := context.Background()
	b.Run("dshq", func(b *testing.B) {
		for range b.N {
			x, err := Open(filepath.Join(b.TempDir(), "index"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			start, cpu := time.Now(), cpuTime()
			applyInBatches(b, x, c.docs, 1000)
			b.ReportMetric(float64(len(c.docs))/time.Since(start).Seconds(), "docs/s")
			b.ReportMetric(float64(len(c.docs))/(cpuTime()-cpu).Seconds(), "docs/cpu-s")
			sess := latencies(b, c.queries, func(q string) error {
				_, err := x.SearchSessions(ctx, SessionQuery{Query: q})
				return err
			})
			ev := latencies(b, c.queries, func(q string) error {
				_, err := x.SearchEvents(ctx, EventQuery{SessionID: "session-00042", Query: q})
				return err
			})
			report(b, "sessions", sess)
			report(b, "events", ev)
			if err := x.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bleve-default", func(b *testing.B) {
		for range b.N {
			idx, err := bleve.New(filepath.Join(b.TempDir(), "index"), bleve.NewIndexMapping())
			if err != nil {
				b.Fatal(err)
			}
			start, cpu := time.Now(), cpuTime()
			for i := 0; i < len(c.docs); i += 1000 {
				bt := idx.NewBatch()
				for _, d := range c.docs[i:min(len(c.docs), i+1000)] {
					if err := bt.Index(docID(0, d.SessionID, d.Seq), map[string]any{
						"sid": d.SessionID, "seq": float64(d.Seq), "time": float64(d.Time), "text": d.Text,
					}); err != nil {
						b.Fatal(err)
					}
				}
				if err := idx.Batch(bt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.docs))/time.Since(start).Seconds(), "docs/s")
			b.ReportMetric(float64(len(c.docs))/(cpuTime()-cpu).Seconds(), "docs/cpu-s")
			top := latencies(b, c.queries, func(q string) error {
				mq := bleve.NewMatchPhraseQuery(q)
				mq.SetField("text")
				req := bleve.NewSearchRequestOptions(mq, 21, 0, false)
				req.Fields = []string{"text"}
				_, err := idx.SearchInContext(ctx, req)
				return err
			})
			report(b, "top", top)
			if err := idx.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cpuTime is the process's user+system CPU time: throughput per CPU second
// is comparable across runs on a shared, loaded machine, wall time is not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func latencies(b *testing.B, queries []string, search func(string) error) []time.Duration {
	out := make([]time.Duration, 0, len(queries))
	for _, q := range queries {
		start := time.Now()
		if err := search(q); err != nil {
			b.Fatalf("query %q: %v", q, err)
		}
		out = append(out, time.Since(start))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func report(b *testing.B, name string, ds []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ds[len(ds)/2]), name+"-p50-ms")
	b.ReportMetric(ms(ds[len(ds)*99/100]), name+"-p99-ms")
}

// applyInBatches upserts docs into x in batches of size, each batch at the
// generation of the docs applied once it is in.
func applyInBatches(b *testing.B, x *Index, docs []Doc, size int) {
	b.Helper()
	for i := 0; i < len(docs); i += size {
		var bt Batch
		for _, d := range docs[i:min(len(docs), i+size)] {
			bt.Upsert(d)
		}
		if err := x.Apply(context.Background(), &bt, uint64(i+size)); err != nil {
			b.Fatal(err)
		}
	}
}

// openLoaded opens a new index in b's temporary directory, closed when b's
// run ends, holding docs applied in batches of size.
func openLoaded(b *testing.B, docs []Doc, size int) *Index {
	b.Helper()
	x, err := Open(filepath.Join(b.TempDir(), "index"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = x.Close() })
	applyInBatches(b, x, docs, size)
	return x
}

// BenchmarkSearchSessions measures one cross-session search over the
// corpus's query mix (index built once, outside the timer):
//
//	go test -run '^$' -bench BenchmarkSearchSessions ./index/ -args -bench.docs=20000
func BenchmarkSearchSessions(b *testing.B) {
	c := newBenchCorpus(*benchDocs)
	x := openLoaded(b, c.docs, 1000)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := x.SearchSessions(ctx, SessionQuery{Query: c.queries[i%len(c.queries)]}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLiveApply applies the corpus as a live load does: small batches
// (16 docs) at a steady pace (one every 20 ms, 800 docs/s), and reports the
// process CPU per 1,000 docs, through Close, so that what Bleve's persister
// and merger spend in the background counts too. CPU, not wall time, is the
// figure to compare on a shared machine:
//
//	go test -run '^$' -bench LiveApply -benchtime 1x ./index/ -args -bench.docs=20000
func BenchmarkLiveApply(b *testing.B) {
	c := newBenchCorpus(*benchDocs)
	ctx := context.Background()
	const batchDocs, every = 16, 20 * time.Millisecond
	for range b.N {
		x, err := Open(filepath.Join(b.TempDir(), "index"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		tick := time.NewTicker(every)
		cpu := cpuTime()
		for i := 0; i < len(c.docs); i += batchDocs {
			<-tick.C
			var bt Batch
			for _, d := range c.docs[i:min(len(c.docs), i+batchDocs)] {
				bt.Upsert(d)
			}
			if err := x.Apply(ctx, &bt, uint64(i+batchDocs)); err != nil {
				b.Fatal(err)
			}
		}
		tick.Stop()
		if err := x.Close(); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())*1000/float64(len(c.docs)), "cpu-ms/1k-docs")
		liveSearch(b, x, c.queries)
	}
}

// liveSearch reopens the index the live load left and reports its segments
// and the latency of the cross-session searches over it.
func liveSearch(b *testing.B, x *Index, queries []string) {
	b.Helper()
	y, err := Open(x.dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer y.Close()
	st := y.idx.StatsMap()["index"].(map[string]any)
	b.ReportMetric(float64(st["num_root_memorysegments"].(uint64)+st["num_root_filesegments"].(uint64)), "segments")
	sess := latencies(b, queries, func(q string) error {
		_, err := y.SearchSessions(context.Background(), SessionQuery{Query: q})
		return err
	})
	report(b, "sessions", sess)
}
