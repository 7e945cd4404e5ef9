package codex_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/codex"
	"github.com/dshq/dshq/capture/internal/capturetest"
	"github.com/dshq/dshq/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// converterFor returns the constructor Check needs for the file at path.
func converterFor(path string, maxEvent int) capturetest.New {
	return capturetest.For(codex.New, path, maxEvent)
}

// The rollouts in testdata, written for these tests.
const (
	turnsFile     = "rollout-2026-03-10T09-00-00-0a0b0c0d-1111-4222-8333-444455556666.jsonl"
	compactedFile = "rollout-2026-03-11T10-00-00-1b1b1b1b-2222-4333-8444-555566667777.jsonl"
	childFile     = "rollout-2026-03-12T11-00-00-3d3d3d3d-4444-4555-8666-777788889999.jsonl"
	noMetaFile    = "rollout-2026-03-13T12-00-00-4e4e4e4e-5555-4666-8777-88889999aaaa.jsonl"
	legacyFile    = "rollout-2c2c2c2c-3333-4444-8555-666677778888.jsonl"
	oddFile       = "rollout-odd.jsonl"
)

var fixtures = []string{turnsFile, compactedFile, childFile, noMetaFile, legacyFile, oddFile}

func convertFixture(t *testing.T, name string) (capturetest.Folded, capture.Stats) {
	t.Helper()
	path := filepath.Join("testdata", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	logs, stats := capturetest.Check(t, converterFor(path, 0), data, 0)
	if len(logs) != 1 {
		t.Fatalf("%d sessions, want 1", len(logs))
	}
	return capturetest.Fold(t, logs[0]), stats
}

func TestFixturesMatchTheirGoldenFiles(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			f, _ := convertFixture(t, name)
			got := capturetest.Render(t, []capture.Log{f.Log})
			capturetest.MatchGolden(t, filepath.Join("testdata", strings.TrimSuffix(name, ".jsonl")+".golden"), got, *update)
		})
	}
}

func TestARolloutsTurnsCallsAndCopies(t *testing.T) {
	f, _ := convertFixture(t, turnsFile)
	h := f.Header.Header
	if h.ID != "codex-0a0b0c0d-1111-4222-8333-444455556666" || *h.Cwd != "/home/dev/ledger" || h.Harness != dshq.HarnessCodex || h.ParentSession != nil {
		t.Fatalf("header %s", f.Header.Raw)
	}
	for _, tt := range []struct {
		line int64
		want string
	}{
		{1, "codex/session_meta"},
		{2, "codex/response_item"}, // a developer message
		{3, "turn/start user/message"},
		{4, "codex/event_msg"}, // task_started joins the turn the context opened
		{5, "user/message"},
		{6, "codex/event_msg"}, // the prompt's copy
		{7, "codex/turn_context"},
		{8, "assistant/message"},
		{9, "codex/response_item"}, // the reasoning's copy
		{10, "assistant/message tool/call"},
		{12, "tool/result"},
		{13, "assistant/message tool/call"},
		{14, "tool/result"},
		{15, "assistant/message tool/call"},
		{16, "tool/result"},
		{17, "tool/call"}, // web search: no result awaited
		{18, "assistant/message"},
		{19, "codex/event_msg"},
		{20, "codex/event_msg turn/end"},
		{21, "codex/event_msg turn/start"},
		{22, "user/message"},
		{25, "codex/event_msg turn/end"},
		{26, "codex/future_record_kind"},
	} {
		if got := capturetest.Types(f.EventsOfLine(t, tt.line)); got != tt.want {
			t.Errorf("line %d gave %q, want %q", tt.line, got, tt.want)
		}
	}
	copyOf := f.EventsOfLine(t, 6)[0]
	if want := fmt.Sprintf(`"copyOf":%d`, f.EventsOfLine(t, 5)[0].Seq); !strings.Contains(string(copyOf.Data), want) {
		t.Errorf("the copy %s does not name the prompt it repeats (%s)", copyOf.Data, want)
	}
	reasoning := f.EventsOfLine(t, 8)[0]
	if f.Res.Texts[reasoning.Seq] != "" || !strings.Contains(string(reasoning.Data), `"type":"reasoning"`) {
		t.Errorf("reasoning %s has text %q", reasoning.Data, f.Res.Texts[reasoning.Seq])
	}
	if !strings.Contains(string(reasoning.Data), `"model":"gpt-5.3-codex"`) {
		t.Errorf("the model of the turn_context is not the assistant's: %s", reasoning.Data)
	}
	for _, tt := range []struct{ call, result int64 }{{10, 12}, {13, 14}, {15, 16}} {
		call, res := f.EventsOfLine(t, tt.call)[1], f.EventsOfLine(t, tt.result)[0]
		if string(res.SourceEventSeqs) != fmt.Sprintf("[%d]", call.Seq) {
			t.Errorf("the result on line %d cites %s, want %d", tt.result, res.SourceEventSeqs, call.Seq)
		}
	}
	if txt := f.Res.Texts[f.EventsOfLine(t, 14)[0].Seq]; txt != "Success. Updated ledger/march.csv" {
		t.Errorf("the custom tool's array output gave %q", txt)
	}
	if txt := f.Res.Texts[f.EventsOfLine(t, 17)[0].Seq]; !strings.Contains(txt, "bank export transposed digits") {
		t.Errorf("the web search's query is not searchable: %q", txt)
	}
	aborted := f.EventsOfLine(t, 25)[1]
	if !strings.Contains(string(aborted.Data), `"kind":"aborted"`) || f.Res.State.TurnOpen() {
		t.Errorf("turn_aborted gave %s; turn open %v", aborted.Data, f.Res.State.TurnOpen())
	}
}

func TestCompactedReplacesTheWholeSurface(t *testing.T) {
	f, _ := convertFixture(t, compactedFile)
	first := f.EventsOfLine(t, 5)[0]
	if first.Type != dshq.TypeUserMessage || f.Res.Records[first.Seq].Surface != dshq.SurfaceShadowed {
		t.Fatalf("the first compaction: %s %s", first.Type, f.Res.Records[first.Seq].Surface)
	}
	if got := f.Res.Texts[first.Seq]; got != "Summarise the quarter's discrepancies.\nThree discrepancies, all transpositions." {
		t.Errorf("the replacement history's text: %q", got)
	}
	if n := len(f.Res.ReplacedEventSeqs[first.Seq]); n != 2 {
		t.Errorf("the first compaction replaced %d nodes, want the prompt and the reply", n)
	}
	second := f.EventsOfLine(t, 8)[0]
	if got := fmt.Sprint(f.Res.Surface); got != fmt.Sprintf("[%d]", second.Seq) {
		t.Errorf("surface %s, want only the last summary %d", got, second.Seq)
	}
	for _, e := range f.Events[:second.Seq] {
		if dshq.IsSurfaceType(e.Type) && f.Res.Records[e.Seq].Surface != dshq.SurfaceShadowed {
			t.Errorf("event %d before the last compaction is %s", e.Seq, f.Res.Records[e.Seq].Surface)
		}
	}
}

func TestASpawnedThreadIsAChild(t *testing.T) {
	f, _ := convertFixture(t, childFile)
	h := f.Header.Header
	if h.ParentSession == nil || *h.ParentSession != "codex-0a0b0c0d-1111-4222-8333-444455556666" ||
		h.Origin != dshq.OriginSubagent || *h.DelegationDepth != 1 {
		t.Fatalf("header %s", f.Header.Raw)
	}
	if got := capturetest.Types(f.Events); got != "codex/session_meta turn/start user/message user/message assistant/message" {
		t.Errorf("events %q: the replayed prompt and the child's own should be one turn", got)
	}
}

func TestLegacyAndMetalessRollouts(t *testing.T) {
	legacy, _ := convertFixture(t, legacyFile)
	if h := legacy.Header.Header; h.ID != "codex-2c2c2c2c-3333-4444-8555-666677778888" || h.Cwd != nil || len(legacy.Notices) != 1 {
		t.Errorf("legacy header %s, notices %q", legacy.Header.Raw, legacy.Notices)
	}
	if got := capturetest.Types(legacy.Events); got != "codex/legacy-header turn/start user/message assistant/message tool/call tool/result assistant/message codex/state" {
		t.Errorf("legacy events %q", got)
	}
	noMeta, _ := convertFixture(t, noMetaFile)
	if h := noMeta.Header.Header; h.ID != "codex-4e4e4e4e-5555-4666-8777-88889999aaaa" || h.Cwd == nil || *h.Cwd != "/home/dev/ledger" {
		t.Errorf("a rollout without session_meta: header %s (want the file name's id and the turn_context's cwd)", noMeta.Header.Raw)
	}
}

func TestOddRolloutLinesAreKept(t *testing.T) {
	f, stats := convertFixture(t, oddFile)
	if stats.InvalidLines != 3 {
		t.Errorf("%d invalid lines, want 3", stats.InvalidLines)
	}
	for line, want := range map[int64]string{
		1: `"eol":"\r\n"`, 2: `"base64":"`, 3: `"error":"not JSON: a torn or malformed object"`,
		4: `"error":"a JSON number, not an object"`, 6: `codex/event_msg`, 7: `"eol":"","text":"`,
	} {
		if e := f.EventsOfLine(t, line)[0]; !strings.Contains(string(e.Raw), want) {
			t.Errorf("line %d: %s, want %s", line, e.Raw, want)
		}
	}
}

func FuzzConvert(f *testing.F) {
	for _, name := range fixtures {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, file := range corpus.RequireHarnessFiles(f, dshq.HarnessCodex) {
		data, err := os.ReadFile(file.Path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(capturetest.HeadLines(data, 12))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		capturetest.Quick(t, converterFor("s/rollout-fz.jsonl", capture.MinMaxEventBytes), data, capture.MinMaxEventBytes)
	})
}

// TestAWindowsCwdIsAWorkspace converts our rollout with its cwd rewritten
// as Codex on Windows states it: the header keeps it exactly, no notice.
func TestAWindowsCwdIsAWorkspace(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", turnsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{`e:\Workspace\ledger`, `\\build01\src\ledger`} {
		quoted := strings.ReplaceAll(cwd, `\`, `\\`)
		file := bytes.ReplaceAll(data, []byte(`"/home/dev/ledger"`), []byte(`"`+quoted+`"`))
		logs, _ := capturetest.Check(t, converterFor(turnsFile, 0), file, 0)
		h := logs[0].Header.Header
		if h.Cwd == nil || *h.Cwd != cwd || len(logs[0].Notices) != 0 {
			t.Errorf("cwd %s: header cwd %v, notices %q", cwd, h.Cwd, logs[0].Notices)
		}
	}
}
