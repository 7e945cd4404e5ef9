package follow_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/internal/testnats"
)

func newStore(t *testing.T) *bus.Store {
	t.Helper()
	ctx := context.Background()
	st, err := bus.NewStore(ctx, testnats.Start(t, embedded.Config{}).Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestResume stores only the own session of a transcript whose inline
// sidechains give two child sessions (a crash between the appends of a
// file's sessions), and checks that Resume replays exactly the children,
// that nothing is left to replay once they are stored, and that a file
// that no longer begins with the stored lines is a *ChangedError.
//
// It runs on our own transcript with inline sidechains, and on the shared
// corpus's.
func TestResume(t *testing.T) {
	t.Run("fixtures", func(t *testing.T) {
		testResume(t, filepath.Join("..", "claudecode", "testdata", "sidechain.jsonl"))
	})
	t.Run("shared", func(t *testing.T) {
		dir := corpus.RequireHarnesses(t)
		testResume(t, filepath.Join(dir, "claude-code", "daaain__claude-code-log", "test", "test_data", "sidechain_integrated.jsonl"))
	})
}

func testResume(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := newStore(t)
	ups, err := capture.Convert(follow.NewConverter(capture.FormatClaudeCode, path, nil), data)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := capture.Collect(ups)
	if err != nil || len(logs) < 2 {
		t.Fatalf("%d logs (%v), want the file's and its children", len(logs), err)
	}
	children := len(logs) - 1
	if _, err := st.Import(ctx, logs[0].Header, logs[0].Events); err != nil {
		t.Fatal(err)
	}
	r, err := follow.Resume(ctx, st, capture.FormatClaudeCode, path, data)
	if err != nil {
		t.Fatal(err)
	}
	if r.OwnID != logs[0].Header.Header.ID || r.Lines.Offset() != int64(len(data)) || r.Stored[r.OwnID] != int64(len(logs[0].Events)) {
		t.Fatalf("resumed %q at offset %d with %d events stored", r.OwnID, r.Lines.Offset(), r.Stored[r.OwnID])
	}
	replayed, err := capture.Collect(r.Replay)
	if err != nil || len(replayed) != children {
		t.Fatalf("replay: %d logs (%v), want the %d children", len(replayed), err, children)
	}
	for i, l := range replayed {
		w := logs[i+1]
		if !bytes.Equal(l.Header.Raw, w.Header.Raw) || len(l.Events) != len(w.Events) {
			t.Fatalf("replayed %s: %d events, want %s with %d", l.Header.Header.ID, len(l.Events), w.Header.Header.ID, len(w.Events))
		}
		if _, err := st.Import(ctx, l.Header, l.Events); err != nil {
			t.Fatal(err)
		}
	}
	if r, err = follow.Resume(ctx, st, capture.FormatClaudeCode, path, data); err != nil || len(r.Replay) != 0 {
		t.Fatalf("resume of a stored file: %v, %d updates to replay", err, len(r.Replay))
	}
	var changed *follow.ChangedError
	for name, d := range map[string][]byte{
		"truncated": data[:len(data)/2],
		"rewritten": bytes.Replace(data, []byte(`"type"`), []byte(`"type" `), 1),
	} {
		if _, err := follow.Resume(ctx, st, capture.FormatClaudeCode, path, d); !errors.As(err, &changed) || changed.SessionID != r.OwnID {
			t.Errorf("%s file: %v, want a *ChangedError of %s", name, err, r.OwnID)
		}
	}
	// Import of a stored file: every session present.
	res, err := follow.Import(ctx, st, capture.FormatClaudeCode, path, data)
	if err != nil || res.Published() || len(res.Sessions) != children+1 || res.Children != children {
		t.Fatalf("import of a stored file: %+v, %v", res, err)
	}
}
