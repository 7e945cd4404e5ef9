package follow_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/internal/corpus"
)

// tornFiles are Claude Code transcripts of at least ten lines: our own
// fixture, and (with ../shared) the corpus file the issue reproduced with.
func tornFiles(t *testing.T) map[string]string {
	files := map[string]string{"fixture": filepath.Join("..", "claudecode", "testdata", "turns.jsonl")}
	if dir, err := corpus.HarnessesDir(); err == nil {
		files["short"] = filepath.Join(dir, "claude-code", "marot__spotter", "test", "fixtures", "transcripts", "short.jsonl")
	}
	return files
}

// TestAnImportDuringAWriteStoresNoTornLine imports the first five lines
// of a transcript and half of its sixth (a write in progress), then the
// first ten lines: the stored log is the one a one-shot import of the ten
// lines gives, with no invalid line.
func TestAnImportDuringAWriteStoresNoTornLine(t *testing.T) {
	for name, src := range tornFiles(t) {
		t.Run(name, func(t *testing.T) {
			all, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			ls := bytes.SplitAfter(all, []byte("\n"))
			ten := bytes.Join(ls[:10], nil)
			partial := append(bytes.Join(ls[:5], nil), ls[5][:len(ls[5])/2]...)
			path := filepath.Join(t.TempDir(), "7d1c2a40-0000-4000-8000-00000000a001.jsonl")
			ctx := context.Background()

			want := newStore(t)
			oneShot, err := follow.Import(ctx, want, capture.FormatClaudeCode, path, ten)
			if err != nil || oneShot.InvalidLines != 0 {
				t.Fatalf("one-shot import: %+v, %v", oneShot, err)
			}

			st := newStore(t)
			first, err := follow.Import(ctx, st, capture.FormatClaudeCode, path, partial)
			if err != nil {
				t.Fatal(err)
			}
			if first.Held == 0 {
				t.Errorf("the import of a file cut in its sixth line held nothing back: %+v", first)
			}
			second, err := follow.Import(ctx, st, capture.FormatClaudeCode, path, ten)
			if err != nil {
				t.Fatal(err)
			}
			if second.InvalidLines != 0 {
				t.Errorf("the second import counts %d invalid lines", second.InvalidLines)
			}
			id := oneShot.Sessions[0].ID
			got, err := st.Records(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := want.Records(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(exp) {
				t.Fatalf("stored %d records after the import during the write, a one-shot import stores %d", len(got), len(exp))
			}
			for i := range got {
				if !bytes.Equal(got[i].Data, exp[i].Data) {
					t.Fatalf("record %d differs:\n got %s\nwant %s", i, got[i].Data, exp[i].Data)
				}
			}
			t.Logf("%s: %d events, %d invalid lines", name, oneShot.Events, second.InvalidLines)
		})
	}
}

// TestTwoFilesClaimingOneSessionAreToldApartFromATruncation imports a
// transcript, then a second file stating the same session that departs from
// it at its third line, then a truncated copy: each refusal says what
// happened, and neither names the file (the reports do).
func TestTwoFilesClaimingOneSessionAreToldApartFromATruncation(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := newStore(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "7d1c2a40-0000-4000-8000-00000000a001.jsonl")
	if _, err := follow.Import(ctx, st, capture.FormatClaudeCode, path, data); err != nil {
		t.Fatal(err)
	}
	ls := bytes.SplitAfter(data, []byte("\n"))
	other := bytes.Join(append(append(ls[:2:2], []byte(`{"type":"summary","summary":"another file"}`+"\n")), ls[2:]...), nil)
	second := filepath.Join(dir, "copy.jsonl")
	for name, tc := range map[string]struct {
		data      []byte
		otherFile bool
		says      string
	}{
		"second file": {other, true, "two files claim this session: it is stored from a file of 19 lines that this one departs from at line 3"},
		"truncated":   {bytes.Join(ls[:4], nil), false, "it was truncated"},
	} {
		_, err := follow.Import(ctx, st, capture.FormatClaudeCode, second, tc.data)
		var changed *follow.ChangedError
		if !errors.As(err, &changed) || changed.OtherFile != tc.otherFile || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want a *ChangedError (other file %v) saying %q", name, err, tc.otherFile, tc.says)
			continue
		}
		if strings.Contains(err.Error(), second) || strings.Contains(err.Error(), "rewritten or truncated") {
			t.Errorf("%s: %q names the file or guesses", name, err)
		}
	}
}
