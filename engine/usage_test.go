package engine_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// TestPartitionedUsageIsTheSumOfTheShards asks usage.report of one corpus
// projected whole and partitioned into three shards: every report of the
// partitioned service (the sum of its shards') is the whole projection's,
// and the corpus's generated model calls are all counted.
func TestPartitionedUsageIsTheSumOfTheShards(t *testing.T) {
	st := startPartitioned(t, 3)
	ctx := context.Background()
	last := st.projectors[0].Generation()
	for _, body := range []map[string]any{
		{"groupBy": []string{"day", "model"}, "timeZone": "UTC"},
		// Without roll-up: a shard knows the ancestors of its sessions
		// as far as they are its own (docs/usage.md#the-aggregates).
		{"groupBy": []string{"session"}, "limit": 10000},
		{"groupBy": []string{"project", "harness"}, "prefix": "/"},
		{"groupBy": []string{"month"}, "timeZone": "Asia/Kolkata", "model": "deepseek-v4-flash"},
	} {
		body["minGeneration"] = last
		b, _ := json.Marshal(body)
		var whole, parted wire.UsageReply
		for _, c := range []struct {
			c   *query.Client
			out *wire.UsageReply
		}{{st.whole, &whole}, {st.parted, &parted}} {
			raw, err := c.c.Raw(ctx, wire.EndpointUsageReport, b)
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if err := json.Unmarshal(raw, c.out); err != nil {
				t.Fatal(err)
			}
		}
		if whole.Totals.Calls == 0 || len(whole.Rows) == 0 {
			t.Fatalf("%s: the whole projection counts no call: %+v", b, whole.Totals)
		}
		if len(whole.Rows) != len(parted.Rows) {
			t.Fatalf("%s: %d rows whole, %d partitioned", b, len(whole.Rows), len(parted.Rows))
		}
		for i, w := range whole.Rows {
			p := parted.Rows[i]
			if w.Period != p.Period || w.Tokens != p.Tokens || w.TotalTokens != p.TotalTokens || !near(w.TotalCost, p.TotalCost) {
				t.Errorf("%s: row %d: partitioned %+v, whole %+v", b, i, p, w)
			}
		}
		if whole.Totals.Tokens != parted.Totals.Tokens {
			t.Errorf("%s: totals partitioned %+v, whole %+v", b, parted.Totals, whole.Totals)
		}
	}
	// A filter that is not a time zone is refused as one shard refuses it.
	if _, err := st.parted.Raw(ctx, wire.EndpointUsageReport, []byte(`{"timeZone":"Mars/Olympus"}`)); err == nil {
		t.Error("an unknown time zone was answered")
	}
}

func near(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return math.Abs(*a-*b) <= 1e-9*math.Max(1, math.Abs(*a))
}
