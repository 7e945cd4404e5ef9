package usage_test

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dshq/dshq/internal/corpus"
)

func corpusFiles(t *testing.T, dir string) []string {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// corpusDaily is what ccusage 20.0.24 reports for the agent-harnesses
// corpus per UTC day and model (input, output, cache creation, cache
// read), given the same records (cmd/dshq's TestUsageCorpusMatchesCcusage
// runs ccusage itself).
var corpusDaily = map[[2]string][4]int64{
	{"2025-06-14", "claude-3-sonnet-20240229"}:   {538, 795, 0, 0},
	{"2025-06-14", "claude-sonnet-4"}:            {168, 85, 0, 0},
	{"2025-07-01", "claude-sonnet-4-20250514"}:   {50, 25, 0, 0},
	{"2025-11-08", "claude-sonnet-4-5-20250929"}: {100, 50, 0, 0},
	{"2025-11-19", "claude-sonnet-4-5-20250929"}: {9, 738, 164054, 141272},
	{"2026-02-10", "claude-haiku-4-5-20251001"}:  {24, 7, 14285, 95343},
	{"2026-02-10", "claude-opus-4-6"}:            {1633, 1811, 57373, 527032},
	{"2026-02-11", "claude-opus-4-6"}:            {183, 38905, 351961, 14938375},
	{"2026-02-11", "claude-sonnet-4-5-20250929"}: {15, 3, 42176, 34159},
	{"2026-02-23", "gpt-5.3-codex"}:              {1189137, 105371, 0, 24400768},
	{"2026-02-24", "gpt-5.3-codex"}:              {1458055, 66257, 0, 14299392},
	{"2026-02-26", "claude-haiku-4-5-20251001"}:  {90, 809, 56249, 382394},
	{"2026-02-27", "claude-opus-4-6"}:            {6, 5, 14063, 75474},
	{"2026-05-12", "gpt-5.2"}:                    {1300, 450, 0, 300},
	{"2026-06-15", "claude-haiku-4-5-20251001"}:  {960, 320, 0, 0},
}

// TestCorpusExtraction converts every corpus file in process and sums the
// usage of its events as the projection does (per key, the last of a
// streamed message): the sums are ccusage's.
func TestCorpusExtraction(t *testing.T) {
	dir := corpus.RequireHarnesses(t)
	sums, err := sumFiles(corpusFiles(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]string][4]int64{}
	for k, v := range sums {
		if !v.IsZero() {
			got[k] = [4]int64{v.Input, v.Output, v.CacheCreation, v.CacheRead}
		}
	}
	for k, w := range corpusDaily {
		if got[k] != w {
			t.Errorf("%s %s: %v, want %v", k[0], k[1], got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := corpusDaily[k]; !ok {
			t.Errorf("%s %s: %v, which ccusage does not count", k[0], k[1], g)
		}
	}
}
