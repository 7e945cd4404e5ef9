package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
)

// TestImportWhenTheServerGoesAway stops the server while an import runs:
// the import says it waits for NATS, gives up after --wait with a clear
// error and a non-zero exit, and the same import run again once the
// server is back stores everything, nothing twice.
func TestImportWhenTheServerGoesAway(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "capture", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "7d1c2a40-0000-4000-8000-00000000a001"
	files := t.TempDir()
	var paths []string
	for i := range 40 {
		sid := fmt.Sprintf("7d1c2a40-0000-4000-8000-%012d", i)
		p := filepath.Join(files, sid+".jsonl")
		if err := os.WriteFile(p, bytes.ReplaceAll(data, []byte(id), []byte(sid)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}

	dir := t.TempDir()
	start := func(listen string) *embedded.Server {
		t.Helper()
		srv, err := embedded.Start(context.Background(), embedded.Config{Dir: dir, Listen: listen, Sync: embedded.SyncRelaxed})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := start("127.0.0.1:0")
	url := srv.ClientURL()
	addr := strings.TrimPrefix(url, "nats://")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewStore(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	// The server goes away once the import has stored its first record.
	stopped, down := make(chan struct{}), make(chan error, 1)
	sub, err := nc.Subscribe("dsh.log.>", func(*nats.Msg) {
		select {
		case <-stopped:
		default:
			close(stopped)
			go func() { down <- srv.Shutdown(context.Background()) }()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	env := map[string]string{"DSH_NATS_URL": url, "HOME": t.TempDir()}
	r := runCLI(t, env, "", append([]string{"import", "--wait", "2s"}, paths...)...)
	nc.Close()
	<-stopped
	if r.code == 0 || !strings.Contains(r.stderr, "dshq: waiting for NATS at "+url) || !strings.Contains(r.stderr, "gave up") ||
		!strings.Contains(r.stderr, "run the same import again") {
		t.Fatalf("an import whose server went away: exit %d\nstderr %s", r.code, r.stderr)
	}
	if err := <-down; err != nil {
		t.Fatal(err)
	}
	srv = start(addr)
	defer srv.Shutdown(context.Background())

	again := runCLI(t, env, "", append([]string{"import", "--json"}, paths...)...)
	again.ok(t)
	var sum importSummary
	again.decode(t, &sum)
	if len(sum.Refused) != 0 || len(sum.Imported)+len(sum.Present) != len(paths) || len(sum.Imported) == 0 {
		t.Fatalf("the import run again: %d imported, %d present, %d refused (%+v)", len(sum.Imported), len(sum.Present), len(sum.Refused), sum.Refused)
	}
	third := runCLI(t, env, "", append([]string{"import", "--json"}, paths...)...).ok(t)
	var sum3 importSummary
	third.decode(t, &sum3)
	if len(sum3.Present) != len(paths) {
		t.Fatalf("a third import stored again: %d present of %d", len(sum3.Present), len(paths))
	}
}

// TestImportWithNoRootNamesEveryRoot runs dshq import with no path and no
// harness root: the one line names every root looked for, and that none
// exists, before any connection.
func TestImportWithNoRootNamesEveryRoot(t *testing.T) {
	home := t.TempDir()
	r := runCLI(t, map[string]string{"HOME": home, "DSH_NATS_URL": "nats://127.0.0.1:1"}, "", "import")
	for _, want := range []string{filepath.Join(home, ".claude", "projects"), filepath.Join(home, ".codex", "sessions"),
		filepath.Join(home, ".codex", "archived_sessions"), "none exists"} {
		if r.code == 0 || !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("exit %d, stderr %q: want %q", r.code, r.stderr, want)
		}
	}
}

// TestWaitNoticesAreLeftOutOfComparedStderr: the pipeline's runs drop
// exactly the lines natsWaiter prints (a loaded CI run's corpus import
// printed a retry notice before its refusal, and the comparison of the
// whole stderr failed), and keep every other line.
func TestWaitNoticesAreLeftOutOfComparedStderr(t *testing.T) {
	var b bytes.Buffer
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := &natsWaiter{stderr: &b, url: "nats://127.0.0.1:4222", wait: time.Minute, cancel: cancel}
	w.notice(context.DeadlineExceeded)
	b.WriteString(`{"error":{"code":"DSHQ_IMPORT_REFUSED","message":"16 of 154 files refused"}}` + "\n")
	w.lost(errors.New("EOF"))
	w.back()
	b.WriteString("dshq: waiting for a line that is not a notice\n")
	if ctx.Err() != nil {
		t.Fatalf("the waiter gave up: %v", context.Cause(ctx))
	}
	got := withoutWaitNotices(t, b.String())
	want := `{"error":{"code":"DSHQ_IMPORT_REFUSED","message":"16 of 154 files refused"}}` + "\n" +
		"dshq: waiting for a line that is not a notice\n"
	if got != want {
		t.Fatalf("from\n%s\ngot\n%q\nwant\n%q", b.String(), got, want)
	}
}
