package claudecode_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/claudecode"
	"github.com/dshq/dshq/capture/internal/capturetest"
	"github.com/dshq/dshq/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// converterFor returns the constructor Check needs for the file at path.
func converterFor(path string, maxEvent int) capturetest.New {
	return capturetest.For(claudecode.New, path, maxEvent)
}

// fixtures are the transcripts in testdata, written for these tests.
var fixtures = []string{
	"turns.jsonl", "rewind.jsonl", "sidechain.jsonl", "odd.jsonl",
	"layouts/a1b2c3d4-0000-4000-8000-000000000001/subagents/agent-probe1.jsonl",
	"layouts/agent-probe2.jsonl",
}

func convertFixture(t *testing.T, name string) []capture.Log {
	t.Helper()
	path := filepath.Join("testdata", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := capturetest.Check(t, converterFor(path, 0), data, 0)
	return logs
}

func TestFixturesMatchTheirGoldenFiles(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			got := capturetest.Render(t, convertFixture(t, name))
			capturetest.MatchGolden(t, filepath.Join("testdata", strings.TrimSuffix(name, ".jsonl")+".golden"), got, *update)
		})
	}
}

func TestTurnsToolsAndTitles(t *testing.T) {
	logs := convertFixture(t, "turns.jsonl")
	if len(logs) != 1 {
		t.Fatalf("%d sessions, want 1", len(logs))
	}
	f := capturetest.Fold(t, logs[0])
	h := f.Header.Header
	if h.ID != "cc-7d1c2a40-0000-4000-8000-00000000a001" || h.Cwd == nil || *h.Cwd != "/home/dev/kiln" || h.Harness != dshq.HarnessClaudeCode {
		t.Fatalf("header %s", f.Header.Raw)
	}
	if want := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC).UnixMilli(); h.CreatedAt != want { // line 1 (a snapshot) has no timestamp of its own
		t.Errorf("createdAt %d, want line 2's timestamp", h.CreatedAt)
	}
	for _, tt := range []struct {
		line int64
		want string
	}{
		{1, "claude-code/file-history-snapshot"},
		{2, "claude-code/progress"},
		{3, "turn/start user/message"},
		{4, "assistant/message"},
		{6, "assistant/message tool/call tool/call"},
		{8, "tool/result"},
		{10, "claude-code/queue-operation"},
		{12, "claude-code/system turn/end"},
		{13, "claude-code/system"},
		{14, "claude-code/user"},
		{15, "turn/start user/message"},
		{17, "session/title"},
		{18, "session/title"},
		{19, "claude-code/summary"},
	} {
		if got := capturetest.Types(f.EventsOfLine(t, tt.line)); got != tt.want {
			t.Errorf("line %d gave %q, want %q", tt.line, got, tt.want)
		}
	}
	thinking := f.EventsOfLine(t, 4)[0]
	if txt := f.Res.Texts[thinking.Seq]; txt != "" {
		t.Errorf("thinking has semantic text %q, want none", txt)
	}
	if !strings.Contains(string(thinking.Data), `"type":"reasoning","text":"Probably integral windup`) {
		t.Errorf("thinking is not kept as reasoning: %s", thinking.Data)
	}
	calls := f.EventsOfLine(t, 6)
	for i, line := range []int64{8, 9} {
		res := f.EventsOfLine(t, line)[0]
		if want := fmt.Sprintf("[%d]", calls[i+1].Seq); string(res.SourceEventSeqs) != want {
			t.Errorf("the result on line %d cites %s, want its tool/call %s", line, res.SourceEventSeqs, want)
		}
	}
	if errRes := f.EventsOfLine(t, 9)[0]; !strings.Contains(string(errRes.Data), `"isError":true`) || !strings.Contains(f.Res.Texts[errRes.Seq], "No matches for integralClamp") {
		t.Errorf("the failed Grep result: %s / %q", errRes.Data, f.Res.Texts[errRes.Seq])
	}
	if f.Res.Title == nil || f.Res.Title.Title != "Fixing kiln PID integral windup" || f.Res.State.TurnOpen() != true {
		t.Errorf("title %+v, turn open %v: want the summary of a branch in the file, and the second turn still open", f.Res.Title, f.Res.State.TurnOpen())
	}
	if u := f.EventsOfLine(t, 12); f.Res.State == nil || !strings.Contains(string(u[1].Data), `"reason":{"kind":"completed"}`) {
		t.Errorf("stop hook summary did not end the turn: %s", u[1].Data)
	}
}

func TestRewindShadowsTheAbandonedBranchAndCompactionTheRest(t *testing.T) {
	f := capturetest.Fold(t, convertFixture(t, "rewind.jsonl")[0])
	surfaceOf := func(line int64) dshq.Surface {
		for _, e := range f.EventsOfLine(t, line) {
			if dshq.IsSurfaceType(e.Type) {
				return f.Res.Records[e.Seq].Surface
			}
		}
		t.Fatalf("line %d has no surface event", line)
		return ""
	}
	for line, want := range map[int64]dshq.Surface{
		1: dshq.SurfaceShadowed, 2: dshq.SurfaceShadowed, // compacted
		3: dshq.SurfaceShadowed, 4: dshq.SurfaceShadowed, // abandoned by the rewind on line 5
		5: dshq.SurfaceShadowed, 6: dshq.SurfaceShadowed, // compacted
		8: dshq.SurfaceCurrent,                            // the summary
		9: dshq.SurfaceShadowed, 10: dshq.SurfaceShadowed, // abandoned by the rewind on line 11
		11: dshq.SurfaceCurrent,
	} {
		if got := surfaceOf(line); got != want {
			t.Errorf("line %d is %s, want %s", line, got, want)
		}
	}
	rewind := f.EventsOfLine(t, 5)
	prompt := rewind[len(rewind)-1]
	q2, q2a := f.EventsOfLine(t, 3), f.EventsOfLine(t, 4)
	if f.Res.ReplacedBy[q2[len(q2)-1].Seq] != prompt.Seq || f.Res.ReplacedBy[q2a[0].Seq] != prompt.Seq {
		t.Errorf("the abandoned branch is not replaced by the rewinding prompt (seq %d): %v", prompt.Seq, f.Res.ReplacedBy)
	}
	summary := f.EventsOfLine(t, 8)[0]
	if !strings.Contains(string(summary.Data), `"plugin":"compact"`) || len(f.Res.ReplacedEventSeqs[summary.Seq]) != 4 {
		t.Errorf("the summary %s replaced %v, want the 4 nodes then current", summary.Data, f.Res.ReplacedEventSeqs[summary.Seq])
	}
	if got := fmt.Sprint(f.Res.Surface); got != fmt.Sprintf("[%d %d]", summary.Seq, f.EventsOfLine(t, 11)[2].Seq) {
		t.Errorf("final surface %s, want the summary and the last prompt", got)
	}
}

func TestInlineSidechainsBecomeChildSessions(t *testing.T) {
	logs := convertFixture(t, "sidechain.jsonl")
	if len(logs) != 3 {
		t.Fatalf("%d sessions, want the main one and two sidechains", len(logs))
	}
	main := logs[0].Header.Header.ID
	for i, want := range []string{main + "-agent-beacon7", main + "-agent-t1"} {
		h := logs[i+1].Header.Header
		if h.ID != want || h.ParentSession == nil || *h.ParentSession != main || h.Origin != dshq.OriginSubagent ||
			h.DelegationDepth == nil || *h.DelegationDepth != 1 || h.Cwd == nil || *h.Cwd != "/work/orbit" {
			t.Errorf("child %d header %s, want %s, child of %s at depth 1", i, logs[i+1].Header.Raw, want, main)
		}
		for _, e := range logs[i+1].Events {
			if !strings.Contains(string(e.Data), `"session":"`+main+`"`) {
				t.Errorf("child event %s does not point at the main session's line", e.Raw)
			}
		}
	}
	f := capturetest.Fold(t, logs[0])
	if got := capturetest.Types(f.EventsOfLine(t, 3)); got != "claude-code/user" || !strings.Contains(string(f.EventsOfLine(t, 3)[0].Data), `"routedTo":"`+main+`-agent-beacon7"`) {
		t.Errorf("the main session keeps a sidechain line as %q: %s", got, f.EventsOfLine(t, 3)[0].Data)
	}
	if n := len(logs[2].Events); n != 2 {
		t.Errorf("the sidechain without agentId has %d events, want its two records", n)
	}
}

func TestSubagentFilesInBothLayouts(t *testing.T) {
	newer := convertFixture(t, fixtures[4])[0].Header
	older := convertFixture(t, fixtures[5])[0]
	parent := "cc-a1b2c3d4-0000-4000-8000-000000000001"
	for _, h := range []dshq.Header{newer.Header, older.Header.Header} {
		if h.ParentSession == nil || *h.ParentSession != parent || h.Origin != dshq.OriginSubagent || *h.DelegationDepth != 1 {
			t.Errorf("subagent header %+v, want a child of %s at depth 1", h, parent)
		}
	}
	if newer.Header.ID != parent+"-agent-probe1" || older.Header.Header.ID != parent+"-agent-probe2" {
		t.Errorf("ids %s and %s", newer.Header.ID, older.Header.Header.ID)
	}
	if older.Header.Header.Cwd != nil || len(older.Notices) != 1 || !strings.Contains(older.Notices[0], "no workspace") {
		t.Errorf("a subagent file stating no cwd: cwd %v, notices %q", older.Header.Header.Cwd, older.Notices)
	}
}

func TestOddLinesAreKeptNotRefused(t *testing.T) {
	path := filepath.Join("testdata", "odd.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	logs, stats := capturetest.Check(t, converterFor(path, 0), data, 0)
	if stats.InvalidLines != 4 {
		t.Errorf("%d invalid lines, want 4 (not JSON, an array, a string, an empty line)", stats.InvalidLines)
	}
	f := capturetest.Fold(t, logs[0])
	for line, want := range map[int64]string{
		1: `"eol":"\r\n","text":"{`, 2: `"error":"not JSON`, 3: `"error":"a JSON array, not an object"`,
		5: `"error":"an empty line"`, 6: `claude-code/untyped`, 7: `claude-code/untyped`,
		8: `"base64":"`, 11: `"eol":"","text":"`,
	} {
		e := f.EventsOfLine(t, line)[0]
		if !strings.Contains(string(e.Raw), want) {
			t.Errorf("line %d: %s, want it to hold %s", line, e.Raw, want)
		}
	}
	if got := capturetest.Types(f.EventsOfLine(t, 10)); got != "turn/end turn/start user/message" {
		t.Errorf("bare strings in a prompt's content gave %q", got)
	}
	if txt := f.Res.Texts[f.EventsOfLine(t, 8)[0].Seq]; !strings.Contains(txt, "are not UTF-8") {
		t.Errorf("a line with invalid UTF-8 lost its text: %q", txt)
	}
}

func TestLongLinesAreSplitAndTheirContentCut(t *testing.T) {
	big := strings.Repeat("résultat \x01 \"quoted\" ", 3000) // escapes and multi-byte runes
	rec := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	lines := []string{
		rec(map[string]any{"type": "user", "uuid": "u", "sessionId": "long", "cwd": "/w", "timestamp": "2026-01-01T00:00:00Z",
			"message": map[string]any{"role": "user", "content": "read it"}}),
		rec(map[string]any{"type": "assistant", "uuid": "a", "parentUuid": "u", "message": map[string]any{"role": "assistant",
			"content": []any{map[string]any{"type": "tool_use", "id": "t1", "name": "Write", "input": map[string]any{"content": big}}}}}),
		rec(map[string]any{"type": "user", "uuid": "r", "parentUuid": "a", "message": map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": big}}}}),
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	logs, stats := capturetest.Check(t, converterFor("long.jsonl", capture.MinMaxEventBytes), data, capture.MinMaxEventBytes)
	if stats.Parts == 0 || stats.Truncated == 0 {
		t.Fatalf("stats %+v: want line parts and truncated content", stats)
	}
	f := capturetest.Fold(t, logs[0])
	res := f.EventsOfLine(t, 3)
	if res[0].Type != dshq.TypeToolResult || !strings.Contains(string(res[0].Data), `"truncated":true`) {
		t.Fatalf("the long result's holder %s", res[0].Raw)
	}
	for _, e := range res[1:] {
		if e.Type != capture.TypeLinePart {
			t.Fatalf("after the holder: %s, want only line parts", e.Type)
		}
	}
	if txt := f.Res.Texts[res[0].Seq]; !strings.HasPrefix(txt, "résultat") {
		t.Errorf("the cut result's text %q", txt[:min(len(txt), 40)])
	}
}

func TestALineOutOfOrderIsRefused(t *testing.T) {
	c := claudecode.New(capture.Config{})
	if _, err := c.Feed(capture.Line{No: 2, Text: []byte("{}"), EOL: "\n"}); err == nil || !strings.Contains(err.Error(), "expected 1") {
		t.Fatalf("Feed(line 2 first) = %v", err)
	}
}

func FuzzConvert(f *testing.F) {
	for _, name := range fixtures {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, strings.Contains(name, "agent-"))
	}
	for _, file := range corpus.RequireHarnessFiles(f, dshq.HarnessClaudeCode) {
		data, err := os.ReadFile(file.Path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(capturetest.HeadLines(data, 12), strings.Contains(file.Rel, "agent-"))
	}
	f.Fuzz(func(t *testing.T, data []byte, agentFile bool) {
		path := "p/session.jsonl"
		if agentFile {
			path = "p/0000/subagents/agent-fz.jsonl"
		}
		capturetest.Quick(t, converterFor(path, capture.MinMaxEventBytes), data, capture.MinMaxEventBytes)
	})
}

func TestTheHeaderWaitsForItsFactsButNotForever(t *testing.T) {
	snapshot := `{"type":"file-history-snapshot","messageId":"m","snapshot":{"trackedFileBackups":{}}}` + "\n"
	prompt := `{"type":"user","uuid":"u","sessionId":"late","cwd":"/w","timestamp":"2026-01-01T00:00:00Z","message":{"content":"hi"}}` + "\n"
	t.Run("it waits while the lines have not stated the header", func(t *testing.T) {
		c := claudecode.New(capture.Config{Path: "p/late.jsonl"})
		for i, l := range capture.SplitLines([]byte(strings.Repeat(snapshot, 3))) {
			if ups, _ := c.Feed(l); len(ups) != 0 || c.Stats().Pending != int64(i+1) {
				t.Fatalf("line %d gave %d updates, %d pending", i+1, len(ups), c.Stats().Pending)
			}
		}
		ups, _ := c.Feed(capture.Line{No: 4, Text: []byte(strings.TrimSuffix(prompt, "\n")), EOL: "\n"})
		if len(ups) != 1 || ups[0].Header == nil || *ups[0].Header.Header.Cwd != "/w" {
			t.Fatalf("the line stating the header gave %d updates", len(ups))
		}
		if got := capturetest.Types(ups[0].Events); got != "claude-code/file-history-snapshot claude-code/file-history-snapshot claude-code/file-history-snapshot turn/start user/message" {
			t.Fatalf("the held lines and the line stating the header gave %q", got)
		}
	})
	t.Run("it stops waiting after MaxPendingLines lines", func(t *testing.T) {
		data := []byte(strings.Repeat(snapshot, capture.MaxPendingLines) + prompt)
		logs, _ := capturetest.Check(t, converterFor("p/late.jsonl", 0), data, 0)
		h := logs[0].Header.Header
		if h.ID != "cc-late" || h.Cwd != nil || len(logs[0].Notices) != 1 {
			t.Fatalf("header %s, notices %q: want the name's id and no cwd", logs[0].Header.Raw, logs[0].Notices)
		}
	})
	t.Run("Finish decides it, and a file growing after that continues the session", func(t *testing.T) {
		c := claudecode.New(capture.Config{Path: "p/early.jsonl"})
		lines := capture.SplitLines([]byte(snapshot + prompt))
		if ups, _ := c.Feed(lines[0]); len(ups) != 0 {
			t.Fatal("a snapshot alone decided the header")
		}
		first := c.Finish()
		if len(first) != 1 || first[0].Header == nil || first[0].Header.Header.ID != "cc-early" || first[0].Header.Header.Cwd != nil {
			t.Fatalf("Finish gave %+v", first)
		}
		more, _ := c.Feed(lines[1])
		if len(more) != 1 || more[0].Header != nil || more[0].Events[0].Seq != 1 {
			t.Fatalf("the next line gave %+v", more)
		}
		logs, err := capture.Collect(append(first, more...))
		if err != nil {
			t.Fatal(err)
		}
		if src, err := capture.Source(logs[0].Events); err != nil || string(src) != snapshot+prompt {
			t.Fatalf("Source = %q, %v", src, err)
		}
	})
}

func TestThousandsOfShortBlocksStillFitOneEvent(t *testing.T) {
	var blocks []string
	for i := range 3000 {
		blocks = append(blocks, fmt.Sprintf(`{"type":"text","text":"block %d of a reply made of many short blocks"}`, i))
	}
	data := []byte(`{"type":"user","uuid":"u","sessionId":"many","cwd":"/w","timestamp":"2026-01-01T00:00:00Z","message":{"content":"go"}}` + "\n" +
		`{"type":"assistant","uuid":"a","parentUuid":"u","message":{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}}` + "\n")
	logs, stats := capturetest.Check(t, converterFor("many.jsonl", capture.MinMaxEventBytes), data, capture.MinMaxEventBytes)
	if stats.Truncated == 0 {
		t.Fatal("nothing was truncated")
	}
	f := capturetest.Fold(t, logs[0])
	if txt := f.Res.Texts[f.EventsOfLine(t, 2)[0].Seq]; !strings.HasPrefix(txt, "block 0 of a reply") {
		t.Errorf("the cut reply's text %q", txt[:min(len(txt), 60)])
	}
}

// TestAWindowsCwdIsAWorkspace converts our transcript with its cwd
// rewritten as Claude Code on Windows states it (a drive letter, and a UNC
// share): the header keeps the cwd exactly as stated, with no notice.
func TestAWindowsCwdIsAWorkspace(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{`e:\Workspace\src\github\claude-code-log`, `\\build01\src\kiln`, `C:/Users/dev/kiln`} {
		quoted, _ := json.Marshal(cwd)
		file := bytes.ReplaceAll(data, []byte(`"/home/dev/kiln"`), quoted)
		logs, _ := capturetest.Check(t, converterFor("turns.jsonl", 0), file, 0)
		h := logs[0].Header.Header
		if h.Cwd == nil || *h.Cwd != cwd || len(logs[0].Notices) != 0 {
			t.Errorf("cwd %s: header cwd %v, notices %q", cwd, h.Cwd, logs[0].Notices)
		}
	}
}
