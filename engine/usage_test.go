package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/projection"
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

// TestPartitionedUsageRollsUpAcrossShards projects a corpus with a chain of
// sessions — a root, its subagent and the subagent's own — each on
// another shard than its parent, whole and partitioned into three shards:
// every report, rolled up or not and cut to a limit, is the whole
// projection's, and the root's rolled-up total is the three sessions' own.
func TestPartitionedUsageRollsUpAcrossShards(t *testing.T) {
	env := testenv.Start(t)
	writeCorpus(t, env)
	chain := usageChain(t, env, 3)
	projectors := []*projection.Projector{serveProjector(t, env, 0, 1)}
	for i := range 3 {
		projectors = append(projectors, serveProjector(t, env, i, 3))
	}
	info, err := env.JS.Stream(context.Background(), dshq.SessionStream)
	if err != nil {
		t.Fatal(err)
	}
	last := info.CachedInfo().State.LastSeq
	for _, p := range projectors {
		testenv.WaitGeneration(t, p, last)
	}
	whole := query.NewClient(env.Conn, query.WithSubjectPrefix(dshq.ShardSubjectPrefix(dshq.DefaultShard)))
	parted := servePartitioned(t, env, 3)
	ask := func(t *testing.T, c *query.Client, body map[string]any) wire.UsageReply {
		return usageReply(t, c, last, body)
	}
	cases := []struct {
		name string
		body map[string]any
	}{
		{"the top sessions rolled up", map[string]any{"groupBy": []string{"session"}, "rollup": true, "limit": 3}},
		{"every session rolled up", map[string]any{"groupBy": []string{"session"}, "rollup": true}},
		{"a subagent with its own, rolled up", map[string]any{"groupBy": []string{"session", "model"}, "rollup": true, "sessionIds": chain[1:2]}},
		{"the chain's sessions on their own", map[string]any{"groupBy": []string{"session"}, "sessionIds": chain}},
		{"the first days", map[string]any{"groupBy": []string{"day", "model"}, "timeZone": "UTC", "limit": 2}},
		{"the top projects", map[string]any{"groupBy": []string{"project"}, "limit": 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, p := ask(t, whole, c.body), ask(t, parted, c.body)
			if w.Totals.Calls == 0 || len(w.Rows) == 0 {
				t.Fatalf("the whole projection counts no call: %+v", w.Totals)
			}
			if len(w.Rows) != len(p.Rows) || w.Truncated != p.Truncated {
				t.Fatalf("%d rows (truncated %v) partitioned, %d (%v) whole", len(p.Rows), p.Truncated, len(w.Rows), w.Truncated)
			}
			for i, wr := range w.Rows {
				pr := p.Rows[i]
				if wr.Period != pr.Period || wr.Tokens != pr.Tokens || wr.Calls != pr.Calls || !near(wr.TotalCost, pr.TotalCost) {
					t.Errorf("row %d: partitioned %+v, whole %+v", i, pr, wr)
				}
			}
			if w.Totals.Tokens != p.Totals.Tokens || w.Totals.Calls != p.Totals.Calls || !near(w.Totals.TotalCost, p.Totals.TotalCost) {
				t.Errorf("totals partitioned %+v, whole %+v", p.Totals, w.Totals)
			}
		})
	}
	t.Run("the root's total is its chain's", func(t *testing.T) {
		own := ask(t, parted, map[string]any{"groupBy": []string{"session"}, "sessionIds": chain})
		up := ask(t, parted, map[string]any{"groupBy": []string{"session"}, "rollup": true, "sessionIds": chain[:1]})
		if len(own.Rows) != len(chain) || len(up.Rows) != 1 || up.Rows[0].Period != chain[0] {
			t.Fatalf("own rows %d, rolled-up rows %+v", len(own.Rows), up.Rows)
		}
		if up.Rows[0].Tokens != own.Totals.Tokens {
			t.Errorf("the root's rolled-up tokens %+v, its chain's %+v", up.Rows[0].Tokens, own.Totals.Tokens)
		}
		top := ask(t, parted, map[string]any{"groupBy": []string{"session"}, "rollup": true, "limit": 1})
		if len(top.Rows) != 1 || top.Rows[0].Period != chain[0] {
			t.Errorf("the top session rolled up is %+v, want the chain's root %s", top.Rows, chain[0])
		}
	})
}

// usageChain writes n deepseek-harness sessions, each the child of the one
// before and held by another of three shards than its parent, each with a
// model call larger than any corpus session's. It returns their ids, the
// root first.
func usageChain(t *testing.T, env *testenv.Env, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprintf("us-chain-%d", i)
		if len(ids) > 0 && dshq.ShardOf(id, 3) == dshq.ShardOf(ids[len(ids)-1], 3) {
			continue
		}
		parent := ""
		if len(ids) > 0 {
			parent = fmt.Sprintf(`,"parentSession":%q`, ids[len(ids)-1])
		}
		at := int64(1_790_000_000_000 + 1000*len(ids))
		log := fmt.Sprintf(`{"type":"session","version":2,"id":%q,"createdAt":%d,"cwd":"/work/chain"%s,"isSeeded":false,"delegationDepth":%d}
{"type":"turn/start","seq":0,"time":%d,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":%d,"data":{"turn":1,"step":1}}
{"type":"assistant/message","seq":2,"time":%d,"data":{"turn":1,"step":1,"message":{"id":"m-a1","role":"assistant","source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"content":[{"type":"text","text":"done"}]},"usage":{"inputTokens":40000,"outputTokens":900,"cacheReadTokens":90000}},"surfaceOp":"append"}
{"type":"step/end","seq":3,"time":%d,"data":{"turn":1,"step":1}}
{"type":"turn/end","seq":4,"time":%d,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
			id, at, parent, len(ids), at+1, at+2, at+3, at+4, at+5)
		env.PublishLog(t, []byte(log))
		ids = append(ids, id)
	}
	return ids
}

// usageRaw asks c for a usage report of body at generation gen or later
// and returns the reply's JSON.
func usageRaw(t *testing.T, c *query.Client, gen uint64, body map[string]any) []byte {
	t.Helper()
	body["minGeneration"] = gen
	b, _ := json.Marshal(body)
	raw, err := c.Raw(context.Background(), wire.EndpointUsageReport, b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return raw
}

// usageReply is usageRaw's reply, decoded.
func usageReply(t *testing.T, c *query.Client, gen uint64, body map[string]any) wire.UsageReply {
	t.Helper()
	var out wire.UsageReply
	if err := json.Unmarshal(usageRaw(t, c, gen, body), &out); err != nil {
		t.Fatal(err)
	}
	return out
}
