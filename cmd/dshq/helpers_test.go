package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/node"
	"github.com/dshq/dshq/query"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// pipeline is a running all-in-one node (embedded NATS with JetStream on a
// random loopback port, projector, query, tools, admin, feed) under a
// temporary home.
type pipeline struct {
	t   testing.TB
	url string
	env map[string]string
}

// startPipeline runs node.Run until the test ends.
func startPipeline(t testing.TB) *pipeline {
	return startPipelineSync(t, true)
}

// startPipelineSync is startPipeline with the embedded server syncing every
// write (relaxed=false, the serve default) or periodically.
func startPipelineSync(t testing.TB, relaxed bool) *pipeline {
	t.Helper()
	return startPipelineConfig(t, relaxed, nil)
}

// startPipelineConfig is startPipelineSync with adjust applied to the
// node's configuration (when not nil).
func startPipelineConfig(t testing.TB, relaxed bool, adjust func(*node.Config)) *pipeline {
	t.Helper()
	cfg := node.Config{
		Home:        t.TempDir(),
		Listen:      "127.0.0.1:0",
		RelaxedSync: relaxed, // tests need no power-loss durability
		Parts:       node.All,
		Logger:      testenv.Quiet(),
	}
	if adjust != nil {
		adjust(&cfg)
	}
	n := testenv.RunUntilReady(t, func(ctx context.Context, ready func(node.Info)) error { return node.Run(ctx, cfg, ready) })
	return &pipeline{t: t, url: n.Info.ClientURL, env: map[string]string{"DSH_NATS_URL": n.Info.ClientURL}}
}

// result is one CLI run.
type result struct {
	stdout, stderr string
	code           int
}

// dshq runs the CLI in-process against the pipeline (DSH_NATS_URL). The
// notices of a wait for NATS (a request past its deadline on a machine
// busy with other tests is retried, and says so) are logged and left out
// of the run's stderr, which the tests compare whole; importwait_test.go
// checks them through runCLI.
func (p *pipeline) dshq(args ...string) result {
	p.t.Helper()
	r := runCLI(p.t, p.env, "", args...)
	r.stderr = withoutWaitNotices(p.t, r.stderr)
	return r
}

// withoutWaitNotices returns stderr without the lines natsWaiter prints,
// logging each.
func withoutWaitNotices(t testing.TB, stderr string) string {
	t.Helper()
	if !strings.Contains(stderr, "dshq: waiting for NATS at ") {
		return stderr
	}
	var kept strings.Builder
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if strings.HasPrefix(line, "dshq: waiting for NATS at ") ||
			(strings.HasPrefix(line, "dshq: NATS at ") && strings.HasSuffix(line, " is back: continuing\n")) {
			t.Logf("the CLI waited: %s", strings.TrimSuffix(line, "\n"))
			continue
		}
		kept.WriteString(line)
	}
	return kept.String()
}

// runCLI runs the CLI in-process with env as its whole environment.
func runCLI(t testing.TB, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	// The bound of one run: the corpus import (154 files) has taken more
	// than 90 s under the race detector on two cores shared with other
	// test runs.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	getenv := func(k string) string { return env[k] }
	code := runContext(ctx, args, getenv, strings.NewReader(stdin), &out, &errb)
	return result{stdout: out.String(), stderr: errb.String(), code: code}
}

// ok fails the test unless the run succeeded.
func (r result) ok(t testing.TB) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr: %s", r.code, r.stderr)
	}
	return r
}

// decode decodes the run's stdout as JSON into v.
func (r result) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
}

// golden compares got with testdata/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (run with -update after review)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// webPreset is the fixture log web-preset.jsonl: six events of an older
// web fixture shape under a {{cwd}}/workspace header.
func webPreset(t testing.TB) string {
	t.Helper()
	return filepath.Join(corpus.Fixtures(t), "web-preset.jsonl")
}

// waitGeneration waits until the pipeline's projection has applied gen,
// however long this machine takes (bounded by the test binary's deadline
// only): a command asked afterwards with --min-generation gen answers at
// once instead of racing its own timeout against a loaded projector.
func (p *pipeline) waitGeneration(t testing.TB, gen uint64) {
	t.Helper()
	nc, err := natsconn.Connect(natsconn.Options{URL: p.url})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	qc := query.NewClient(nc)
	for {
		_, err := qc.ListSessions(context.Background(), dshq.SessionListRequest{Limit: 1}, query.WithMinGeneration(gen), query.WithTimeoutMs(30000))
		if dshq.ErrorCode(err) != dshq.CodeNotCaughtUp {
			if err != nil {
				t.Fatalf("waiting for generation %d: %v", gen, err)
			}
			return
		}
	}
}
