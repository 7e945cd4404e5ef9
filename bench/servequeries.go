package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// serveQueries runs Config.Samples calls of each query class — every search
// class, events.read and a usage report — through a query client against
// the serve process after its load, so that the memory peaks sampled
// meanwhile include what searching the whole corpus holds. Their latencies
// are progress lines only: the rows beside references are the in-process
// pipeline's (measureQueries).
func (r *runner) serveQueries(ctx context.Context, client *query.Client) error {
	n := r.cfg.Samples
	sessions := r.corpus.Sessions
	pick := make([]int, n) // the session of sample i
	common := make([]string, n)
	seqs := make([]int64, n)
	for i := range n {
		pick[i] = r.rng.IntN(len(sessions))
		common[i] = r.corpus.Common[r.rng.IntN(len(r.corpus.Common))]
		seqs[i] = int64(r.rng.IntN(max(1, sessions[pick[i]].Events())))
	}
	search := func(i int, q string, filtered bool) (int, error) {
		req := dshq.SessionSearchRequest{Query: q}
		if filtered {
			cwd, _ := sessions[pick[i]].Header.CwdOrEmpty()
			current := string(dshq.SurfaceCurrent)
			req.SessionFilters = []dshq.Filter{{Kind: dshq.FilterCwd, Values: []*string{&cwd}}}
			req.EventFilters = []dshq.Filter{{Kind: dshq.FilterSurface, Values: []*string{&current}}}
		}
		page, err := client.SearchSessions(ctx, req)
		if err != nil {
			return 0, err
		}
		return len(page.Items), nil
	}
	classes := []struct {
		name    string
		mustHit bool // every call finds something; otherwise one call must
		fn      func(i int) (int, error)
	}{
		{"sessions.search rare phrase", true, func(i int) (int, error) { return search(i, r.corpus.Rare[pick[i]], false) }},
		{"sessions.search common phrase", false, func(i int) (int, error) { return search(i, common[i], false) }},
		{"sessions.search common phrase, cwd+surface filters", false, func(i int) (int, error) { return search(i, common[i], true) }},
		{"events.search common phrase", false, func(i int) (int, error) {
			page, err := client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: sessions[pick[i]].Header.ID, Query: common[i]})
			if err != nil {
				return 0, err
			}
			return len(page.Items), nil
		}},
		{"events.read ±5", true, func(i int) (int, error) {
			w, err := client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: sessions[pick[i]].Header.ID, Seq: seqs[i], Before: 5, After: 5})
			if err != nil {
				return 0, err
			}
			return len(w.Events), nil
		}},
		{"usage.report daily by model", true, func(int) (int, error) {
			rep, err := client.Usage(ctx, wire.UsageBody{GroupBy: []string{"day", "model"}, TimeZone: "UTC"})
			if err != nil {
				return 0, err
			}
			return int(rep.Totals.Calls), nil
		}},
	}
	for _, c := range classes {
		lat := make([]time.Duration, 0, n)
		found := 0
		for i := range n {
			t0 := time.Now()
			hits, err := c.fn(i)
			if err != nil {
				return fmt.Errorf("dshq serve: %s: %w", c.name, err)
			}
			lat = append(lat, time.Since(t0))
			if c.mustHit && hits == 0 {
				return fmt.Errorf("dshq serve: %s: sample %d found nothing", c.name, i)
			}
			found += min(hits, 1)
		}
		if found == 0 {
			return fmt.Errorf("dshq serve: %s: no call of %d found anything", c.name, n)
		}
		r.progress("dshq serve: %s, %d requests after the load: p50 %.2f ms, p99 %.2f ms", c.name, n, ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99)))
	}
	return nil
}
