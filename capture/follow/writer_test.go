package follow_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// TestARestartedWatcherTakesBackItsOwnLeases runs a watcher whose
// connection then dies without releasing its leases (a killed process),
// with a lease TTL far longer than the test: a watcher of another writer
// is refused the session, and a restarted watcher of the same writer
// (machine and roots) takes it back at once and publishes what was
// appended.
func TestARestartedWatcherTakesBackItsOwnLeases(t *testing.T) {
	srv := testnats.Start(t, embedded.Config{})
	ctx := context.Background()
	cfg := bus.StreamConfig{LeaseTTL: time.Hour}
	store := func(writer string) (*bus.Store, func()) {
		nc := srv.Conn(t)
		st, err := bus.NewStore(ctx, nc, bus.WithStreamConfig(cfg), bus.WithWriter(writer), bus.WithRetryMaxElapsed(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return st, nc.Close
	}
	root := t.TempDir()
	roots := []follow.Root{{Format: capture.FormatClaudeCode, Dir: root}}
	me := follow.WriterName("host-a", roots)
	data, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ls := bytes.SplitAfter(data, []byte("\n"))
	path := filepath.Join(root, "proj", "7d1c2a40-0000-4000-8000-00000000a001.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Join(ls[:8], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	st1, kill := store(me)
	w1 := runWatcher(t, follow.Config{Store: st1, Roots: roots})
	live, _ := w1.wait(t, 0, time.Minute, "publication", kind(follow.ReportPublished))
	kill() // the process dies: its lease stays for the TTL (an hour)
	w1.stop(t)

	appendTo(t, path, bytes.Join(ls[8:12], nil))
	other, closeOther := store(follow.WriterName("host-b", roots))
	defer closeOther()
	w2 := runWatcher(t, follow.Config{Store: other, Roots: roots})
	r, _ := w2.wait(t, 0, time.Minute, "retry report", func(r follow.Report) bool {
		return r.Kind == follow.ReportRetry || r.Kind == follow.ReportLive
	})
	if r.Kind != follow.ReportRetry || !errors.Is(r.Err, bus.ErrAlreadyOwned) && !errors.Is(r.Err, bus.ErrAlreadyExists) {
		t.Fatalf("another writer's watcher: %s %v, want a retry: already owned", r.Kind, r.Err)
	}
	w2.stop(t)

	appendTo(t, path, bytes.Join(ls[12:], nil))
	st3, closeMe := store(me)
	defer closeMe()
	w3 := runWatcher(t, follow.Config{Store: st3, Roots: roots})
	w3.wait(t, 0, time.Minute, "live report of the restarted watcher", func(r follow.Report) bool {
		return r.Kind == follow.ReportLive && r.SessionID == live.SessionID
	})
	if n := w3.count(follow.ReportRetry); n != 0 {
		t.Errorf("the restarted watcher retried %d times:\n%s", n, w3.String())
	}
	want := newStore(t)
	if _, err := follow.Import(ctx, want, capture.FormatClaudeCode, path, data); err != nil {
		t.Fatal(err)
	}
	wantRecs, err := want.Records(ctx, live.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	w3.wait(t, 0, time.Minute, "publication of the last line", func(r follow.Report) bool {
		if r.Kind != follow.ReportPublished {
			return false
		}
		recs, err := st3.Records(ctx, live.SessionID)
		return err == nil && len(recs) == len(wantRecs)
	})
	sameStored(t, st3, want, live.SessionID)
}

// TestOneWatcherPerWriterIdentity: a second lock of the same machine and
// roots is refused while the first is held, taken once it is released.
func TestOneWatcherPerWriterIdentity(t *testing.T) {
	dir := t.TempDir()
	roots := []follow.Root{{Format: capture.FormatClaudeCode, Dir: "/r/a"}, {Format: capture.FormatCodex, Dir: "/r/b"}}
	first, err := follow.LockWriter(dir, follow.WriterName("h", roots))
	if err != nil {
		t.Fatal(err)
	}
	if first.Name == "" {
		t.Skip("no flock on this system: no writer identity")
	}
	reversed := []follow.Root{roots[1], roots[0]}
	var busy *follow.WriterBusyError
	if _, err := follow.LockWriter(dir, follow.WriterName("h", reversed)); !errors.As(err, &busy) {
		t.Fatalf("a second lock of the same roots: %v", err)
	}
	other, err := follow.LockWriter(dir, follow.WriterName("h", roots[:1]))
	if err != nil || other.Name == first.Name {
		t.Fatalf("a lock of other roots: %+v, %v", other, err)
	}
	_ = other.Unlock()
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	again, err := follow.LockWriter(dir, follow.WriterName("h", reversed))
	if err != nil || again.Name != first.Name {
		t.Fatalf("the lock after its release: %+v, %v", again, err)
	}
	_ = again.Unlock()
}

func appendTo(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}
