package projection

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq/usage"
)

// TestUsagePlansAnswerAsTheRowsScan builds reports from the aggregates
// (the cubes, the sessions' and roots' totals, as usage.Build plans them)
// and from the sessions' rows (usage.BuildScan): every report is the same,
// tokens exactly and costs within rounding.
func TestUsagePlansAnswerAsTheRowsScan(t *testing.T) {
	s, base := usageBenchStore(t, 700)
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	week := func(q usage.Query) usage.Query {
		q.Since, q.Until = usage.SlotTime(base+7*96+37), usage.SlotTime(base+14*96+5)
		return q
	}
	g := func(d ...usage.Dimension) []usage.Dimension { return d }
	cases := []struct {
		name string
		q    usage.Query
	}{
		{"daily by model", usage.Query{GroupBy: g(usage.Day, usage.Model)}},
		{"daily in a half-hour zone", usage.Query{GroupBy: g(usage.Day), Location: kolkata}},
		{"weekly by machine", usage.Query{GroupBy: g(usage.Week, usage.Machine)}},
		{"monthly by harness in a week", week(usage.Query{GroupBy: g(usage.Month, usage.Harness)})},
		{"tenants", usage.Query{GroupBy: g(usage.Tenant)}},
		{"projects under a prefix, top 3", usage.Query{GroupBy: g(usage.Project), Prefixes: []string{"/home/dev/work/"}, Limit: 3}},
		{"projects of a machine", usage.Query{GroupBy: g(usage.Project), Machines: []string{"host-1"}}},
		{"projects by day in a week", week(usage.Query{GroupBy: g(usage.Project, usage.Day)})},
		{"branches of a model", usage.Query{GroupBy: g(usage.Branch), Models: []string{"claude-haiku-4-5-20251001"}}},
		{"models", usage.Query{GroupBy: g(usage.Model)}},
		{"top sessions rolled up", usage.Query{GroupBy: g(usage.Session), Rollup: true, Limit: 10}},
		{"top sessions of a model rolled up", usage.Query{GroupBy: g(usage.Session), Rollup: true, Limit: 7, Models: []string{"claude-opus-4-6"}}},
		{"every session on its own", usage.Query{GroupBy: g(usage.Session)}},
		{"sessions of a machine rolled up", usage.Query{GroupBy: g(usage.Session), Rollup: true, Limit: 10, Machines: []string{"host-2"}}},
		{"sessions of a machine", usage.Query{GroupBy: g(usage.Session), Limit: 10, Machines: []string{"host-2"}}},
		{"a session and its subagent", usage.Query{GroupBy: g(usage.Session, usage.Model), Rollup: true,
			Sessions: []string{"cc-00000003-0000-4000-8000-000000000000"}}},
		{"sessions by day in a week", week(usage.Query{GroupBy: g(usage.Session, usage.Day), Rollup: true, Limit: 20})},
		{"machine and project", usage.Query{GroupBy: g(usage.Machine, usage.Project)}},
	}
	prices := usage.Builtin()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.q.Location == nil {
				c.q.Location = time.UTC
			}
			var plan, scan usage.Report
			err := s.db.View(func(tx *bolt.Tx) error {
				var err error
				if plan, err = usage.Build(c.q, prices, &snapshot{tx: tx}, nil); err != nil {
					return err
				}
				scan, err = usage.BuildScan(c.q, prices, &snapshot{tx: tx}, nil)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if scan.Totals.Calls == 0 || len(scan.Rows) == 0 {
				t.Fatalf("the scan counts nothing: %+v", scan.Totals)
			}
			if err := sameReport(plan, scan); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// sameReport compares two reports as JSON: numbers within a relative
// 1e-9 (costs are summed in map order), everything else exactly.
func sameReport(a, b usage.Report) error {
	var x, y any
	for _, p := range []struct {
		r   usage.Report
		out *any
	}{{a, &x}, {b, &y}} {
		raw, err := json.Marshal(p.r)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, p.out); err != nil {
			return err
		}
	}
	return sameJSON("report", x, y)
}

func sameJSON(path string, x, y any) error {
	switch xv := x.(type) {
	case float64:
		yv, ok := y.(float64)
		if !ok || math.Abs(xv-yv) > 1e-9*math.Max(1, math.Abs(xv)) {
			return fmt.Errorf("%s: %v, want %v", path, x, y)
		}
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok || len(xv) != len(yv) {
			return fmt.Errorf("%s: %v, want %v", path, x, y)
		}
		for k := range xv {
			if err := sameJSON(path+"."+k, xv[k], yv[k]); err != nil {
				return err
			}
		}
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return fmt.Errorf("%s: %d items, want %d", path, len(xv), len(yv))
		}
		for i := range xv {
			if err := sameJSON(fmt.Sprintf("%s[%d]", path, i), xv[i], yv[i]); err != nil {
				return err
			}
		}
	default:
		if x != y {
			return fmt.Errorf("%s: %v, want %v", path, x, y)
		}
	}
	return nil
}
