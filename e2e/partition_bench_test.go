package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/bench"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// BenchmarkPartitionedCatchUp projects one generated corpus (bench's, 800
// sessions of 5 turns unless DSHQ_SHARD_BENCH_SESSIONS says otherwise)
// with 1, 2 and 4 projector processes (shards of one partitioning, each its
// own process, all started at once on a caught-up stream) and reports for
// each: the catch-up rate (stream records over the time from the start
// until every shard has applied the stream's last record), the CPU the
// shards spent per 1,000 records (user + system of every shard process),
// each shard's peak RSS (VmHWM), and the latency of queries through a
// query service of that partitioning (sessions.list first pages,
// sessions.trace, sessions.stat, events.search of a common phrase, ranked
// with the corpus's statistics, and sessions.search of a rare phrase,
// merged across the shards). The load average is printed beside: the
// machine is shared. Run on demand:
//
//	go test -run '^$' -bench PartitionedCatchUp -benchtime 1x ./e2e
func BenchmarkPartitionedCatchUp(b *testing.B) {
	sessions := 800
	if v, err := strconv.Atoi(os.Getenv("DSHQ_SHARD_BENCH_SESSIONS")); err == nil && v > 0 {
		sessions = v
	}
	ctx := testCtx(b, 60*time.Minute)
	url, _ := startPlainNATS(b)
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	corpus, err := bench.GenerateCorpus(bench.CorpusConfig{Sessions: sessions, Turns: bench.DefaultTurns, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	writeBenchCorpus(b, ctx, nc, corpus)
	last := streamLastSeq(b, nc)
	b.Logf("corpus: %d sessions, %d events, %d stream records", len(corpus.Sessions), corpus.Events(), last)
	var ids []string
	for _, s := range corpus.Sessions {
		ids = append(ids, s.Header.ID)
	}
	for _, shards := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			for range b.N {
				r := catchUp(b, ctx, url, nc, shards, last, ids, corpus.Rare)
				b.ReportMetric(r.rate, "records/s")
				b.ReportMetric(r.cpuPer1k, "CPU-ms/1k-records")
				b.ReportMetric(slices.Max(r.peaks), "max-shard-peak-RSS-MiB")
				b.Logf("%d shard(s): %.0f records/s (%.1f s), %.1f CPU-ms per 1k records, peak RSS per shard %v MiB, load %s → %s; queries: %s",
					shards, r.rate, r.elapsed.Seconds(), r.cpuPer1k, r.peaks, r.loadBefore, r.loadAfter, r.queries)
			}
		})
	}
}

// writeBenchCorpus writes the corpus as harnesses do (8 writers).
func writeBenchCorpus(b *testing.B, ctx context.Context, nc *nats.Conn, c *bench.Corpus) {
	b.Helper()
	store, err := bus.NewStore(ctx, nc)
	if err != nil {
		b.Fatal(err)
	}
	work := make(chan bench.Session)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if err := writeBenchSession(ctx, store, s); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for _, s := range c.Sessions {
		work <- s
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

func writeBenchSession(ctx context.Context, store *bus.Store, s bench.Session) error {
	var opts []bus.CreateOption
	if s.Header.IsSeeded {
		opts = append(opts, bus.WithInheritedEventCount(s.Inherited))
	}
	h, err := store.Create(ctx, s.Header, opts...)
	if err != nil {
		return err
	}
	for _, batch := range s.Batches {
		if _, err := h.Append(ctx, batch); err != nil {
			return err
		}
	}
	return h.Close(ctx)
}

type catchUpResult struct {
	rate, cpuPer1k        float64
	elapsed               time.Duration
	peaks                 []float64
	loadBefore, loadAfter string
	queries               string
}

// catchUp starts shards projector processes on the caught-up stream, waits
// until each has applied last, then measures queries through a query
// service process; it stops them all.
func catchUp(b *testing.B, ctx context.Context, url string, nc *nats.Conn, shards int, last uint64, ids, rare []string) catchUpResult {
	b.Helper()
	r := catchUpResult{loadBefore: loadAvg()}
	start := time.Now()
	procs := make([]*proc, shards)
	metrics := make([]string, shards)
	for i := range shards {
		args := []string{"--nats-url", url, "--data", b.TempDir(), "--no-feed", "--no-verify", "--metrics", "127.0.0.1:0",
			"--durable", fmt.Sprintf("bench-%dof%d-%d", i, shards, time.Now().UnixNano())}
		if shards > 1 {
			args = append(args, "--shard", strconv.Itoa(i), "--shards", strconv.Itoa(shards))
		}
		procs[i] = startProc(b, fmt.Sprintf("projector %d/%d", i, shards), bins.projector, args, nil)
	}
	for i, p := range procs {
		line := p.waitLine(b, startTimeout, `"projector running"`, func(l string) bool { return strings.Contains(l, `"projector running"`) })
		metrics[i] = "http://" + jsonField(b, line, "metrics") + "/metrics"
	}
	waitFor(b, 50*time.Minute, fmt.Sprintf("%d shards to apply %d records", shards, last), func() (bool, error) {
		for _, m := range metrics {
			if generationOf(m) < float64(last) {
				return false, nil
			}
		}
		return true, nil
	})
	r.elapsed = time.Since(start)
	r.loadAfter = loadAvg()
	r.rate = float64(last) / r.elapsed.Seconds()
	var cpu time.Duration
	for _, p := range procs {
		cpu += procCPU(b, p.cmd.Process.Pid)
		r.peaks = append(r.peaks, vmHWM(b, p.cmd.Process.Pid))
	}
	r.cpuPer1k = float64(cpu.Milliseconds()) / (float64(last) / 1000)

	qargs := []string{"--nats-url", url}
	if shards > 1 {
		qargs = append(qargs, "--shards", strconv.Itoa(shards))
	}
	q := startQuery(b, fmt.Sprintf("query of %d shards", shards), qargs...)
	r.queries = queryLatencies(b, ctx, nc, shards, last, ids, rare)
	q.stop(b, time.Minute)
	for _, p := range procs {
		p.stop(b, time.Minute)
	}
	return r
}

// queryLatencies asks 200 of each kind of question and returns their p50
// and p99.
func queryLatencies(b *testing.B, ctx context.Context, nc *nats.Conn, shards int, last uint64, ids, rare []string) string {
	b.Helper()
	c := query.NewClient(nc)
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []struct {
		name string
		body func() string
	}{
		{wire.EndpointSessionsList, func() string { return fmt.Sprintf(`{"limit":20,"minGeneration":%d}`, last) }},
		{wire.EndpointSessionsTrace, func() string { return fmt.Sprintf(`{"sessionId":%q}`, ids[rng.IntN(len(ids))]) }},
		{wire.EndpointSessionsStat, func() string { return fmt.Sprintf(`{"sessionId":%q}`, ids[rng.IntN(len(ids))]) }},
		{wire.EndpointEventsSearch, func() string {
			return fmt.Sprintf(`{"sessionId":%q,"query":"retry budget","limit":10}`, ids[rng.IntN(len(ids))])
		}},
	}
	kinds = append(kinds, struct {
		name string
		body func() string
	}{wire.EndpointSessionsSearch, func() string { return fmt.Sprintf(`{"query":%q,"limit":10}`, rare[rng.IntN(len(rare))]) }})
	var out []string
	for _, k := range kinds {
		var lat []time.Duration
		for range 200 {
			body := k.body()
			t0 := time.Now()
			reply, err := c.Raw(ctx, k.name, []byte(body))
			if err != nil {
				b.Fatalf("%s %s: %v", k.name, body, err)
			}
			lat = append(lat, time.Since(t0))
			if !json.Valid(reply) {
				b.Fatalf("%s: reply is not JSON", k.name)
			}
		}
		slices.Sort(lat)
		out = append(out, fmt.Sprintf("%s p50 %s p99 %s", k.name, lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*99/100].Round(10*time.Microsecond)))
	}
	return strings.Join(out, ", ")
}

// procCPU reads the user and system CPU time a process has used.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name (in parentheses, which may hold spaces).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// loadAvg returns the 1-minute load average.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
