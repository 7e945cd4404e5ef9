package claudecode_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/claudecode"
	"github.com/dshq/dshq/capture/internal/capturetest"
)

// converted caches convertCorpus's logs by file suffix: several tests read
// the largest transcript.
var converted sync.Map

// convertCorpus converts one corpus file whole (the full checks run in
// package capture's corpus test).
func convertCorpus(t *testing.T, suffix string) []capturetest.Folded {
	t.Helper()
	if v, ok := converted.Load(suffix); ok {
		return v.([]capturetest.Folded)
	}
	out := capturetest.CorpusFile(t, dshq.HarnessClaudeCode, suffix, func(cfg capture.Config) capture.Converter { return claudecode.New(cfg) })
	converted.Store(suffix, out)
	return out
}

func TestRealCompactionShadowsEverythingBeforeItsSummary(t *testing.T) {
	f := convertCorpus(t, "258c7280-ae70-4798-800f-63464d01a85d.jsonl")[0]
	const boundary, summaryLine = 1256, 1257 // MANIFEST: compact_boundary, then the isCompactSummary user
	if got := capturetest.Types(f.EventsOfLine(t, boundary)); got != "claude-code/system" {
		t.Fatalf("the boundary gave %q", got)
	}
	summary := f.EventsOfLine(t, summaryLine)[0]
	if summary.Type != dshq.TypeUserMessage || f.Res.Records[summary.Seq].Surface != dshq.SurfaceCurrent {
		t.Fatalf("the summary is %s %s", summary.Type, f.Res.Records[summary.Seq].Surface)
	}
	before, shadowed := 0, 0
	for _, e := range f.Events[:summary.Seq] {
		if dshq.IsSurfaceType(e.Type) {
			before++
			if f.Res.Records[e.Seq].Surface == dshq.SurfaceShadowed {
				shadowed++
			}
		}
	}
	if before == 0 || shadowed != before {
		t.Fatalf("%d of the %d surface events before the summary are shadowed, want all", shadowed, before)
	}
	if got := len(f.Res.ReplacedEventSeqs[summary.Seq]); got != before {
		t.Errorf("the summary replaced %d nodes, want %d", got, before)
	}
	for _, e := range f.Events[summary.Seq+1:] {
		if dshq.IsSurfaceType(e.Type) && f.Res.Records[e.Seq].Surface != dshq.SurfaceCurrent {
			t.Fatalf("event %d after the summary is %s", e.Seq, f.Res.Records[e.Seq].Surface)
		}
	}
}

func TestRealRewindShadowsTheAbandonedBranch(t *testing.T) {
	f := convertCorpus(t, "dag_compact_after_rewind.jsonl")[0]
	// MANIFEST: a1 (line 2) has two user children, b1u (line 3) and b2u
	// (line 5); only b2u continues.
	b2u := f.EventsOfLine(t, 5)
	rewind := b2u[len(b2u)-1]
	if string(rewind.SourceEventSeqs) == "" {
		t.Fatalf("the second attempt %s does not replace the first", rewind.Raw)
	}
	for _, line := range []int64{3, 4} {
		evs := f.EventsOfLine(t, line)
		node := evs[len(evs)-1]
		if f.Res.ReplacedBy[node.Seq] != rewind.Seq {
			t.Errorf("line %d (seq %d) is replaced by %d, want the rewinding prompt %d", line, node.Seq, f.Res.ReplacedBy[node.Seq], rewind.Seq)
		}
	}
}

func TestRealSubagentFilesAreChildSessions(t *testing.T) {
	for _, name := range []string{"subagents/agent-a881341.jsonl", "subagents/agent-acompact-fffbd0.jsonl"} {
		h := convertCorpus(t, name)[0].Header.Header
		if h.ParentSession == nil || *h.ParentSession != "cc-258c7280-ae70-4798-800f-63464d01a85d" ||
			h.Origin != dshq.OriginSubagent || h.DelegationDepth == nil || *h.DelegationDepth != 1 {
			t.Errorf("%s: header %+v", name, h)
		}
	}
	logs := convertCorpus(t, "sidechain_integrated.jsonl")
	if len(logs) < 2 {
		t.Fatalf("the inline sidechains gave %d sessions", len(logs))
	}
	for _, l := range logs[1:] {
		if h := l.Header.Header; h.Origin != dshq.OriginSubagent || *h.DelegationDepth != 1 || *h.ParentSession != logs[0].Header.Header.ID {
			t.Errorf("inline child %+v", h)
		}
	}
}

func TestRealThinkingIsKeptButNotSearchable(t *testing.T) {
	f := convertCorpus(t, "258c7280-ae70-4798-800f-63464d01a85d.jsonl")[0]
	n := 0
	for _, e := range f.Events {
		if e.Type == dshq.TypeAssistantMessage && strings.Contains(string(e.Data), `"content":[{"type":"reasoning"`) {
			n++
			if txt := f.Res.Texts[e.Seq]; txt != "" {
				t.Fatalf("thinking at seq %d has semantic text %q", e.Seq, txt)
			}
		}
	}
	if n != 19 { // the file's thinking records (grep -c '"type":"thinking"')
		t.Errorf("%d thinking messages, want 19", n)
	}
}
