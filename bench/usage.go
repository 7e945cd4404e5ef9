package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/dshq/dshq/query/wire"
)

// usageTargetMs is issue 26's bound on a usage report over 1M events.
const usageTargetMs = 50

// measureUsage times usage.report over the whole corpus (the generated
// assistant messages state usage): daily by model, the top sessions, and
// the projects under a prefix, each beside the 50 ms target. The report
// reads the projection's aggregates, so its cost follows the number of
// (session, model, 15 minutes) rows, not the events.
func (r *runner) measureUsage(ctx context.Context) error {
	n := r.cfg.Samples
	reports := []struct {
		name string
		body wire.UsageBody
	}{
		{"usage.report daily by model", wire.UsageBody{GroupBy: []string{"day", "model"}, TimeZone: "UTC"}},
		{"usage.report top 10 sessions (rolled up)", wire.UsageBody{GroupBy: []string{"session"}, Rollup: true, Limit: 10, TimeZone: "UTC"}},
		{"usage.report projects under /", wire.UsageBody{GroupBy: []string{"project"}, Prefix: []string{"/"}, TimeZone: "UTC"}},
	}
	r.rep.section = sectionRead
	for _, rp := range reports {
		r.progress("latency: %s, %d samples", rp.name, n)
		runtime.GC()
		if _, err := r.client.Usage(ctx, rp.body); err != nil { // warm-up
			return fmt.Errorf("%s: %w", rp.name, err)
		}
		lat := make([]time.Duration, 0, n)
		for range n {
			t0 := time.Now()
			rep, err := r.client.Usage(ctx, rp.body)
			if err != nil {
				return fmt.Errorf("%s: %w", rp.name, err)
			}
			lat = append(lat, time.Since(t0))
			if rep.Totals.Calls == 0 {
				return fmt.Errorf("%s: the report counts no model call", rp.name)
			}
		}
		r.rep.add(rp.name+" p50 (ms)", ms(percentile(lat, 0.50)), "target (issue 26, p99)", usageTargetMs)
		r.rep.add(rp.name+" p99 (ms)", ms(percentile(lat, 0.99)), "target (issue 26, p99)", usageTargetMs)
	}
	return nil
}
