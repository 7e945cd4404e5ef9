package engine_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/claudecode"
	"github.com/dshq/dshq/capture/codex"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// TestPartitionedUsageCountsSharedCallsOnce imports sessions that record
// the same model calls — a Claude Code subagent its parent's agent_progress
// records mirror, a resumed transcript copying its predecessor's messages,
// a Codex fork replaying its parent's lines — each on another of three
// shards than the session it shares calls with, in both import orders.
// Every usage report of the partitioned service is byte for byte the whole
// projection's, which counts each call once.
func TestPartitionedUsageCountsSharedCallsOnce(t *testing.T) {
	files, pairs := sharedCallFiles(t)
	for _, order := range []struct {
		name  string
		files []string
		batch int // the shards' batch size (0: the default)
	}{
		{"parents first", files, 0},
		{"children first", reversed(files), 0},
		// What a shard keeps of the others' sessions between batches
		// is stored and read back.
		{"children first, a record a batch", reversed(files), 1},
	} {
		t.Run(order.name, func(t *testing.T) {
			env := testenv.Start(t)
			published := map[string]bool{}
			for _, f := range order.files {
				for _, id := range publishFile(t, env, f) {
					published[id] = true
				}
			}
			for _, p := range pairs {
				if !published[p[0]] || !published[p[1]] || dshq.ShardOf(p[0], 3) == dshq.ShardOf(p[1], 3) {
					t.Fatalf("sessions %s and %s are not both published on different shards (published %v)", p[0], p[1], published)
				}
			}
			projectors := []*projection.Projector{serveProjector(t, env, 0, 1)}
			var opts []projection.Option
			if order.batch > 0 {
				opts = append(opts, projection.WithBatchSize(order.batch))
			}
			for i := range 3 {
				projectors = append(projectors, serveProjector(t, env, i, 3, opts...))
			}
			last := env.Last()
			for _, p := range projectors {
				testenv.WaitGeneration(t, p, last)
			}
			whole := query.NewClient(env.Conn, query.WithSubjectPrefix(dshq.ShardSubjectPrefix(dshq.DefaultShard)))
			parted := servePartitioned(t, env, 3)
			ask := func(t *testing.T, c *query.Client, body map[string]any) []byte {
				t.Helper()
				body["timeZone"] = "UTC"
				// Whole-dollar prices per token: a cost added across
				// shards is exactly the one projection's.
				body["prices"] = json.RawMessage(`{"models":{
					"claude-test-1":{"input":1e6,"output":2e6,"cacheWrite":3e6,"cacheRead":1e6},
					"gpt-test-1":{"input":1e6,"output":2e6,"cacheRead":1e6}}}`)
				return usageRaw(t, c, last, body)
			}
			var total wire.UsageReply
			if err := json.Unmarshal(ask(t, whole, map[string]any{"groupBy": []string{"model"}}), &total); err != nil {
				t.Fatal(err)
			}
			if total.Totals.Calls != sharedCallsDistinct {
				t.Fatalf("the whole projection counts %d calls, want the %d distinct ones", total.Totals.Calls, sharedCallsDistinct)
			}
			for _, c := range []struct {
				name string
				body map[string]any
			}{
				{"by day and model", map[string]any{"groupBy": []string{"day", "model"}}},
				{"by model", map[string]any{"groupBy": []string{"model"}}},
				{"by session", map[string]any{"groupBy": []string{"session"}}},
				{"by session rolled up", map[string]any{"groupBy": []string{"session"}, "rollup": true}},
				{"by session and day", map[string]any{"groupBy": []string{"session", "day"}}},
				{"by project and harness", map[string]any{"groupBy": []string{"project", "harness"}}},
				{"by branch", map[string]any{"groupBy": []string{"branch"}}},
			} {
				t.Run(c.name, func(t *testing.T) {
					w, p := ask(t, whole, c.body), ask(t, parted, c.body)
					if !bytes.Equal(w, p) {
						t.Errorf("partitioned %s\none shard   %s", p, w)
					}
				})
			}
		})
	}
}

// TestPartitionedUsageOfTheHarnessCorpus imports the agent-harnesses
// corpus's Claude Code and Codex files (their subagents, mirrors and
// streamed messages) into one projection and three shards: every report of
// the partitioned service has the one projection's rows, tokens and calls
// (and costs, added across shards, within rounding).
func TestPartitionedUsageOfTheHarnessCorpus(t *testing.T) {
	files, err := corpus.HarnessFiles(corpus.RequireHarnesses(t))
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Start(t)
	held := map[int]int{}
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !follow.Harness(capture.Detect(f.Path, data)) {
			continue
		}
		for _, id := range publishFile(t, env, f.Path) {
			held[dshq.ShardOf(id, 3)]++
		}
	}
	if len(held) != 3 {
		t.Fatalf("the corpus's sessions do not span the shards: %v", held)
	}
	projectors := []*projection.Projector{serveProjector(t, env, 0, 1)}
	for i := range 3 {
		projectors = append(projectors, serveProjector(t, env, i, 3))
	}
	last := env.Last()
	for _, p := range projectors {
		testenv.WaitGeneration(t, p, last)
	}
	whole := query.NewClient(env.Conn, query.WithSubjectPrefix(dshq.ShardSubjectPrefix(dshq.DefaultShard)))
	parted := servePartitioned(t, env, 3)
	ask := func(t *testing.T, c *query.Client, body map[string]any) wire.UsageReply {
		t.Helper()
		body["timeZone"] = "UTC"
		return usageReply(t, c, last, body)
	}
	for _, c := range []struct {
		name string
		body map[string]any
	}{
		{"by day and model", map[string]any{"groupBy": []string{"day", "model"}}},
		{"by session", map[string]any{"groupBy": []string{"session"}}},
		{"by session rolled up", map[string]any{"groupBy": []string{"session"}, "rollup": true}},
		{"by project and harness", map[string]any{"groupBy": []string{"project", "harness"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, p := ask(t, whole, c.body), ask(t, parted, c.body)
			if w.Totals.Calls == 0 {
				t.Fatal("the whole projection counts no call")
			}
			if len(w.Rows) != len(p.Rows) {
				t.Fatalf("%d rows partitioned, %d whole", len(p.Rows), len(w.Rows))
			}
			for i, wr := range w.Rows {
				pr := p.Rows[i]
				if wr.Period != pr.Period || wr.Tokens != pr.Tokens || wr.Calls != pr.Calls || !near(wr.TotalCost, pr.TotalCost) {
					t.Errorf("row %d: partitioned %+v, whole %+v", i, pr, wr)
				}
			}
			if w.Totals.Tokens != p.Totals.Tokens || w.Totals.Calls != p.Totals.Calls {
				t.Errorf("totals partitioned %+v, whole %+v", p.Totals, w.Totals)
			}
		})
	}
}

// sharedCallsDistinct is the number of distinct model calls of
// sharedCallFiles: the parent's one, the subagent's two (both mirrored),
// the resumed transcript's own (beside its copy of the parent's), the Codex
// parent's two token counts and the fork's own (beside its replay of them).
const sharedCallsDistinct = 1 + 2 + 1 + 2 + 1

// sharedCallFiles writes the Claude Code and Codex files of
// TestPartitionedUsageCountsSharedCallsOnce, with session ids that put
// every pair of sessions sharing calls on different ones of three shards.
// It returns them parents first, and the pairs' session ids.
func sharedCallFiles(t *testing.T) (files []string, pairs [][2]string) {
	t.Helper()
	apart := func(prefix string, other string, suffix func(string) string) string {
		for i := 0; ; i++ {
			u := fmt.Sprintf("%s-0000-4000-8000-%012d", prefix, i)
			if dshq.ShardOf(suffix(u), 3) != dshq.ShardOf(other, 3) {
				return u
			}
		}
	}
	id := func(p string) func(string) string { return func(u string) string { return p + u } }
	cc, cx := claudecode.Prefix, codex.Prefix
	parent := apart("aaaaaaaa", "", id(cc))
	agent := apart("sub", cc+parent, func(a string) string { return cc + parent + "-agent-" + a })
	resumed := apart("bbbbbbbb", cc+parent, id(cc))
	cxParent := apart("cccccccc", "", id(cx))
	cxFork := apart("dddddddd", cx+cxParent, id(cx))
	pairs = [][2]string{{cc + parent, cc + parent + "-agent-" + agent}, {cc + parent, cc + resumed}, {cx + cxParent, cx + cxFork}}

	dir := t.TempDir()
	project := filepath.Join(dir, ".claude", "projects", "-work-gamma")
	write := func(path, text string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.TrimSpace(text)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	line := func(sid, rest string) string {
		return fmt.Sprintf(`{"sessionId":%q,"cwd":"/work/gamma","gitBranch":"main","version":"2.1.39",%s}`, sid, rest)
	}
	assistant := func(uuid, at, msg, text string, in, out, cw, cr int) string {
		return fmt.Sprintf(`"type":"assistant","uuid":%q,"timestamp":%q,"requestId":"req_%s","message":{"id":"msg_%s","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":%q}],"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":%d}}`,
			uuid, at, msg, msg, text, in, cw, cr, out)
	}
	mirror := func(uuid, at, msg, text string, in, out int) string {
		return fmt.Sprintf(`"type":"progress","uuid":%q,"timestamp":%q,"toolUseID":"toolu_1","parentToolUseID":"toolu_1","data":{"type":"agent_progress","agentId":%q,"message":{"type":"assistant","timestamp":%q,"requestId":"req_%s","message":{"id":"msg_%s","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":%q}],"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":%d}}}}`,
			uuid, at, agent, at, msg, msg, text, in, out)
	}
	user := func(uuid, at, text string) string {
		return fmt.Sprintf(`"type":"user","uuid":%q,"timestamp":%q,"message":{"role":"user","content":%q}`, uuid, at, text)
	}
	sub := func(sid, rest string) string {
		return fmt.Sprintf(`{"sessionId":%q,"agentId":%q,"isSidechain":true,"cwd":"/work/gamma","gitBranch":"main","version":"2.1.39",%s}`, sid, agent, rest)
	}
	parentFile := write(filepath.Join(project, parent+".jsonl"), strings.Join([]string{
		line(parent, user("u1", "2026-04-01T09:00:00.000Z", "Count the retry sites.")),
		line(parent, assistant("a1", "2026-04-01T09:00:02.000Z", "P1", "Delegating.", 10, 20, 100, 1000)),
		line(parent, mirror("p1", "2026-04-01T09:00:05.000Z", "S1", "Looking.", 4, 9)),
		line(parent, mirror("p2", "2026-04-01T09:00:07.000Z", "S2", "Three.", 5, 11)),
		line(parent, user("u2", "2026-04-01T09:00:08.000Z", "Thanks.")),
	}, "\n"))
	agentFile := write(filepath.Join(project, parent, "subagents", "agent-"+agent+".jsonl"), strings.Join([]string{
		sub(parent, user("s0", "2026-04-01T09:00:04.000Z", "Count retry sites.")),
		sub(parent, assistant("s1", "2026-04-01T09:00:05.000Z", "S1", "Looking.", 4, 9, 0, 0)),
		sub(parent, assistant("s2", "2026-04-01T09:00:07.000Z", "S2", "Three.", 5, 11, 0, 0)),
	}, "\n"))
	resumedFile := write(filepath.Join(project, resumed+".jsonl"), strings.Join([]string{
		line(resumed, user("u1", "2026-04-01T09:00:00.000Z", "Count the retry sites.")),
		line(resumed, assistant("a1", "2026-04-01T09:00:02.000Z", "P1", "Delegating.", 10, 20, 100, 1000)),
		line(resumed, user("u3", "2026-04-02T10:00:00.000Z", "Now fix them.")),
		line(resumed, assistant("a3", "2026-04-02T10:00:03.000Z", "R1", "Fixed.", 7, 30, 200, 2000)),
	}, "\n"))

	sessions := filepath.Join(dir, ".codex", "sessions", "2026", "04", "03")
	meta := func(id, extra string) string {
		return fmt.Sprintf(`{"timestamp":"2026-04-03T08:00:00.000Z","type":"session_meta","payload":{"id":%q,"timestamp":"2026-04-03T08:00:00.000Z","cwd":"/work/delta","originator":"codex_cli_rs","cli_version":"0.104.0","source":"cli","model_provider":"openai"%s,"git":{"commit_hash":"abc","branch":"trunk"}}}`, id, extra)
	}
	count := func(at string, in, cached, out, lin, lcached, lout int) string {
		return fmt.Sprintf(`{"timestamp":%q,"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":%d,"cached_input_tokens":%d,"output_tokens":%d,"reasoning_output_tokens":0,"total_tokens":%d},"last_token_usage":{"input_tokens":%d,"cached_input_tokens":%d,"output_tokens":%d,"reasoning_output_tokens":0,"total_tokens":%d}}}}`,
			at, in, cached, out, in+out, lin, lcached, lout, lin+lout)
	}
	turn := `{"timestamp":"2026-04-03T08:00:01.000Z","type":"turn_context","payload":{"turn_id":"t1","cwd":"/work/delta","model":"gpt-test-1"}}`
	parentLines := []string{
		turn,
		count("2026-04-03T08:00:05.000Z", 1000, 400, 100, 1000, 400, 100),
		count("2026-04-03T08:01:05.000Z", 1600, 500, 180, 600, 100, 80),
	}
	cxParentFile := write(filepath.Join(sessions, "rollout-2026-04-03T08-00-00-"+cxParent+".jsonl"),
		strings.Join(append([]string{meta(cxParent, "")}, parentLines...), "\n"))
	forkLines := append([]string{meta(cxFork, fmt.Sprintf(`,"forked_from_id":%q`, cxParent)), meta(cxParent, "")}, parentLines...)
	forkLines = append(forkLines,
		`{"timestamp":"2026-04-03T09:00:01.000Z","type":"turn_context","payload":{"turn_id":"t2","cwd":"/work/delta","model":"gpt-test-1"}}`,
		count("2026-04-03T09:00:05.000Z", 2000, 600, 250, 400, 100, 70))
	cxForkFile := write(filepath.Join(sessions, "rollout-2026-04-03T09-00-00-"+cxFork+".jsonl"), strings.Join(forkLines, "\n"))
	return []string{parentFile, agentFile, resumedFile, cxParentFile, cxForkFile}, pairs
}

// publishFile converts a harness file as dshq import does and publishes
// its sessions' logs. It returns their ids.
func publishFile(t *testing.T, env *testenv.Env, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	format := capture.Detect(path, data)
	if !follow.Harness(format) {
		t.Fatalf("%s: not a harness file (%v)", path, format)
	}
	updates, err := capture.Convert(follow.NewConverter(format, path, nil), data)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := capture.Collect(updates)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range logs {
		var b bytes.Buffer
		b.Write(l.Header.Raw)
		for _, e := range l.Events {
			b.WriteByte('\n')
			b.Write(e.Raw)
		}
		id, _ := env.PublishLog(t, b.Bytes())
		ids = append(ids, id)
	}
	return ids
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}
