package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
)

// TestProjectorAndQueryAsSeparateProcesses runs the parts as an operator
// scales them: cmd/projector and cmd/query as their own processes against a
// nats-server. The projector is killed (SIGKILL) while two harnesses write;
// the query service stays up and answers a typed error instead of hanging;
// the restarted projector catches up to answers that match the harnesses'
// facts and equal those of a projector built from scratch in a fresh data
// directory.
func TestProjectorAndQueryAsSeparateProcesses(t *testing.T) {
	t.Parallel() // overlaps the crash test's wait for a lease to lapse
	ctx := testCtx(t, 3*time.Minute)
	url, _ := startPlainNATS(t)
	data := t.TempDir()
	proj := startProjector(t, "projector", url, data)
	qp := startQuery(t, "query", "--nats-url", url)
	nc, err := nats.Connect(url, nats.Name("e2e-client"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	q := query.NewClient(nc)

	const sims = 2
	procs := make([]*proc, sims)
	paths := make([]string, sims)
	dir := t.TempDir()
	for i := range procs {
		paths[i] = filepath.Join(dir, fmt.Sprintf("sim%d.json", i))
		procs[i] = startProc(t, fmt.Sprintf("harnesssim %d", i), bins.harnesssim, []string{
			"--nats-url", url, "--index", strconv.Itoa(i), "--facts", paths[i], "--bulk", strconv.Itoa(simBulk), "--gate"}, nil)
	}
	for _, p := range procs {
		p.waitLine(t, startTimeout, "the gate", func(l string) bool { return l == "gate" })
	}
	gate := streamLastSeq(t, nc)
	waitCaughtUp(t, q, gate)
	for _, p := range procs {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	var killedAt uint64
	waitFor(t, time.Minute, "the projector to apply records written after the gate", func() (bool, error) {
		page, err := q.ListSessions(ctx, dshq.SessionListRequest{Limit: 1})
		if err != nil {
			return false, err
		}
		killedAt = page.Generation
		return killedAt > gate, nil
	})
	proj.kill(t)

	t.Run("the query service answers a typed error while the projector is down", func(t *testing.T) {
		start := time.Now()
		_, err := q.ListSessions(ctx, dshqListAll)
		if code := dshq.ErrorCode(err); code != dshq.CodePersistenceFailed {
			t.Fatalf("error %v (code %q), want %s", err, code, dshq.CodePersistenceFailed)
		}
		// The code is the service's own: a hang would end in the client's
		// timeout instead. How long it took is a report.
		t.Logf("the typed error came after %v", time.Since(start).Round(time.Millisecond))
	})

	proj = startProjector(t, "projector (restarted)", url, data)
	for _, p := range procs {
		if err := p.wait(t, 2*time.Minute); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
	}
	c := loadCorpus(t, paths)
	last := streamLastSeq(t, nc)
	if killedAt >= last {
		t.Fatalf("the projector was killed at generation %d, after the harnesses finished (%d): not mid-stream", killedAt, last)
	}
	t.Logf("%d sessions, %d records; projector killed at generation %d", len(c.ids()), last, killedAt)
	waitCaughtUp(t, q, last)
	waitNoneLive(t, q)
	checkCorpus(t, ctx, q, nil, c)
	recovered := takeSnapshot(t, ctx, q, c)
	proj.stop(t, 30*time.Second)

	t.Run("a projector built from scratch answers exactly as the recovered one", func(t *testing.T) {
		fresh := startProjector(t, "projector (fresh data)", url, t.TempDir())
		waitCaughtUp(t, q, last)
		waitNoneLive(t, q)
		clean := takeSnapshot(t, ctx, q, c)
		for _, k := range recovered.keys {
			if recovered.answers[k] != clean.answers[k] {
				t.Errorf("%s:\nrecovered %s\n    clean %s", k, recovered.answers[k], clean.answers[k])
			}
		}
		fresh.stop(t, 30*time.Second)
	})
	qp.stop(t, 30*time.Second)
}

// startProjector runs cmd/projector on data and waits until it runs.
func startProjector(t testing.TB, name, url, data string) *proc {
	t.Helper()
	p := startProc(t, name, bins.projector, []string{"--nats-url", url, "--data", data}, nil)
	p.waitLine(t, startTimeout, `"projector running"`, func(l string) bool { return strings.Contains(l, `"projector running"`) })
	return p
}

// startQuery runs cmd/query with args and waits until it serves.
func startQuery(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	p := startProc(t, name, bins.query, args, nil)
	p.waitLine(t, startTimeout, "the query service", func(l string) bool { return strings.Contains(l, `"msg":"serving"`) })
	return p
}

// waitNoneLive waits until no session is live (every harness closed its
// write handles and the projection saw the leases go).
func waitNoneLive(t testing.TB, q *query.Client) {
	t.Helper()
	waitFor(t, time.Minute, "every write lease to be released", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		page, err := q.ListSessions(ctx, dshqListAll)
		if err != nil {
			return false, err
		}
		for _, r := range page.Items {
			if r.Live {
				return false, nil
			}
		}
		return true, nil
	})
}
