package capture_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/internal/corpus"
)

func TestDetect(t *testing.T) {
	tests := []struct {
		name, path, head string
		want             capture.Format
	}{
		{"a deepseek-harness header line", "x/session.jsonl", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false}` + "\n", capture.FormatDeepseek},
		{"a Codex envelope", "a.jsonl", `{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}` + "\n", capture.FormatCodex},
		{"a legacy Codex rollout", "a.jsonl", `{"id":"x","timestamp":"t"}` + "\n" + `{"type":"message","role":"user","content":[]}` + "\n", capture.FormatCodex},
		{"a Claude Code snapshot first", "a.jsonl", `{"type":"file-history-snapshot","messageId":"m","snapshot":{}}` + "\n", capture.FormatClaudeCode},
		{"Claude Code records after junk", "a.jsonl", "junk\n[1]\n" + `{"type":"user","sessionId":"s","message":{}}` + "\n", capture.FormatClaudeCode},
		{"only a torn line: the name decides", "d/rollout-1.jsonl", `{"timestamp":"t","type":"sess`, capture.FormatCodex},
		{"a zstd-framed log", "d/session.jsonl.zstd", "\x28\xb5\x2f\xfd", capture.FormatDeepseek},
		{"nothing known", "d/notes.jsonl", `{"a":1}` + "\n", capture.FormatUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := capture.Detect(tt.path, []byte(tt.head)); got != tt.want {
				t.Fatalf("Detect = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDetectTellsTheOriginalHarnessLogs(t *testing.T) {
	corpus.Each(t, func(t *testing.T, dir string, _ bool) {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.jsonl*"))
		if len(paths) == 0 {
			t.Fatalf("no logs in %s", dir)
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := capture.Detect(p, data[:min(len(data), 64<<10)]); got != capture.FormatDeepseek {
				t.Errorf("%s: Detect = %q", filepath.Base(p), got)
			}
		}
	})
}
