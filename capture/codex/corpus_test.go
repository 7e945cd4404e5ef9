package codex_test

import (
	"os"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/codex"
	"github.com/dshq/dshq/internal/corpus"
)

// corpusFiles returns the Codex rollouts of the agent-harnesses corpus (its
// MANIFEST.md describes each).
func corpusFiles(t corpus.TB) []corpus.HarnessFile {
	files, err := corpus.HarnessFiles(corpus.RequireHarnesses(t))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var out []corpus.HarnessFile
	for _, f := range files {
		if f.Harness == dshq.HarnessCodex {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Fatalf("the corpus has no codex rollouts")
	}
	return out
}

func convertCorpus(t *testing.T, suffix string) folded {
	t.Helper()
	for _, file := range corpusFiles(t) {
		if !strings.HasSuffix(file.Rel, suffix) {
			continue
		}
		data, err := os.ReadFile(file.Path)
		if err != nil {
			t.Fatal(err)
		}
		ups, err := capture.Convert(codex.New(capture.Config{Path: file.Rel}), data)
		if err != nil {
			t.Fatal(err)
		}
		logs, err := capture.Collect(ups)
		if err != nil || len(logs) != 1 {
			t.Fatalf("%d logs, %v", len(logs), err)
		}
		return foldLog(t, logs[0])
	}
	t.Fatalf("no corpus file ends with %s", suffix)
	return folded{}
}

func TestRealCompactedShadowsEverythingBefore(t *testing.T) {
	f := convertCorpus(t, "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl")
	const compactedLine = 1788 // MANIFEST: compacted{message, replacement_history[40]}
	summary := f.eventsOfLine(t, compactedLine)[0]
	if summary.Type != dshq.TypeUserMessage || f.res.Records[summary.Seq].Surface != dshq.SurfaceCurrent {
		t.Fatalf("the compaction is %s %s", summary.Type, f.res.Records[summary.Seq].Surface)
	}
	before := 0
	for _, e := range f.Events[:summary.Seq] {
		if dshq.IsSurfaceType(e.Type) {
			before++
			if f.res.Records[e.Seq].Surface != dshq.SurfaceShadowed {
				t.Fatalf("event %d before the compaction is %s", e.Seq, f.res.Records[e.Seq].Surface)
			}
		}
	}
	if before == 0 || len(f.res.ReplacedEventSeqs[summary.Seq]) != before {
		t.Errorf("the compaction replaced %d of %d nodes", len(f.res.ReplacedEventSeqs[summary.Seq]), before)
	}
	if !strings.Contains(f.res.Texts[summary.Seq], "[REDACTED_TEXT len=32 sha=821fd802]") {
		t.Errorf("the replacement history is not the summary's text")
	}
}

func TestRealSpawnedAndForkedThreadsAreChildren(t *testing.T) {
	for _, tt := range []struct {
		file, parent string
		depth        int64
	}{
		{"rollout-2026-01-03T04-05-10-33333333-3333-4333-8333-333333333333.jsonl", "codex-22222222-2222-4222-8222-222222222222", 1},
		{"subagent_v2.jsonl", "codex-0199a000-0000-7000-8000-000000000002", 2},
	} {
		h := convertCorpus(t, tt.file).Header.Header
		if h.ParentSession == nil || *h.ParentSession != tt.parent || h.Origin != dshq.OriginSubagent || *h.DelegationDepth != tt.depth {
			t.Errorf("%s: header %+v, want a child of %s at depth %d", tt.file, h, tt.parent, tt.depth)
		}
	}
}

func TestRealPromptsAreNotDoubled(t *testing.T) {
	f := convertCorpus(t, "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl")
	// Lines 9 and 10 are the one prompt as a response item and as an
	// event_msg; lines 15 and 16 one reply.
	for _, pair := range [][2]int64{{9, 10}, {15, 16}} {
		first, second := f.eventsOfLine(t, pair[0]), f.eventsOfLine(t, pair[1])
		if !dshq.IsSurfaceType(first[len(first)-1].Type) || dshq.IsSurfaceType(second[0].Type) {
			t.Errorf("lines %v gave %q and %q, want the first mapped and the second kept as its copy", pair, types(first), types(second))
		}
	}
	if f.res.State.TurnOpen() {
		t.Errorf("task_complete did not end the turn")
	}
}
