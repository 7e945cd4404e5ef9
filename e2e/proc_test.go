package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// bins holds the paths of the binaries TestMain built.
var bins struct {
	dshq, projector, query, natsServer, harnesssim string
}

func TestMain(m *testing.M) {
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// buildAndRun builds the binaries into a temp dir (or takes them from
// $DSHQ_E2E_BIN; with $DSHQ_E2E_RACE set they are built with -race), runs the
// tests, checks for leaked goroutines and removes the dir.
func buildAndRun(m *testing.M) (int, error) {
	dir := os.Getenv("DSHQ_E2E_BIN")
	if dir == "" {
		tmp, err := os.MkdirTemp("", "dshq-e2e-bin-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
		// One build of every main package (go names each binary after its
		// package path, nats-server/v2 → nats-server), so that the go command
		// compiles them in parallel. nats-server, which changes only with
		// go.mod, comes from the cache of an earlier run when it can
		// (cachedNATSServer).
		var flags []string
		if os.Getenv("DSHQ_E2E_RACE") != "" {
			flags = append(flags, "-race")
		}
		pkgs := []string{"github.com/dshq/dshq/cmd/dshq", "github.com/dshq/dshq/cmd/projector", "github.com/dshq/dshq/cmd/query",
			"github.com/dshq/dshq/e2e/internal/harnesssim"}
		bins.natsServer = filepath.Join(dir, "nats-server")
		cache, hit := cachedNATSServer(flags)
		if hit {
			bins.natsServer = cache
		} else {
			pkgs = append(pkgs, natsServerPkg)
		}
		args := append(append([]string{"build"}, flags...), "-o", dir+string(filepath.Separator))
		args = append(args, pkgs...)
		if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		if !hit && cache != "" {
			storeNATSServer(bins.natsServer, cache)
		}
	} else {
		bins.natsServer = filepath.Join(dir, "nats-server")
	}
	bins.dshq = filepath.Join(dir, "dshq")
	bins.projector = filepath.Join(dir, "projector")
	bins.query = filepath.Join(dir, "query")
	bins.harnesssim = filepath.Join(dir, "harnesssim")
	code := m.Run()
	if code == 0 {
		// Every goroutine of the test process (process waiters, query
		// loops, NATS connections) has an owner that stopped it.
		// Bleve (linked in through the tools and query packages) starts its
		// analysis workers at init, for the life of the process.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker")); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			code = 1
		}
	}
	return code, nil
}

// proc is a child process whose stdout and stderr lines are kept for
// waiting on and for the failure log. The test that starts it owns it: a
// cleanup kills it if it still runs.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *lineLog
	done  chan struct{} // closed when the process has exited
	err   error         // the exit error, set before done is closed
}

// startProc starts bin with args and extra environment entries.
func startProc(t testing.TB, name, bin string, args, env []string) *proc {
	t.Helper()
	p := &proc{name: name, out: newLineLog(), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("--- %s output (last lines) ---\n%s", p.name, p.out.tail(400))
		}
	})
	return p
}

// waitLine waits until a line of the process's output satisfies match and
// returns it; it fails the test when d passes or the process exits first.
func (p *proc) waitLine(t testing.TB, d time.Duration, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	from := 0
	for {
		lines, changed := p.out.since(from)
		for _, l := range lines {
			if match(l) {
				return l
			}
		}
		from += len(lines)
		select {
		case <-changed:
		case <-p.done:
			if lines, _ := p.out.since(from); len(lines) > 0 {
				continue
			}
			t.Fatalf("%s exited (%v) before %s", p.name, p.err, what)
		case <-deadline.C:
			t.Fatalf("%s: timed out after %v waiting for %s", p.name, d, what)
		}
	}
}

// wait waits for the process to exit by itself within d and returns its
// exit error.
func (p *proc) wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("%s did not exit within %v", p.name, d)
		return nil
	}
}

// stop sends SIGTERM and waits for a clean exit (status 0) within d.
func (p *proc) stop(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("%s had already exited: %v", p.name, p.err)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
	if err := p.wait(t, d); err != nil {
		t.Fatalf("%s did not shut down cleanly: %v", p.name, err)
	}
}

// kill sends SIGKILL (a crash) and waits for the process to be gone.
func (p *proc) kill(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s still running 30s after SIGKILL", p.name)
	}
}

// lineLog is an io.Writer that keeps complete lines and signals each new one.
type lineLog struct {
	mu      sync.Mutex // guards the fields below
	lines   []string
	partial bytes.Buffer
	changed chan struct{} // closed and replaced when lines grow
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial.Write(b)
	grew := false
	for {
		i := bytes.IndexByte(l.partial.Bytes(), '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.partial.Next(i + 1)[:i]))
		grew = true
	}
	if grew {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(b), nil
}

// since returns the lines from index from on and a channel closed when more
// arrive.
func (l *lineLog) since(from int) ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if from > len(l.lines) {
		from = len(l.lines)
	}
	return append([]string(nil), l.lines[from:]...), l.changed
}

func (l *lineLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond until it holds, failing the test after d. Each check
// is a query of a live system; the pause between checks is a poll
// interval, not a wait for the condition.
func waitFor(t testing.TB, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last error: %v)", d, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const natsServerPkg = "github.com/nats-io/nats-server/v2"

// natsServerCacheKey names the nats-server binary that go build makes with
// flags from this module: a hash of the Go toolchain and target, the flags,
// and the path, version and checksum of every module it is built from (as
// this module's go.mod resolves them). It fails, and nothing is cached,
// when one of those modules has no version.
func natsServerCacheKey(flags []string) (string, error) {
	env, err := exec.Command("go", "env", "GOVERSION", "GOOS", "GOARCH", "CGO_ENABLED", "GOFLAGS", "GOEXPERIMENT").Output()
	if err != nil {
		return "", err
	}
	mods, err := exec.Command("go", "list", "-deps", "-f",
		`{{with .Module}}{{.Path}}@{{.Version}} {{.Sum}}{{with .Replace}} => {{.Path}}@{{.Version}} {{.Sum}}{{end}}{{end}}`,
		natsServerPkg).Output()
	if err != nil {
		return "", err
	}
	// A module without a version (a directory replacement, a workspace
	// module) can change without go.mod changing.
	if unversioned := regexp.MustCompile(`@(\s|$)`); unversioned.Match(mods) {
		return "", fmt.Errorf("nats-server is built from a module without a version")
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s", env, strings.Join(flags, " "), mods)
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// natsServerCachePath is where a nats-server binary with key is kept
// between test runs.
func natsServerCachePath(key string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "dshq-e2e", "nats-server-"+key), nil
}

// cachedNATSServer returns where the nats-server binary for flags is
// cached and whether it is there ("" when it cannot be cached).
func cachedNATSServer(flags []string) (path string, hit bool) {
	key, err := natsServerCacheKey(flags)
	if err != nil {
		return "", false
	}
	if path, err = natsServerCachePath(key); err != nil {
		return "", false
	}
	fi, err := os.Stat(path)
	return path, err == nil && fi.Mode().IsRegular() && fi.Mode()&0o100 != 0
}

// storeNATSServer copies a freshly built nats-server to path in the cache:
// to a temporary file beside it, then renamed, so that a concurrent run
// never sees a partial binary. Failures only mean no cache.
func storeNATSServer(built, path string) {
	if os.MkdirAll(filepath.Dir(path), 0o755) != nil {
		return
	}
	src, err := os.Open(built)
	if err != nil {
		return
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nats-server-*")
	if err != nil {
		return
	}
	_, err = io.Copy(tmp, src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o755)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
}
