package follow_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
)

// TestImportOnKeepsTheCapturingMachine imports the first lines of a
// transcript with inline sidechains on machine "laptop", then the grown
// file on "desktop" (a file restored and continued elsewhere): the file's
// sessions keep naming the laptop, the children included, and the import
// continues instead of refusing the file as rewritten.
func TestImportOnKeepsTheCapturingMachine(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "sidechain.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	ctx := context.Background()
	path := "/home/u/.claude/projects/-work-orbit/sc-9.jsonl"
	lines := bytes.SplitAfter(data, []byte("\n"))
	first := bytes.Join(lines[:6], nil)
	if _, err := follow.ImportOn(ctx, st, capture.FormatClaudeCode, path, first, "laptop"); err != nil {
		t.Fatal(err)
	}
	res, err := follow.ImportOn(ctx, st, capture.FormatClaudeCode, path, data, "desktop")
	if err != nil {
		t.Fatalf("the grown file on another machine: %v", err)
	}
	if len(res.Sessions) < 2 {
		t.Fatalf("sessions %+v, want the transcript and its children", res.Sessions)
	}
	for _, s := range res.Sessions {
		recs, err := st.Records(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(recs[0].Data, []byte(`"machine":"laptop"`)) {
			t.Errorf("%s: header %s, want machine laptop", s.ID, recs[0].Data)
		}
	}
	if _, err := follow.ImportOn(ctx, st, capture.FormatClaudeCode, path, data, "bad\nname"); err == nil {
		t.Error("a machine name with a newline was taken")
	}
}
