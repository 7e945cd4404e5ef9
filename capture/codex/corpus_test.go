package codex_test

import (
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/codex"
	"github.com/dshq/dshq/capture/internal/capturetest"
)

// convertCorpus converts the one session of the corpus rollout whose path
// ends with suffix (its MANIFEST.md describes each).
func convertCorpus(t *testing.T, suffix string) capturetest.Folded {
	t.Helper()
	logs := capturetest.CorpusFile(t, dshq.HarnessCodex, suffix, func(cfg capture.Config) capture.Converter { return codex.New(cfg) })
	if len(logs) != 1 {
		t.Fatalf("%d logs, want 1", len(logs))
	}
	return logs[0]
}

func TestRealCompactedShadowsEverythingBefore(t *testing.T) {
	f := convertCorpus(t, "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl")
	const compactedLine = 1788 // MANIFEST: compacted{message, replacement_history[40]}
	summary := f.EventsOfLine(t, compactedLine)[0]
	if summary.Type != dshq.TypeUserMessage || f.Res.Records[summary.Seq].Surface != dshq.SurfaceCurrent {
		t.Fatalf("the compaction is %s %s", summary.Type, f.Res.Records[summary.Seq].Surface)
	}
	before := 0
	for _, e := range f.Events[:summary.Seq] {
		if dshq.IsSurfaceType(e.Type) {
			before++
			if f.Res.Records[e.Seq].Surface != dshq.SurfaceShadowed {
				t.Fatalf("event %d before the compaction is %s", e.Seq, f.Res.Records[e.Seq].Surface)
			}
		}
	}
	if before == 0 || len(f.Res.ReplacedEventSeqs[summary.Seq]) != before {
		t.Errorf("the compaction replaced %d of %d nodes", len(f.Res.ReplacedEventSeqs[summary.Seq]), before)
	}
	if !strings.Contains(f.Res.Texts[summary.Seq], "[REDACTED_TEXT len=32 sha=821fd802]") {
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
		first, second := f.EventsOfLine(t, pair[0]), f.EventsOfLine(t, pair[1])
		if !dshq.IsSurfaceType(first[len(first)-1].Type) || dshq.IsSurfaceType(second[0].Type) {
			t.Errorf("lines %v gave %q and %q, want the first mapped and the second kept as its copy", pair, capturetest.Types(first), capturetest.Types(second))
		}
	}
	if f.Res.State.TurnOpen() {
		t.Errorf("task_complete did not end the turn")
	}
}
