package fold

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// syntheticSession returns a realistic G2 log of n events: turns of a user
// prompt, request header, steps with assistant tool calls, tool calls and
// results, titles and todos. When compactEvery > 0, a compaction (start,
// summary, a user/message replacing all but the newest surface nodes, end)
// follows every compactEvery events, as long sessions do.
func syntheticSession(tb testing.TB, n, compactEvery int) (dshq.HeaderRecord, []dshq.Event) {
	g := &sessionGen{tb: tb}
	for len(g.events) < n {
		g.turn(compactEvery)
	}
	return g2Header(), g.events[:n]
}

type sessionGen struct {
	tb          testing.TB
	events      []dshq.Event
	surface     []int64
	turnNo      int
	sinceCompct int
}

func (g *sessionGen) add(typ string, data any, surfaceOp any, sources []int64) int64 {
	seq := int64(len(g.events))
	rec := map[string]any{"type": typ, "seq": seq, "time": 1788000000000 + seq*37, "data": data}
	if surfaceOp != nil {
		rec["surfaceOp"] = surfaceOp
	}
	if sources != nil {
		rec["sourceEventSeqs"] = sources
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		g.tb.Fatal(err)
	}
	e, err := record.ParseEvent(raw)
	if err != nil {
		g.tb.Fatal(err)
	}
	g.events = append(g.events, e)
	if surfaceOp == "append" {
		g.surface = append(g.surface, seq)
	}
	g.sinceCompct++
	return seq
}

func (g *sessionGen) turn(compactEvery int) {
	g.turnNo++
	t := g.turnNo
	g.add("turn/start", map[string]any{"turn": t}, nil, nil)
	g.add("user/message", map[string]any{"id": fmt.Sprintf("u-%d", t), "role": "user", "source": map[string]any{"kind": "user"},
		"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("Please look at module %d and fix the failing retry budget test; 中文说明 %d", t, t)}}}, "append", nil)
	if t%10 == 1 {
		g.add("session/title", map[string]any{"title": fmt.Sprintf("Fix module %d", t), "messageSeqs": []int64{int64(len(g.events) - 1)}, "source": map[string]any{"kind": "fallback"}}, nil, nil)
	}
	for step := 1; step <= 3; step++ {
		g.add("step/start", map[string]any{"turn": t, "step": step}, nil, nil)
		if step == 1 {
			g.add("request/header", map[string]any{"header": map[string]any{"config": map[string]any{"provider": "deepseek", "model": "deepseek-v4-flash"}, "system": "You are a coding agent.", "tools": []string{"bash", "read"}}, "reason": "initial"}, nil, nil)
		}
		call := fmt.Sprintf("call_%d_%d", t, step)
		src := map[string]any{"kind": "model", "provider": "deepseek", "model": "deepseek-v4-flash"}
		content := []any{
			map[string]any{"type": "reasoning", "text": "I should read the file and run the tests before changing anything."},
			map[string]any{"type": "text", "text": fmt.Sprintf("Running step %d.", step)},
		}
		if step < 3 {
			content = append(content, map[string]any{"type": "tool-call", "id": call, "name": "bash", "arguments": `{"command":"go test ./..."}`})
		}
		g.add("assistant/message", map[string]any{"turn": t, "step": step, "message": map[string]any{"id": "a-" + call, "role": "assistant", "source": src, "content": content},
			"usage": map[string]any{"inputTokens": 1200, "outputTokens": 80}}, "append", nil)
		if step < 3 {
			cs := g.add("tool/call", map[string]any{"turn": t, "step": step, "callId": call, "name": "bash", "arguments": `{"command":"go test ./..."}`}, nil, nil)
			g.add("tool/result", map[string]any{"turn": t, "step": step, "message": map[string]any{"id": "t-" + call, "role": "user", "source": map[string]any{"kind": "tool", "callId": call},
				"content": []any{map[string]any{"type": "tool-result", "toolCallId": call, "isError": false, "content": []any{map[string]any{"type": "text", "text": "--- FAIL: TestRetryBudget (0.01s)\n    budget_test.go:42: got 2, want 3\nFAIL"}}}}}},
				"append", []int64{cs})
		}
		g.add("step/end", map[string]any{"turn": t, "step": step}, nil, nil)
		if compactEvery > 0 && g.sinceCompct >= compactEvery && len(g.surface) > 3 {
			g.compact()
		}
	}
	g.add("turn/end", map[string]any{"turn": t, "reason": map[string]any{"kind": "completed"}}, nil, nil)
}

// compact replaces all but the newest two surface nodes by a checkpoint.
func (g *sessionGen) compact() {
	shadowed := append([]int64(nil), g.surface[:len(g.surface)-2]...)
	cs := g.add("compaction/start", map[string]any{"compactionId": "c", "turn": g.turnNo}, nil, nil)
	ss := g.add("compaction/summary", map[string]any{"compactionId": "c", "summary": []any{map[string]any{"type": "text", "text": "summary"}},
		"shadowedRange": map[string]any{"start": shadowed[0], "end": shadowed[len(shadowed)-1]}, "shadowedSeqs": shadowed, "shadowedTokenCount": 1000, "provider": "deepseek", "model": "deepseek-v4-flash"}, nil, nil)
	sources := append([]int64{cs, ss}, shadowed...)
	seq := g.add("user/message", map[string]any{"id": fmt.Sprintf("c-%d", cs), "role": "user", "source": map[string]any{"kind": "plugin", "plugin": "compact", "compactionId": "c"},
		"content": []any{map[string]any{"type": "text", "text": "Checkpoint: the retry budget test was investigated."}}},
		map[string]any{"op": "replace", "start": shadowed[0], "end": shadowed[len(shadowed)-1]}, sources)
	g.surface = append([]int64{seq}, g.surface[len(shadowed):]...)
	g.add("compaction/end", map[string]any{"compactionId": "c", "turn": g.turnNo}, nil, nil)
	g.sinceCompct = 0
}

func benchmarkApply(b *testing.B, compactEvery int, level Level) {
	h, events := syntheticSession(b, 10000, compactEvery)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		s := New(h, level)
		for _, e := range events {
			if _, err := s.Apply(e); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(events))/time.Since(start).Seconds(), "events/s")
}

// BenchmarkApply measures Apply throughput over a 10,000-event session,
// append-only and with a compaction about every 20 events, at both levels.
func BenchmarkApply(b *testing.B) {
	b.Run("append-only/lenient", func(b *testing.B) { benchmarkApply(b, 0, Lenient) })
	b.Run("append-only/strict", func(b *testing.B) { benchmarkApply(b, 0, Strict) })
	b.Run("compaction-every-20/lenient", func(b *testing.B) { benchmarkApply(b, 20, Lenient) })
	b.Run("compaction-every-20/strict", func(b *testing.B) { benchmarkApply(b, 20, Strict) })
}

// BenchmarkStateBinary reports the MarshalBinary size of the state of a
// 10,000-event session (state-bytes) and times the encode/decode round trip.
func BenchmarkStateBinary(b *testing.B) {
	for _, every := range []int{0, 20} {
		b.Run(fmt.Sprintf("compact-every-%d", every), func(b *testing.B) {
			h, events := syntheticSession(b, 10000, every)
			r, err := Fold(h, events, Lenient)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var size int
			for range b.N {
				enc, _ := r.State.MarshalBinary()
				var s State
				if err := s.UnmarshalBinary(enc); err != nil {
					b.Fatal(err)
				}
				size = len(enc)
			}
			b.ReportMetric(float64(size), "state-bytes")
			b.ReportMetric(float64(len(r.State.nodes)), "surface-nodes")
		})
	}
}

// TestSyntheticSessionFolds keeps the benchmark input honest: it folds
// under Strict, compacts, and folds incrementally as in one pass.
func TestSyntheticSessionFolds(t *testing.T) {
	h, events := syntheticSession(t, 600, 20)
	r, err := Fold(h, events, Strict)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ReplacedEventSeqs) < 5 {
		t.Fatalf("only %d compactions in the synthetic session", len(r.ReplacedEventSeqs))
	}
	checkIncremental(t, h, events, Strict)
}
