package projection

import (
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq/usage"
)

// cpuTime is the process's CPU time (user and system): on a shared
// machine, what a report costs apart from the wait for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// usageBenchStore fills a store with the usage aggregates of a corpus the
// size of make bench-1m's (1 000 000 events in 16 300 sessions): each
// session spends with one or two models over an hour (6 rows of session,
// model and 15 minutes), 97 800 rows, counted through the batch as the
// projector counts them (rows, totals and cubes). Every fifth session is
// a subagent of the one before.
func usageBenchStore(tb testing.TB, sessions int) (*store, uint32) {
	s, err := openStore(filepath.Join(tb.TempDir(), "p.db"), false, time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.db.Close() })
	base := usage.SlotOf(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := &batch{tx: tx}
		dims := tx.Bucket(bucketUsageSessions)
		for i := range sessions {
			id := fmt.Sprintf("cc-%08d-0000-4000-8000-000000000000", i)
			d := usage.SessionDims{Cwd: fmt.Sprintf("/home/dev/work/repo-%03d", i%200), Machine: fmt.Sprintf("host-%d", i%3), Harness: "claude-code"}
			if i%5 == 4 {
				d.Ancestors = []string{fmt.Sprintf("cc-%08d-0000-4000-8000-000000000000", i-1)}
			}
			if err := dims.Put([]byte(id), encodeUsageDims(d)); err != nil {
				return err
			}
			start := base + uint32(i%30)*96 + uint32(i%90)
			for j := range 6 {
				model := "claude-opus-4-6"
				if j%3 == 2 {
					model = "claude-haiku-4-5-20251001"
				}
				v := int64(i*7+j) % 997 // sessions spend differently
				t := usage.Tokens{Input: 30 + v, Output: 2000 + 3*v, CacheCreation: 9000 + v, CacheCreation1h: 9000 + v, CacheRead: 90000 + 11*v, Calls: 10}
				if err := b.usageAdd(usageRowKey(start+uint32(j/2), id, model, "main"), t, 1); err != nil {
					return err
				}
			}
			if i%1000 == 999 { // a batch's worth
				if err := b.finishUsage(); err != nil {
					return err
				}
			}
		}
		return b.finishUsage()
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s, base
}

// usageBenchReports are the reports BenchmarkUsageReport times: those of
// make bench and the Usage page.
func usageBenchReports(base uint32) []struct {
	name string
	q    usage.Query
} {
	return []struct {
		name string
		q    usage.Query
	}{
		{"daily-by-model", usage.Query{GroupBy: []usage.Dimension{usage.Day, usage.Model}, Location: time.UTC}},
		{"top-sessions", usage.Query{GroupBy: []usage.Dimension{usage.Session}, Rollup: true, Limit: 10, Location: time.UTC}},
		{"projects-under-root", usage.Query{GroupBy: []usage.Dimension{usage.Project}, Prefixes: []string{"/"}, Rollup: true, Limit: 10, Location: time.UTC}},
		{"projects-in-one-week", usage.Query{GroupBy: []usage.Dimension{usage.Project}, Location: time.UTC,
			Since: usage.SlotTime(base + 7*96), Until: usage.SlotTime(base + 14*96)}},
		{"top-sessions-in-one-week", usage.Query{GroupBy: []usage.Dimension{usage.Session}, Rollup: true, Limit: 10, Location: time.UTC,
			Since: usage.SlotTime(base + 7*96), Until: usage.SlotTime(base + 14*96)}},
	}
}

// BenchmarkUsageReport times usage reports over usageBenchStore's
// aggregates, read through the snapshot as usage.report reads them: each
// report as Build plans it (the cubes, the sessions' totals) beside
// BuildScan (the sessions' rows of the range, how every report was read
// before the cubes), alternately in one run. It prints p50 and p99 of
// each, the ratio of their p50s, and the CPU time per report pair.
func BenchmarkUsageReport(b *testing.B) {
	s, base := usageBenchStore(b, 16300)
	prices := usage.Builtin()
	for _, rp := range usageBenchReports(base) {
		b.Run(rp.name, func(b *testing.B) {
			cache := usage.NewDimsCache(1 << 20) // an engine's: the dimensions read once
			var plan, scan []time.Duration
			cpu0 := cpuTime()
			run := func(build func(usage.Query, *usage.Prices, usage.Source, *usage.DimsCache) (usage.Report, error)) time.Duration {
				t0 := time.Now()
				err := s.db.View(func(tx *bolt.Tx) error {
					rep, err := build(rp.q, prices, &snapshot{tx: tx}, cache)
					if err == nil && rep.Totals.Calls == 0 {
						err = fmt.Errorf("no call counted")
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			for b.Loop() {
				plan = append(plan, run(usage.Build))
				scan = append(scan, run(usage.BuildScan))
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(plan)), "cpu-ms/pair")
			p := func(lat []time.Duration, q float64) float64 {
				slices.Sort(lat)
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(p(plan, 0.50), "p50-ms")
			b.ReportMetric(p(plan, 0.99), "p99-ms")
			b.ReportMetric(p(scan, 0.50), "scan-p50-ms")
			b.ReportMetric(p(scan, 0.99), "scan-p99-ms")
			b.ReportMetric(p(scan, 0.50)/max(p(plan, 0.50), 0.001), "scan/plan-p50")
		})
	}
}
