package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/index"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
)

var (
	pathSessions = flag.Int("searchpath.sessions", 1630, "sessions of BenchmarkSearchPath's corpus (1630: the issue's 100k events)")
	pathSamples  = flag.Int("searchpath.samples", 1000, "requests of each search class and layer")
	pathCPU      = flag.String("searchpath.cpuprofile", "", "write a CPU profile of the measured requests (not the setup) to this file")
	pathTrace    = flag.String("searchpath.trace", "", "write an execution trace of the measured requests to this file")
	pathClass    = flag.String("searchpath.class", "", "measure only the classes whose name contains this")
	pathBallast  = flag.Int("searchpath.ballast", 0, "MiB of pointerful live heap to hold through the measured requests (the bench process's heap at 1M events is about 1,400 MiB)")
)

// ballastLeaf is one object of a ballast: 64 bytes with a pointer, which
// the GC marks one by one, as it does the bench's corpus.
type ballastLeaf struct {
	next *ballastLeaf
	_    [7]uint64
}

// makeBallast allocates mib MiB of live heap: chunks of pointers to leaves.
func makeBallast(mib int) [][]*ballastLeaf {
	var out [][]*ballastLeaf
	for left := mib << 20 / 64; left > 0; left -= 4096 {
		chunk := make([]*ballastLeaf, min(left, 4096))
		for i := range chunk {
			chunk[i] = &ballastLeaf{}
			if i > 0 {
				chunk[i].next = chunk[i-1]
			}
		}
		out = append(out, chunk)
	}
	return out
}

// BenchmarkSearchPath measures the bench's four search classes layer by
// layer on its corpus (every session bulk-loaded, then projected): the
// query client over NATS as the bench's rows do, the shard engine called
// in process (request decoding, snapshot, ranking, lookups, encoding), the
// index alone (the ranking and the page's hits the engine asks for) and
// raw Bleve's phrase top-20 on the same documents. Sample i of every layer
// runs back to back, so a load spike hits them alike; the differences of
// their percentiles are what each layer adds. It also reports each layer's
// bytes allocated per request (what the GC pays for) and the GC cycles
// during the measured requests. Run it on demand (about 2 minutes of setup
// at 1630 sessions):
//
//	go test -short -run '^$' -bench SearchPath -benchtime 1x ./bench/ -args -searchpath.cpuprofile /tmp/search.pprof
func BenchmarkSearchPath(b *testing.B) {
	ctx := context.Background()
	r := &runner{cfg: Config{Corpus: CorpusConfig{Sessions: *pathSessions, Turns: DefaultTurns, Seed: 1}}, rep: &Report{}}
	r.cfg.defaults()
	r.rng = rand.New(rand.NewPCG(r.cfg.Corpus.Seed, 7))
	r.dir = b.TempDir()
	var err error
	if r.corpus, err = GenerateCorpus(r.cfg.Corpus); err != nil {
		b.Fatal(err)
	}
	r.split()
	r.bulk, r.sample = r.corpus.Sessions, nil
	start := time.Now()
	if err := r.loadBulk(ctx); err != nil {
		b.Fatal(err)
	}
	var stack []func() error
	defer func() {
		for i := len(stack) - 1; i >= 0; i-- {
			if err := stack[i](); err != nil {
				b.Error(err)
			}
		}
	}()
	if err := r.startBus(ctx, &stack); err != nil {
		b.Fatal(err)
	}
	if err := r.startPipeline(ctx, &stack); err != nil {
		b.Fatal(err)
	}
	if r.last, err = r.streamLast(ctx); err != nil {
		b.Fatal(err)
	}
	if err := waitProjected(ctx, r.proj, r.last); err != nil {
		b.Fatal(err)
	}
	eng, err := shardhost.NewShardEngine(ctx, r.js, r.proj)
	if err != nil {
		b.Fatal(err)
	}
	sessions, err := r.collect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	raw, _, err := rawBleve(filepath.Join(r.dir, "raw.bleve"), sessions)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	docs := 0
	for _, s := range sessions {
		docs += len(s.Docs)
	}
	b.Logf("%d sessions, %d search documents, projected and raw-indexed in %v", len(sessions), docs, time.Since(start).Round(time.Second))

	// The samples, drawn as searchAndRead draws them.
	n := *pathSamples
	sess := make([]FTSSession, n)
	rare, common := make([]string, n), make([]string, n)
	for i := range n {
		k := r.rng.IntN(len(r.corpus.Sessions))
		rare[i] = r.corpus.Rare[k]
		common[i] = r.corpus.Common[r.rng.IntN(len(r.corpus.Common))]
		sess[i] = sessions[r.rng.IntN(len(sessions))]
		_ = r.rng.IntN(max(1, sess[i].EventCount))
	}
	budget := query.ReplyBudget(r.nc)
	x := r.proj.Index()
	type layer struct {
		name string
		fn   func(i int) error
	}
	sessionsReq := func(q []string, filtered bool) func(i int) dshq.SessionSearchRequest {
		return func(i int) dshq.SessionSearchRequest {
			req := dshq.SessionSearchRequest{Query: q[i]}
			if filtered {
				c, _ := sess[i].Header.CwdOrEmpty()
				current := string(dshq.SurfaceCurrent)
				req.SessionFilters = []dshq.Filter{{Kind: dshq.FilterCwd, Values: []*string{&c}}}
				req.EventFilters = []dshq.Filter{{Kind: dshq.FilterSurface, Values: []*string{&current}}}
			}
			return req
		}
	}
	answer := func(endpoint string, req any) error {
		body, err := json.Marshal(req)
		if err != nil {
			return err
		}
		w, err := wire.DecodeRequest(endpoint, body)
		if err != nil {
			return err
		}
		_, err = eng.Answer(ctx, w, budget)
		return err
	}
	sessionLayers := func(q []string, filtered bool, withBleve bool) []layer {
		mk := sessionsReq(q, filtered)
		ls := []layer{
			{"client over NATS", func(i int) error { _, err := r.client.SearchSessions(ctx, mk(i)); return err }},
			{"engine in process", func(i int) error { return answer(wire.EndpointSessionsSearch, mk(i)) }},
			{"index rank+hits", func(i int) error {
				req := mk(i)
				rk, err := x.RankSessions(ctx, index.SessionQuery{Query: req.Query, SessionFilters: req.SessionFilters,
					EventFilters: req.EventFilters, Limit: engine.MaxSearchResults, AsOf: x.Generation()})
				if err != nil {
					return err
				}
				_, err = x.Hits(ctx, req.Query, rk.Keys[:min(len(rk.Keys), dshq.DefaultSearchLimit)], 0)
				return err
			}},
			{"index rank", func(i int) error {
				req := mk(i)
				_, err := x.RankSessions(ctx, index.SessionQuery{Query: req.Query, SessionFilters: req.SessionFilters,
					EventFilters: req.EventFilters, Limit: engine.MaxSearchResults, AsOf: x.Generation()})
				return err
			}},
		}
		if withBleve {
			ls = append(ls, layer{"raw Bleve phrase top-20", func(i int) error { _, err := bleveSearch(raw, q[i], ""); return err }})
		}
		return ls
	}
	eventsReq := func(i int) dshq.EventSearchRequest {
		return dshq.EventSearchRequest{SessionID: sess[i].Header.ID, Query: common[i]}
	}
	classes := []struct {
		name   string
		layers []layer
	}{
		{"sessions.search rare phrase", sessionLayers(rare, false, true)},
		{"sessions.search common phrase", sessionLayers(common, false, true)},
		{"sessions.search common phrase, cwd+surface filters", sessionLayers(common, true, false)},
		{"events.search common phrase", []layer{
			{"client over NATS", func(i int) error { _, err := r.client.SearchEvents(ctx, eventsReq(i)); return err }},
			{"engine in process", func(i int) error { return answer(wire.EndpointEventsSearch, eventsReq(i)) }},
			{"index rank+hits", func(i int) error {
				req := eventsReq(i)
				rk, err := x.RankEvents(ctx, index.EventQuery{SessionID: req.SessionID, Query: req.Query,
					Limit: dshq.DefaultSearchLimit, AsOf: x.Generation()})
				if err != nil {
					return err
				}
				_, err = x.Hits(ctx, req.Query, rk.Keys, 0)
				return err
			}},
			{"raw Bleve phrase AND session", func(i int) error { _, err := bleveSearch(raw, common[i], sess[i].Header.ID); return err }},
		}},
	}
	// With a ballast, each class runs four times, alternating without and
	// with it: the ballast's effect beside the same process without it.
	rounds := []int{0}
	if *pathBallast > 0 {
		rounds = []int{0, *pathBallast, 0, *pathBallast}
	}
	stopProfile := startSearchProfiles(b)
	defer stopProfile()
	var table strings.Builder
	var tails []string
	var ballast [][]*ballastLeaf
	for _, c := range classes {
		for _, bal := range rounds {
			if !strings.Contains(c.name, *pathClass) {
				continue
			}
			ballast = nil
			if bal > 0 {
				ballast = makeBallast(bal)
			}
			runtime.GC()
			name, key := c.name, c.name
			if len(rounds) > 1 {
				name = fmt.Sprintf("%s, ballast %d MiB (live heap %.0f MiB)", c.name, bal, mib(liveHeap()))
				key = fmt.Sprintf("%s ballast%d", c.name, bal)
			}
			lat := make([][]time.Duration, len(c.layers))
			runtime.GC()
			for _, l := range c.layers { // warm-up, alike for every layer
				if err := l.fn(n - 1); err != nil {
					b.Fatalf("%s: %s: %v", c.name, l.name, err)
				}
			}
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			// The client layer's samples are probed as the bench's are.
			tp := newTailProbe(&r.commits, [2]*scorch.Stats{projectionStats(x), scorchStats(raw)})
			tp.startClass()
			for i := range n {
				for j, l := range c.layers {
					var err error
					if j == 0 {
						tp.begin()
					}
					t0 := time.Now()
					// Labelled, so that a profile of one class and layer is
					// `go tool pprof -tagfocus layer=index -tagfocus class=filters`
					// (the NATS layer's work runs in the service's goroutines,
					// unlabelled).
					pprof.Do(ctx, pprof.Labels("class", c.name, "layer", l.name), func(context.Context) { err = l.fn(i) })
					d := time.Since(t0)
					if j == 0 {
						tp.end(t0, d)
					}
					if err != nil {
						b.Fatalf("%s: %s: %v", c.name, l.name, err)
					}
					lat[j] = append(lat[j], d)
				}
			}
			tp.endClass()
			tp.close()
			runtime.ReadMemStats(&ms1)
			last := len(c.layers) - 1
			note := tailNote(name+", client over NATS", tp.samples, c.layers[last].name, lat[last], tp.classStats())
			fmt.Fprintf(&table, "%s, %d requests per layer, %d GC cycles, %.1f ms GC pause in all:\n", name, n,
				ms1.NumGC-ms0.NumGC, float64(ms1.PauseTotalNs-ms0.PauseTotalNs)/1e6)
			tails = append(tails, note.Lines()...)
			for j, l := range c.layers {
				alloc := allocPerCall(func(i int) error { return l.fn(i) }, min(n, 200))
				slices.Sort(lat[j])
				p50, p99 := percentile(lat[j], 0.50), percentile(lat[j], 0.99)
				fmt.Fprintf(&table, "  %-26s p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms  %8.1f KiB allocated per request\n",
					l.name, msOf(p50), msOf(p99), msOf(lat[j][len(lat[j])-1]), alloc/1024)
				metric := strings.NewReplacer(" ", "-", ",", "", "+", "").Replace(key + "/" + l.name)
				b.ReportMetric(msOf(p99), metric+"-p99-ms")
			}
		}
	}
	runtime.KeepAlive(ballast)
	fmt.Print(table.String())
	for _, l := range tails {
		fmt.Println("tail:", l)
	}
}

// allocPerCall returns the bytes one call of fn allocates, averaged over
// calls samples.
func allocPerCall(fn func(i int) error, calls int) float64 {
	var a, z runtime.MemStats
	runtime.ReadMemStats(&a)
	for i := range calls {
		_ = fn(i)
	}
	runtime.ReadMemStats(&z)
	return float64(z.TotalAlloc-a.TotalAlloc) / float64(calls)
}

// startSearchProfiles starts the CPU profile and the execution trace the
// flags ask for; the returned func stops them.
func startSearchProfiles(b *testing.B) func() {
	var stops []func()
	if *pathCPU != "" {
		f, err := os.Create(*pathCPU)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); _ = f.Close() })
	}
	if *pathTrace != "" {
		f, err := os.Create(*pathTrace)
		if err != nil {
			b.Fatal(err)
		}
		if err := trace.Start(f); err != nil {
			b.Fatal(err)
		}
		stops = append(stops, func() { trace.Stop(); _ = f.Close() })
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}
