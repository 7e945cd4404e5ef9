package follow_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/internal/corpus"
)

// watched is one running Watcher and what it reported.
type watched struct {
	mu      sync.Mutex
	reports []follow.Report
	changed chan struct{} // closed and replaced at every report
	cancel  context.CancelFunc
	done    chan error
}

// runWatcher runs a Watcher of cfg (Store and Roots set by the caller;
// Report is the test's) until the test ends or stop.
func runWatcher(t *testing.T, cfg follow.Config) *watched {
	t.Helper()
	w := &watched{changed: make(chan struct{}), done: make(chan error, 1)}
	cfg.Report = func(r follow.Report) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.reports = append(w.reports, r)
		close(w.changed)
		w.changed = make(chan struct{})
	}
	wr, err := follow.NewWatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- wr.Run(ctx) }()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop stops the watcher and waits for Run to return.
func (w *watched) stop(t *testing.T) {
	t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the watcher did not stop within a minute")
	}
}

// wait returns the first report (from the from-th on) that match accepts,
// failing the test when none comes within d.
func (w *watched) wait(t *testing.T, from int, d time.Duration, what string, match func(follow.Report) bool) (follow.Report, int) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for i := from; ; {
		w.mu.Lock()
		for ; i < len(w.reports); i++ {
			if match(w.reports[i]) {
				r := w.reports[i]
				w.mu.Unlock()
				return r, i + 1
			}
		}
		changed := w.changed
		w.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("no %s within %v; reports:\n%s", what, d, w.String())
		}
	}
}

// String lists the reports.
func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for _, r := range w.reports {
		fmt.Fprintf(&b, "  %s %s %s +%d %s %v\n", r.Kind, r.Path, r.SessionID, r.Events, r.Detail, r.Err)
	}
	return b.String()
}

// count returns the reports of kind so far.
func (w *watched) count(kind follow.ReportKind) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range w.reports {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

func kind(k follow.ReportKind) func(follow.Report) bool {
	return func(r follow.Report) bool { return r.Kind == k }
}

// sameStored fails the test unless session id holds the same records in
// both stores.
func sameStored(t *testing.T, got, want *bus.Store, id string) {
	t.Helper()
	ctx := context.Background()
	g, err := got.Records(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	w, err := want.Records(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != len(w) {
		t.Fatalf("session %s: %d records stored, %d by a one-shot import", id, len(g), len(w))
	}
	for i := range g {
		if !bytes.Equal(g[i].Data, w[i].Data) {
			t.Fatalf("session %s record %d:\n got %s\nwant %s", id, i, g[i].Data, w[i].Data)
		}
	}
}

// finalLineFiles are finished files whose last line has no newline: our
// own, and (with ../shared) the corpus's.
func finalLineFiles(t *testing.T) map[string][]byte {
	t.Helper()
	own, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"fixture": bytes.TrimSuffix(own, []byte("\n"))}
	if dir, err := harnessesDir(); err == nil {
		b, err := os.ReadFile(filepath.Join(dir, "claude-code", "daaain__claude-code-log", "test", "test_data", "representative_messages.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		files["representative_messages"] = b
	}
	return files
}

// TestWatchAndImportStoreTheSameFinalLine watches finished files whose last
// line has no newline and wants what a one-shot import stores, once the
// file went idle.
func TestWatchAndImportStoreTheSameFinalLine(t *testing.T) {
	for name, data := range finalLineFiles(t) {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, "proj", name+".jsonl")
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			want := newStore(t)
			res, err := follow.Import(context.Background(), want, capture.FormatClaudeCode, path, data)
			if err != nil || res.Held != 0 {
				t.Fatalf("import: %+v, %v", res, err)
			}
			st := newStore(t)
			w := runWatcher(t, follow.Config{Store: st, Roots: []follow.Root{{Format: capture.FormatClaudeCode, Dir: root}},
				Idle: 50 * time.Millisecond, ForcePoll: true, Poll: 20 * time.Millisecond})
			w.wait(t, 0, time.Minute, "idle report", kind(follow.ReportIdle))
			for _, s := range res.Sessions {
				sameStored(t, st, want, s.ID)
			}
		})
	}
}

func harnessesDir() (string, error) {
	return corpus.HarnessesDir()
}

// TestAFIFONeverBlocksTheWatcher creates more FIFOs named *.jsonl than the
// watcher has parallel slots, in a watched root, before and after it
// starts: a transcript written beside them is published, and the watcher
// stops.
func TestAFIFONeverBlocksTheWatcher(t *testing.T) {
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	mkfifo := func(name string) {
		t.Helper()
		if err := mkfifo(filepath.Join(proj, name)); err != nil {
			t.Skipf("no FIFO here: %v", err)
		}
	}
	mkfifo("before.jsonl")
	st := newStore(t)
	w := runWatcher(t, follow.Config{Store: st, Roots: []follow.Root{{Format: capture.FormatClaudeCode, Dir: root}}, Parallel: 2})
	w.wait(t, 0, time.Minute, "watching report", kind(follow.ReportWatching))
	for i := range 4 {
		mkfifo(fmt.Sprintf("fifo-%d.jsonl", i))
	}
	data, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, "turns.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	w.wait(t, 0, 30*time.Second, "live report of the transcript", func(r follow.Report) bool {
		return r.Kind == follow.ReportLive && filepath.Base(r.Path) == "turns.jsonl"
	})
	w.stop(t)
}

// TestWatchDecidesAWaitingHeaderAtIdle watches a transcript whose lines
// never state the session's facts (a summary line only): the header waits
// while the file may grow, and is decided once the file went idle, as a
// one-shot import decides it, so watch stores what import stores.
func TestWatchDecidesAWaitingHeaderAtIdle(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "proj", "5e5e5e5e-0000-4000-8000-000000000001.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"type":"summary","summary":"Kiln tuning","leafUuid":"u-9"}` + "\n")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := newStore(t)
	res, err := follow.Import(context.Background(), want, capture.FormatClaudeCode, path, data)
	if err != nil || len(res.Sessions) != 1 {
		t.Fatalf("import: %+v, %v", res, err)
	}
	st := newStore(t)
	w := runWatcher(t, follow.Config{Store: st, Roots: []follow.Root{{Format: capture.FormatClaudeCode, Dir: root}},
		Idle: 100 * time.Millisecond})
	w.wait(t, 0, time.Minute, "idle report", kind(follow.ReportIdle))
	sameStored(t, st, want, res.Sessions[0].ID)
}

// TestANewlineWrittenApartFromItsLineEndsIt: a writer that writes a line's
// JSON and its newline in two writes (Python's print does) leaves the
// watcher reading a whole JSON value without a newline. The watcher decides
// such a last line at the idle time, so the newline that follows ends it,
// and watch stores what an import of the finished file stores. Before, it
// took the line at once and the newline then began an empty line, an
// invalid-line event the import has not (issue 24, item 2, re-run by hand).
func TestANewlineWrittenApartFromItsLineEndsIt(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.TrimSuffix(data, []byte("\n"))
	cut := bytes.LastIndexByte(body, '\n') + 1
	first, last := data[:cut], body[cut:] // the lines but the last; the last's JSON
	root := t.TempDir()
	path := filepath.Join(root, "proj", "apart.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, first, 0o644); err != nil {
		t.Fatal(err)
	}
	// The newline is written once the watcher has read the JSON before it
	// (and published what that gave), before it reads on.
	var once sync.Once
	hookErr := make(chan error, 1)
	restore := follow.SetReadHook(func(p string, size int64) {
		if p != path || size != int64(len(first)+len(last)) {
			return
		}
		once.Do(func() { hookErr <- appendFile(path, []byte("\n")) })
	})
	st := newStore(t)
	w := runWatcher(t, follow.Config{Store: st, Roots: []follow.Root{{Format: capture.FormatClaudeCode, Dir: root}},
		Idle: 5 * time.Second, ForcePoll: true, Poll: 20 * time.Millisecond})
	defer restore()
	defer w.stop(t)
	w.wait(t, 0, time.Minute, "the first lines published", kind(follow.ReportPublished))
	if err := appendFile(path, last); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-hookErr:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the watcher never read the last line's JSON")
	}
	w.wait(t, 0, time.Minute, "idle report", kind(follow.ReportIdle))
	w.stop(t)

	want := newStore(t)
	res, err := follow.Import(context.Background(), want, capture.FormatClaudeCode, path, data)
	if err != nil || res.Held != 0 {
		t.Fatalf("import: %+v, %v", res, err)
	}
	for _, s := range res.Sessions {
		sameStored(t, st, want, s.ID)
	}
}

func appendFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
