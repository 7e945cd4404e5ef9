package projection

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

func withBootID(boot string) Option {
	return func(c *config) { c.bootID = func() string { return boot } }
}

// The child process of TestProjector_CommitsWithoutFsyncSurviveAKilledProcess
// reads these.
const (
	childURLEnv = "DSHQ_TEST_CHILD_NATS_URL"
	childDirEnv = "DSHQ_TEST_CHILD_DIR"
	childAtEnv  = "DSHQ_TEST_CHILD_STOP_AT"
)

// listeningEnv is newEnv with a network listener, for a child process.
func listeningEnv(t *testing.T) (*env, string) {
	t.Helper()
	srv := testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed, Listen: "127.0.0.1:0"})
	js := testnats.JetStream(t, srv.Conn(t))
	cfg := bus.StreamConfig{LeaseTTL: 2 * time.Second}
	if _, err := bus.EnsureStream(context.Background(), js, cfg); err != nil {
		t.Fatalf("ensure stream: %v", err)
	}
	kv, err := bus.EnsureLeaseBucket(context.Background(), js, cfg)
	if err != nil {
		t.Fatalf("ensure lease bucket: %v", err)
	}
	return &env{t: t, js: js, kv: kv}, srv.ClientURL()
}

func TestProjector_CommitsWithoutFsyncSurviveAKilledProcess(t *testing.T) {
	if bootID() == "" {
		t.Skip("the store syncs every commit where the boot cannot be named")
	}
	e, url := listeningEnv(t)
	last := e.publishAll(mixedCorpus(t))
	want := e.cleanRun(last, WithBatchSize(7))

	dir := t.TempDir()
	committed, epoch := killChildAfterCommit(t, url, dir, last/2)
	inst := instanceDir(t, dir)
	if _, err := os.Stat(filepath.Join(inst, "projection.db"+unsyncedSuffix)); err != nil {
		t.Fatalf("the killed projector's store has no unsynced marker: %v", err)
	}

	again := e.start(dir, WithBatchSize(7))
	defer again.stop()
	if got := again.p.Epoch(); got != epoch {
		t.Errorf("epoch after the kill = %s, want the killed projector's %s (resumed, not rebuilt)", got, epoch)
	}
	if !again.p.current().store.resumed {
		t.Error("the store was not opened as resumed after its process was killed")
	}
	if got := again.p.Generation(); got < committed {
		t.Errorf("generation after the kill = %d, want at least %d: a commit made without fsync was lost", got, committed)
	}
	waitGen(t, again.p, last)
	want.check(t, again.p, "after the kill")
}

// killChildAfterCommit runs a projector on dir in a child process (this
// test binary) that stops, holding everything, once it has committed a
// batch reaching stream sequence at, and SIGKILLs it there: no sync, no
// Close. It returns the generation the child committed and its epoch.
func killChildAfterCommit(t *testing.T, url, dir string, at uint64) (uint64, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProjectorChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), childURLEnv+"="+url, childDirEnv+"="+dir, childAtEnv+"="+strconv.FormatUint(at, 10))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A child that never commits is killed too, and the scan below ends.
	stuck := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() })
	defer stuck.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var gen uint64
		var epoch string
		if _, err := fmt.Sscanf(sc.Text(), "committed %d epoch %s", &gen, &epoch); err == nil {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Fatalf("child ended with %v, want killed", err)
			}
			return gen, epoch
		}
	}
	t.Fatalf("child ended before committing sequence %d: %v", at, cmd.Wait())
	return 0, ""
}

// TestProjectorChildProcess is the projector that
// TestProjector_CommitsWithoutFsyncSurviveAKilledProcess kills.
func TestProjectorChildProcess(t *testing.T) {
	url := os.Getenv(childURLEnv)
	if url == "" {
		t.Skip("the child process of TestProjector_CommitsWithoutFsyncSurviveAKilledProcess")
	}
	at, err := strconv.ParseUint(os.Getenv(childAtEnv), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	committed := make(chan uint64, 1)
	hold := make(chan struct{}) // never closed: the parent kills the process
	p, err := Open(context.Background(), js, os.Getenv(childDirEnv), WithBatchSize(7), WithLogger(quietLogger()),
		withHook(func(point string, gen uint64) error {
			if point == "before-ack" && gen >= at {
				committed <- gen
				<-hold
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	go p.Run(context.Background())
	gen := <-committed
	fmt.Printf("committed %d epoch %s\n", gen, p.Epoch())
	<-hold
}

func instanceDir(t *testing.T, dir string) string {
	t.Helper()
	name, err := os.ReadFile(filepath.Join(dir, currentFile))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, strings.TrimSpace(string(name)))
}

// stopWithoutSync stops r as a crash would leave its store: the bbolt file
// is closed under the projector, with no sync, so its marker stays.
func stopWithoutSync(t *testing.T, r *running) {
	t.Helper()
	if err := r.p.current().store.db.Close(); err != nil {
		t.Fatal(err)
	}
	_ = r.stop() // Run fails on the closed store, or ends idle
}

func TestOpen_RebuildsAStoreLeftUnsyncedWhenTheSystemStopped(t *testing.T) {
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	want := e.cleanRun(last)

	var synced atomic.Pointer[[]byte] // the store file a third of the way in
	cases := []struct {
		name     string
		stop     func(t *testing.T, r *running, inst string)
		boot     string // of the restart
		noVerify bool   // the restart skips bbolt's consistency check
		rebuilt  bool
	}{
		{"a store closed cleanly is reopened on another boot", func(t *testing.T, r *running, _ string) {
			r.stop()
		}, "boot-b", false, false},
		{"a store left unsynced by a killed process is resumed on the same boot", func(t *testing.T, r *running, _ string) {
			stopWithoutSync(t, r)
		}, "boot-a", false, false},
		{"a store left unsynced when the system stopped is rebuilt", func(t *testing.T, r *running, _ string) {
			stopWithoutSync(t, r)
		}, "boot-b", false, true},
		{"a store torn when the system stopped is rebuilt, even unverified", func(t *testing.T, r *running, inst string) {
			stopWithoutSync(t, r)
			losePages(t, filepath.Join(inst, "projection.db"), *synced.Load())
		}, "boot-b", true, true},
		{"a store whose last sync failed is rebuilt", func(t *testing.T, r *running, inst string) {
			stopWithoutSync(t, r)
			if err := markUnsynced(filepath.Join(inst, "projection.db"), ""); err != nil {
				t.Fatal(err)
			}
		}, "boot-a", false, true},
		{"a store left unsynced and truncated is rebuilt", func(t *testing.T, r *running, inst string) {
			stopWithoutSync(t, r)
			truncate(t, filepath.Join(inst, "projection.db"), 0.5)
		}, "boot-a", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			synced.Store(nil)
			var target atomic.Pointer[Projector]
			p := e.open(dir, withBootID("boot-a"), WithBatchSize(7), withHook(func(point string, gen uint64) error {
				if point == "before-ack" && gen >= last/3 && synced.Load() == nil {
					// What the disk held at the last sync, as far as a power loss goes.
					b, err := os.ReadFile(filepath.Join(target.Load().current().dir, "projection.db"))
					if err != nil {
						return err
					}
					synced.Store(&b)
				}
				return nil
			}))
			target.Store(p)
			r := run(t, p)
			waitGen(t, r.p, last)
			epoch := r.p.Epoch()
			inst := instanceDir(t, dir)
			c.stop(t, r, inst)

			again := e.start(dir, withBootID(c.boot), WithVerifyOnOpen(!c.noVerify))
			defer again.stop()
			if got := again.p.Epoch() != epoch; got != c.rebuilt {
				t.Errorf("store rebuilt = %v, want %v", got, c.rebuilt)
			}
			waitGen(t, again.p, last)
			want.check(t, again.p, "")
		})
	}
}

func TestOpenStore_UnsyncedMarker(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	marker := path + unsyncedSuffix
	s, err := openStore(path, true, time.Second, withBoot("boot-a"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.db.NoSync {
		t.Error("a store opened with a boot syncs its commits")
	}
	if b, err := os.ReadFile(marker); err != nil || strings.TrimSpace(string(b)) != "boot-a" {
		t.Errorf("marker = %q, %v; want boot-a before the first commit", b, err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker after a clean close: %v, want none", err)
	}
	s, err = openStore(path, true, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if s.db.NoSync {
		t.Error("a store opened without a boot skips fsync")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker of a store that syncs: %v, want none", err)
	}
	if _, err := checkUnsynced(path, "boot-a"); err != nil {
		t.Errorf("check without a marker: %v", err)
	}
}

// losePages plays what a power loss may leave of a store written without
// fsync since it was synced: of the pages the file held then, every other
// one reads as it was then (bbolt reused it, and the write never landed).
func losePages(t *testing.T, path string, synced []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	for off := 2 * ps; off+ps <= min(len(b), len(synced)); off += 2 * ps {
		copy(b[off:off+ps], synced[off:off+ps])
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
