package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dshq/dshq/query"
)

// BenchmarkHarnessesToSearchable measures the whole system with real
// processes: per iteration, four harness processes write their sessions
// concurrently through the deployment example's nats-server (harness
// credential, sync_interval always), and the iteration ends when `dshq
// serve` has projected every record (a query with minGeneration answers).
// It reports records/s from the first publish to searchable, and the
// latency of one sessions.search on the grown corpus.
//
//	go test -run '^$' -bench HarnessesToSearchable -benchtime 5x ./e2e/
func BenchmarkHarnessesToSearchable(b *testing.B) {
	url, _ := startNATS(b)
	startServe(b, "dshq serve", serveArgs(url, b.TempDir()))
	trusted := connectTrusted(b, url)
	q := query.NewClient(trusted)
	dir := b.TempDir()
	var records uint64
	var elapsed time.Duration
	start := streamLastSeq(b, trusted)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sims := make([]*proc, numSims)
		for j := range sims {
			sims[j] = startProc(b, fmt.Sprintf("harnesssim %d.%d", i, j), bins.harnesssim,
				append(simAuth(url, j), "--index", strconv.Itoa(j), "--id-prefix", fmt.Sprintf("i%d-", i),
					"--facts", filepath.Join(dir, fmt.Sprintf("%d-%d.json", i, j)),
					"--bulk", strconv.Itoa(simBulk), "--turns", strconv.Itoa(simTurns)), nil)
		}
		for _, s := range sims {
			if err := s.wait(b, 2*time.Minute); err != nil {
				b.Fatalf("%s: %v", s.name, err)
			}
		}
		last := streamLastSeq(b, trusted)
		waitCaughtUp(b, q, last)
		elapsed += time.Since(t0)
		records += last - start
		start = last
	}
	b.StopTimer()
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(records)/float64(b.N), "records/op")

	ctx := testCtx(b, time.Minute)
	const searches = 50
	t0 := time.Now()
	for i := 0; i < searches; i++ {
		if _, err := q.SearchSessions(ctx, dshqSearch("migration plan")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/searches/1000, "ms/search")
}
