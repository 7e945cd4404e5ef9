package web

import (
	"context"
	"fmt"
	"github.com/dshq/dshq/internal/numfmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/usage"
)

// importHarnessFile converts and stores a Claude Code or Codex file of the
// repository's capture testdata, as dshq import does.
func (s *stack) importHarnessFile(t testing.TB, f capture.Format, rel string) follow.FileResult {
	t.Helper()
	path := filepath.Join("..", "capture", rel)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := follow.Import(testContext(t), s.store, f, path, data)
	if err != nil {
		t.Fatalf("import %s: %v", rel, err)
	}
	return res
}

const (
	ccTurns = "cc-7d1c2a40-0000-4000-8000-00000000a001"
	codexID = "codex-0a0b0c0d-1111-4222-8333-444455556666"
)

// seedHarnesses stores the Claude Code transcript and the Codex rollout of
// capture's testdata and waits for the projection.
func seedHarnesses(t *testing.T, s *stack) {
	t.Helper()
	s.importHarnessFile(t, capture.FormatClaudeCode, "claudecode/testdata/turns.jsonl")
	s.importHarnessFile(t, capture.FormatClaudeCode, "claudecode/testdata/rewind.jsonl")
	s.importHarnessFile(t, capture.FormatCodex, "codex/testdata/rollout-2026-03-10T09-00-00-0a0b0c0d-1111-4222-8333-444455556666.jsonl")
	s.waitGeneration(t, s.importLines(t, `{"type":"session","version":2,"id":"gen-marker","createdAt":1,"isSeeded":false}`))
}

// section returns the markup of the element that opens with open, up to
// the close that balances it (by counting the tag name).
func section(t *testing.T, body, open string) string {
	t.Helper()
	start := strings.Index(body, open)
	if start < 0 {
		t.Fatalf("no %s on the page", open)
	}
	tag := regexp.MustCompile(`^<([a-z]+)`).FindStringSubmatch(open)[1]
	depth := 0
	re := regexp.MustCompile(`<(/?)` + tag + `[\s>]`)
	for _, m := range re.FindAllStringSubmatchIndex(body[start:], -1) {
		if body[start+m[2]:start+m[3]] == "/" {
			depth--
		} else {
			depth++
		}
		if depth == 0 {
			return body[start : start+m[1]]
		}
	}
	t.Fatalf("%s is not closed", open)
	return ""
}

func TestConversationPairsCallsWithResultsAndFoldsBookkeeping(t *testing.T) {
	s := newStack(t)
	seedHarnesses(t, s)
	body := s.page(t, sessionURL(ccTurns))
	// Two turns, the events before the first in a section of their own.
	if n := strings.Count(body, `<section class="turn`); n != 3 {
		t.Errorf("%d turn sections, want 3 (the snapshot and hook before turn 1, turns 1 and 2)", n)
	}
	mustContain(t, "turns", body, `id="e-2" data-seq="2"`, "Turn 1</span>", "Turn 2</span>", "Before the first turn on this page")
	// The duplicate tool/call events are folded into the calls.
	for _, seq := range []int{7, 8, 21} {
		mustNotContain(t, "folded call", body, fmt.Sprintf(`<article id="e-%d"`, seq))
	}
	read := section(t, body, `<div class="call" data-call-id="toolu_read">`)
	mustContain(t, "the read call", read, `<span class="anchor" id="e-7"`, `<div class="call-result is-current" id="e-10"`)
	grep := section(t, body, `<div class="call is-failed" data-call-id="toolu_grep">`)
	mustContain(t, "the failed grep call", grep, `id="e-8"`, `<div class="call-result is-failed is-current" id="e-11"`, `<span class="badge-fail">failed</span>`)
	mustNotContain(t, "results are under their calls", body, `<article id="e-10"`, `<article id="e-11"`)
	// Bookkeeping: one quiet line per run.
	mustContain(t, "bookkeeping", body,
		`<summary><span class="bk-n">2</span> bookkeeping events <span class="bk-kinds">file-history-snapshot · progress</span></summary>`,
		// The hook's progress and the queued prompt: the folded call and its
		// results do not break the run.
		`<span class="bk-n">2</span> bookkeeping events <span class="bk-kinds">progress · queue-operation</span>`,
		// After turn 1's end, the closing system notes and the meta record.
		`<div class="turn-after"><details class="bk" data-kinds="[[&#34;system&#34;,1],[&#34;user&#34;,1]]"><summary><span class="bk-n">2</span> bookkeeping events <span class="bk-kinds">system · user</span>`)
	if n := strings.Count(body, `<details class="bk" `); n < 4 {
		t.Errorf("%d bookkeeping folds", n)
	}
	// Reasoning is collapsed; the turn's end closes its section.
	mustContain(t, "reasoning", body, `<details class="reasoning"><summary>Reasoning`, `<footer class="turn-end" id="e-15"`)
	// The open last turn: its closers are synthesized and say so; the
	// pending edit's synthesized result sits under its call.
	edit := section(t, body, `<div class="call is-failed" data-call-id="toolu_edit">`)
	mustContain(t, "the edit call", edit, `id="e-21"`, `is-synthetic`, "synthesized", "TOOL_OUTCOME_UNKNOWN")
	mustContain(t, "synthetic", body, `id="synthetic-note"`, "not among the 25 stored events", `class="turn-end is-bad is-synthetic" id="e-26"`)
	// The header's totals: two turns, three tool calls, one failed (the
	// synthesized result is not the log's), the model, the span.
	head := section(t, body, `<dl class="totals" data-totals>`)
	mustContain(t, "totals", head, `data-total="turns">2<`, `data-total="calls">3 <`, `data-total="failed">1 failed<`,
		`data-total="models">claude-opus-4-6<`, `data-total="duration">`)
	// The full event log is one click away and shows every event.
	mustContain(t, "nav", body, `href="/s/cc-7d1c2a40-0000-4000-8000-00000000a001/log"`)
	log := s.page(t, sessionURL(ccTurns)+"/log")
	for seq := 0; seq <= 26; seq++ {
		mustContain(t, "log", log, fmt.Sprintf(`<article id="e-%d"`, seq))
	}
}

func TestConversationOfACodexRollout(t *testing.T) {
	s := newStack(t)
	seedHarnesses(t, s)
	body := s.page(t, sessionURL(codexID))
	mustContain(t, "codex", body, "Turn 1</span>", "Turn 2</span>", `<details class="bk" `, "turn_context")
	// Every call with a tool/call event that its assistant message names is
	// folded; its result is under it.
	calls := regexp.MustCompile(`<div class="call[^"]*" data-call-id="([^"]+)">`).FindAllStringSubmatch(body, -1)
	if len(calls) < 3 {
		t.Fatalf("%d calls on the Codex page", len(calls))
	}
	paired := 0
	for _, c := range calls {
		if strings.Contains(section(t, body, c[0]), `<div class="call-result`) {
			paired++
		}
	}
	if paired < 3 {
		t.Errorf("%d of %d calls have their result under them", paired, len(calls))
	}
	mustNotContain(t, "codex", body, `<article id="e-11"`) // the first tool/call, folded
	mustContain(t, "codex", body, `<span class="anchor" id="e-11"`)
}

func TestConversationFiltersByTypeSurfaceAndErrors(t *testing.T) {
	s := newStack(t)
	seedHarnesses(t, s)
	seedCorpus(t, s)
	body := s.page(t, sessionURL(ccTurns)+"?type=tool/result")
	mustContain(t, "type", body, `id="e-10"`, `id="e-11"`, "matching events in #0–", `value="tool/result"`)
	mustNotContain(t, "type", body, `id="e-3"`, `id="e-6"`, `data-live-url="/`)
	body = s.page(t, sessionURL(ccTurns)+"?type=claude-code/*")
	mustContain(t, "prefix", body, `id="e-0"`, `id="e-12"`, `id="e-24"`)
	mustNotContain(t, "prefix", body, `id="e-3"`)
	body = s.page(t, "/s/s-7f3c?surface=shadowed")
	mustContain(t, "surface", body, `id="e-1"`, `id="e-5"`, `id="e-7"`)
	mustNotContain(t, "surface", body, `id="e-10"`, `id="e-15"`)
	body = s.page(t, sessionURL(hostileID)+"?errors=1")
	mustContain(t, "errors", body, `id="e-6"`, "matching events in")
	mustNotContain(t, "errors", body, `id="e-1"`)
	code, page, _ := s.get(t, "/s/s-7f3c?surface=sideways")
	if code != http.StatusBadRequest || !strings.Contains(page, "is not current, shadowed or log-only") {
		t.Errorf("a bad surface: %d", code)
	}
}

func TestConversationShowsCompactionsAndRewindsAsBoundaries(t *testing.T) {
	s := newStack(t)
	seedHarnesses(t, s)
	seedCorpus(t, s)
	body := s.page(t, "/s/s-7f3c")
	b := section(t, body, `<div class="boundary boundary-Compaction">`)
	mustContain(t, "compaction", b, "Compaction</span> · replaced 3 events", `<article id="e-15"`,
		`href="/s/s-7f3c?page=0#e-1">#1</a>, <a href="/s/s-7f3c?page=0#e-5">#5</a>`)
	rw := s.page(t, sessionURL("cc-rw-1"))
	mustContain(t, "rewind", rw, `<div class="boundary boundary-Rewind">`, "Rewind</span> · replaced")
}

func TestSyntheticClosersAreMarkedAndNeverShownForALiveSession(t *testing.T) {
	s := newStack(t)
	open := []string{
		`{"type":"session","version":2,"id":"open-1","createdAt":1788000000000,"cwd":"/w","isSeeded":false}`,
		`{"type":"turn/start","seq":0,"time":1788000000100,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":1788000000101,"data":{"id":"m1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"hello"}]},"surfaceOp":"append"}`,
		`{"type":"step/start","seq":2,"time":1788000000102,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":3,"time":1788000000200,"data":{"turn":1,"step":1,"message":{"id":"m2","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"text","text":"hi"}]}},"surfaceOp":"append"}`,
	}
	s.waitGeneration(t, s.importLines(t, open...))
	for _, path := range []string{"/s/open-1", "/s/open-1/log"} {
		body := s.page(t, path)
		mustContain(t, path, body, "4</span> events", `id="synthetic-note"`, "The last 2 rows are <strong>synthesized</strong>",
			"not among the 4 stored events", `id="e-5"`, "is-synthetic")
	}
	// The same log, live: nothing synthesized.
	ctx := testContext(t)
	h, err := s.store.Create(ctx, dshq.Header{Version: 2, ID: "live-open", CreatedAt: 1788000000000, Cwd: dshq.Str("/w")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	_, evs, err := record.ReadAll(strings.NewReader(strings.Join(open, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	gen, err := h.Append(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	s.waitGeneration(t, gen)
	for _, path := range []string{"/s/live-open", "/s/live-open/log"} {
		body := s.page(t, path)
		mustNotContain(t, path, body, "synthesized", `id="synthetic-note"`, "interrupted")
	}
}

func TestLargeBodiesAreCutWithTheirByteCount(t *testing.T) {
	s := newStack(t)
	big := strings.Repeat("0123456789abcdef", 200<<10/16) // 200 KiB
	s.waitGeneration(t, s.importLines(t,
		`{"type":"session","version":2,"id":"big-body","createdAt":1788000000000,"cwd":"/w","isSeeded":false}`,
		`{"type":"user/message","seq":0,"time":1788000000101,"data":{"id":"m1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"`+big+`END"}]},"surfaceOp":"append"}`,
	))
	for _, path := range []string{"/s/big-body", "/s/big-body/log"} {
		body := s.page(t, path)
		if len(body) > 64<<10 {
			t.Errorf("%s is %d bytes: the body is not cut", path, len(body))
		}
		mustContain(t, path, body, fmt.Sprintf("… %s more bytes", numfmt.Thousands(int64(len(big)+3-inlineBytes))), `href="/s/big-body/e/0?all=1">show all</a>`)
	}
	ev := s.page(t, "/s/big-body/e/0")
	if len(ev) > 200<<10 {
		t.Errorf("the event page is %d bytes: a 200 KiB body rendered whole (twice: text and record)", len(ev))
	}
	mustContain(t, "event page", ev, "more bytes", `href="/s/big-body/e/0?all=1">show all</a>`, "The event as written · ")
	mustNotContain(t, "event page", ev, "END")
	all := s.page(t, "/s/big-body/e/0?all=1")
	mustContain(t, "show all", all, big+"END")
}

func TestSearchSaysHowManyItFound(t *testing.T) {
	s := newStack(t)
	seedCorpus(t, s)
	body := s.page(t, "/search?"+url.Values{"q": {"retry budget"}}.Encode())
	mustContain(t, "count", body, `<p class="hit-count" data-count="2">2 sessions match</p>`)
	body = s.page(t, "/search?"+url.Values{"q": {"retry"}, "session": {"s-7f3c"}}.Encode())
	mustContain(t, "count", body, `data-count="4">4 events match`)
	body = s.page(t, "/search?q=zzzyyyxxx")
	mustNotContain(t, "none", body, `class="hit-count"`)
}

const (
	usageParent = "cc-aaaaaaaa-0000-4000-8000-000000000001"
	usageCodex  = "codex-bbbbbbbb-0000-4000-8000-000000000002"
)

// seedUsage stores cmd/dshq's usage fixtures: a Claude Code session with a
// subagent file and an inline sidechain (three models priced, one not) and
// a Codex rollout, as `dshq import` does, and waits for the projection.
func seedUsage(t testing.TB, s *stack) {
	t.Helper()
	root := filepath.Join("..", "cmd", "dshq", "testdata", "usage")
	files := []struct {
		f   capture.Format
		rel string
	}{
		{capture.FormatClaudeCode, "laptop/.claude/projects/-work-alpha/aaaaaaaa-0000-4000-8000-000000000001.jsonl"},
		{capture.FormatClaudeCode, "laptop/.claude/projects/-work-alpha/aaaaaaaa-0000-4000-8000-000000000001/subagents/agent-sub1.jsonl"},
		{capture.FormatCodex, "desktop/.codex/sessions/2026/03/01/rollout-2026-03-01T10-00-00-bbbbbbbb-0000-4000-8000-000000000002.jsonl"},
	}
	for _, f := range files {
		path := filepath.Join(root, filepath.FromSlash(f.rel))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follow.Import(testContext(t), s.store, f.f, path, data); err != nil {
			t.Fatalf("import %s: %v", f.rel, err)
		}
	}
	s.waitGeneration(t, s.importLines(t, `{"type":"session","version":2,"id":"usage-marker","createdAt":1,"isSeeded":false}`))
}

// cliSessionUsage is what `dshq usage session --session id` asks.
func cliSessionUsage(t testing.TB, s *stack, id string) usage.Totals {
	t.Helper()
	rep, err := s.ui.qc.Usage(testContext(t), wire.UsageBody{SessionIDs: []string{id}, GroupBy: []string{"session"}, Rollup: true, Limit: wire.DefaultUsageLimit})
	if err != nil {
		t.Fatal(err)
	}
	return rep.Totals
}

func TestSessionHeaderShowsTheUsageReportsTokensAndCost(t *testing.T) {
	s := newStack(t)
	seedUsage(t, s)
	want := cliSessionUsage(t, s, usageParent)
	// cmd/dshq's TestUsageTwoMachines: `dshq usage session` counts the
	// parent 3,390 tokens with its subagents'.
	if want.TotalTokens != 3390 || want.TotalCost == nil || len(want.UnpricedModels) != 1 {
		t.Fatalf("usage.report says %+v, want 3,390 tokens, a cost and one unpriced model", want)
	}
	body := s.page(t, sessionURL(usageParent))
	head := section(t, body, `<dl class="totals" data-totals>`)
	mustContain(t, "tokens", head,
		`data-total="total-tokens">3,390<`,
		fmt.Sprintf(`data-total="input">%s<`, numfmt.Thousands(want.Input)),
		fmt.Sprintf(`data-total="output">%s<`, numfmt.Thousands(want.Output)),
		fmt.Sprintf(`data-total="cache-create">%s<`, numfmt.Thousands(want.CacheCreation)),
		fmt.Sprintf(`data-total="cache-read">%s<`, numfmt.Thousands(want.CacheRead)),
		fmt.Sprintf(`data-total="cost" title="$%.4f">$%.2f &#43; unpriced`, *want.TotalCost, *want.TotalCost),
		`data-total="unpriced">· no price for claude-fictional-9<`)
	// A subagent's own page counts its own calls.
	sub := cliSessionUsage(t, s, usageParent+"-agent-sub1")
	if sub.TotalTokens != 13 {
		t.Fatalf("the subagent: %+v, want 13 tokens", sub)
	}
	mustContain(t, "subagent", s.page(t, sessionURL(usageParent+"-agent-sub1")), `data-total="total-tokens">13<`)
	// A session whose only model has no price says so, never $0.
	s.waitGeneration(t, s.importLines(t,
		`{"type":"session","version":2,"id":"unpriced-1","createdAt":1788000000000,"cwd":"/w","isSeeded":false}`,
		`{"type":"turn/start","seq":0,"time":1788000000100,"data":{"turn":1}}`,
		`{"type":"assistant/message","seq":1,"time":1788000000200,"data":{"turn":1,"message":{"id":"m2","role":"assistant","source":{"kind":"model","provider":"p","model":"no-such-model-7"},"content":[{"type":"text","text":"hi"}]},"usage":{"inputTokens":40,"outputTokens":2}},"surfaceOp":"append"}`,
	))
	if u := cliSessionUsage(t, s, "unpriced-1"); u.TotalTokens != 42 || u.TotalCost != nil {
		t.Fatalf("usage.report for the unpriced session: %+v", u)
	}
	head = section(t, s.page(t, "/s/unpriced-1"), `<dl class="totals" data-totals>`)
	mustContain(t, "unpriced", head, `data-total="total-tokens">42<`, `data-total="cost">no price <span`, "no price for no-such-model-7")
	mustNotContain(t, "unpriced", head, "$0")
}
