package capture_test

import (
	"os"
	"sync"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/claudecode"
	"github.com/dshq/dshq/capture/codex"
	"github.com/dshq/dshq/capture/internal/capturetest"
	"github.com/dshq/dshq/internal/corpus"
)

// newConverter returns the converter of a corpus file's harness.
func newConverter(f corpus.HarnessFile) capturetest.New {
	return func(cfg capture.Config) capture.Converter {
		cfg.Path = f.Rel
		if f.Harness == dshq.HarnessCodex {
			return codex.New(cfg)
		}
		return claudecode.New(cfg)
	}
}

// corpusTotals are the counts over every session file of the
// agent-harnesses corpus: a change in any of them is a change of the
// mapping (or of the corpus), to be looked at.
var corpusTotals = map[string]capture.Stats{
	// 21 transcripts: 7 subagent files and 2 inline sidechains are children.
	dshq.HarnessClaudeCode: {Lines: 2200, Bytes: 3426930, InvalidLines: 3, Sessions: 23, ChildSessions: 9, Events: 2504, LogOnly: 1498},
	// 14 rollouts: one spawned thread, one forked subagent.
	dshq.HarnessCodex: {Lines: 3551, Bytes: 1357004, InvalidLines: 1, Sessions: 14, ChildSessions: 2, Events: 4130, LogOnly: 1906},
}

// TestEveryCorpusFileConvertsAndRoundTrips converts every Claude Code and
// Codex file of the corpus in every way capturetest.Check knows (whole,
// line by line, in chunks, resumed from a stored prefix), folds each log
// under the harness SDK's strict rules and the projector's lenient ones,
// and writes each file back byte for byte from its log.
func TestEveryCorpusFileConvertsAndRoundTrips(t *testing.T) {
	files, err := corpus.HarnessFiles(corpus.RequireHarnesses(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards the counts, written by the parallel subtests
	totals := map[string]capture.Stats{}
	fileCount, roundTrips := map[string]int{}, map[string]int{}
	t.Run("files", func(t *testing.T) {
		for _, f := range files {
			t.Run(f.Harness+"/"+f.Rel, func(t *testing.T) {
				t.Parallel()
				data, err := os.ReadFile(f.Path)
				if err != nil {
					t.Fatal(err)
				}
				if got := capture.Detect(f.Rel, data[:min(len(data), 64<<10)]); got != capture.Format(f.Harness) {
					t.Errorf("Detect = %q, want %q", got, f.Harness)
				}
				_, stats := capturetest.Check(t, newConverter(f), data, 0)
				if stats.Pending != 0 {
					t.Errorf("%d lines still pending after Finish", stats.Pending)
				}
				mu.Lock()
				defer mu.Unlock()
				totals[f.Harness] = totals[f.Harness].Add(stats)
				fileCount[f.Harness]++
				if !t.Failed() {
					roundTrips[f.Harness]++
				}
			})
		}
	})
	for h, st := range totals {
		t.Logf("%s: %d files (%d round-trip byte for byte), %d lines (%d bytes), %d sessions (%d children), %d events (%d log-only %s/<type>), %d invalid lines, %d line parts, %d truncated",
			h, fileCount[h], roundTrips[h], st.Lines, st.Bytes, st.Sessions, st.ChildSessions, st.Events, st.LogOnly, h, st.InvalidLines, st.Parts, st.Truncated)
		if want := corpusTotals[h]; st != want {
			t.Errorf("%s totals %+v, want %+v", h, st, want)
		}
	}
}
