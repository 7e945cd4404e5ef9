package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools/toolservice"
)

// The simulated workload: four concurrent harness processes, each writing a
// root, a fork, a subagent and simBulk sessions of simTurns turns.
const (
	numSims  = 4
	simBulk  = 12
	simTurns = 4
)

// TestConcurrentHarnessesCrashAndRebuild is the end-to-end proof: a real
// nats-server with the deployment example's configuration, `dshq serve`
// joining it as the trusted user, and four harness processes writing
// concurrently as the tenants teamA and teamB (two each). The dshq process
// is killed (SIGKILL) while the harnesses write and restarted; once it has
// caught up, searches, traces, reads and tool calls are checked against what
// the harnesses report they wrote. Then a rebuild runs while queries keep being answered —
// each answer complete, never a half-built view — and the rebuilt projection
// must answer exactly as the recovered one did.
func TestConcurrentHarnessesCrashAndRebuild(t *testing.T) {
	ctx := testCtx(t, 4*time.Minute)
	url, natsProc := startNATS(t)
	home := t.TempDir()
	serve, _ := startServe(t, "dshq serve", serveArgs(url, home))
	trusted := connectTrusted(t, url)
	q := query.NewClient(trusted)

	factsDir := t.TempDir()
	sims := make([]*proc, numSims)
	paths := make([]string, numSims)
	for i := range sims {
		paths[i] = filepath.Join(factsDir, fmt.Sprintf("sim%d.json", i))
		sims[i] = startProc(t, fmt.Sprintf("harnesssim %d", i), bins.harnesssim,
			append(simAuth(url, i), "--index", strconv.Itoa(i), "--facts", paths[i], "--bulk", strconv.Itoa(simBulk),
				"--turns", strconv.Itoa(simTurns), "--gate"), nil)
	}
	for _, s := range sims {
		s.waitLine(t, startTimeout, "the gate", func(l string) bool { return l == "gate" })
	}
	gate := streamLastSeq(t, trusted)
	waitCaughtUp(t, q, gate)

	// Release the harnesses and kill dshq once its projector has applied
	// some, but not all, of what they now write.
	for _, s := range sims {
		if _, err := io.WriteString(s.stdin, "go\n"); err != nil {
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
	serve.kill(t)
	writing := 0
	for _, s := range sims {
		select {
		case <-s.done:
		default:
			writing++
		}
	}
	serve, ready := startServe(t, "dshq serve (restarted)", append(serveArgs(url, home), "--metrics", "127.0.0.1:0"))

	for _, s := range sims {
		if err := s.wait(t, 2*time.Minute); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	c := loadCorpus(t, paths)
	last := streamLastSeq(t, trusted)
	if killedAt >= last {
		t.Fatalf("dshq was killed at generation %d, after the harnesses finished (%d): not mid-stream", killedAt, last)
	}
	t.Logf("%d sessions, %d records; dshq killed at generation %d of %d (gate %d) with %d of %d harnesses still writing",
		len(c.ids()), last, killedAt, last, gate, writing, numSims)
	waitCaughtUp(t, q, last)
	waitNoneLive(t, q)

	t.Run("the metrics report the generation and nothing quarantined", func(t *testing.T) {
		metricsURL, _ := ready["metrics"].(string)
		m := scrape(t, metricsURL)
		if m["dshq_projector_generation"] != float64(last) || m["dshq_projector_quarantined_records_total"] != 0 {
			t.Fatalf("generation %v (want %d), quarantined %v (want 0)", m["dshq_projector_generation"], last, m["dshq_projector_quarantined_records_total"])
		}
	})

	conns := map[string]*nats.Conn{}
	for _, tenant := range tenants {
		conns[tenant] = connectTenant(t, url, tenant, nil)
	}
	checkCorpus(t, ctx, q, func(run int, caller string) *toolservice.Client {
		return toolservice.NewClient(conns[tenantOf(run)], caller).InTenant(tenantOf(run))
	}, c)
	checkCLI(t, url, c, last)
	if t.Failed() {
		t.FailNow()
	}

	recovered := takeSnapshot(t, ctx, q, c)
	t.Run("a rebuild while queries run never shows a half-built view", func(t *testing.T) {
		rebuildWhileQuerying(t, ctx, trusted, q, c, recovered)
	})
	t.Run("the rebuilt projection answers exactly as the recovered one", func(t *testing.T) {
		rebuilt := takeSnapshot(t, ctx, q, c)
		for _, k := range recovered.keys {
			if recovered.answers[k] != rebuilt.answers[k] {
				t.Errorf("%s:\nrecovered %s\n  rebuilt %s", k, recovered.answers[k], rebuilt.answers[k])
			}
		}
	})
	// Last, as the slowest to fail: every message the projector committed,
	// before the crash too, must be on the live feed.
	t.Run("dshq tail replays each workspace's every event exactly once, across the crash", func(t *testing.T) {
		for _, run := range c.runs {
			checkTail(t, url, c, run)
		}
	})
	t.Run("the harnesses were refused nothing", func(t *testing.T) {
		if v := violationsLogged(natsProc); len(v) > 0 {
			t.Fatalf("permission violations: %v", v)
		}
	})
	serve.stop(t, 30*time.Second)
}

// snapshot is a set of answers of the query API with their generations
// removed, by request.
type snapshot struct {
	keys    []string
	answers map[string]string
}

// snapshotRequests are the requests a snapshot holds: sessions.list, then
// events.list and sessions.surface of every session, sessions.titles of all,
// then sessions.search of every phrase.
func snapshotRequests(c *corpus) []func(ctx context.Context, q *query.Client) (string, any, error) {
	reqs := []func(ctx context.Context, q *query.Client) (string, any, error){
		func(ctx context.Context, q *query.Client) (string, any, error) {
			p, err := q.ListSessions(ctx, dshqListAll)
			if p != nil {
				p.Generation = 0
			}
			return "sessions.list", p, err
		},
	}
	for _, id := range c.ids() {
		reqs = append(reqs, func(ctx context.Context, q *query.Client) (string, any, error) {
			p, err := q.ListEvents(ctx, dshq.SessionReadRequest{SessionID: id, Limit: dshq.MaxListLimit})
			if p != nil {
				p.Generation = 0
			}
			return "events.list " + id, p, err
		})
	}
	for _, id := range c.ids() {
		reqs = append(reqs, func(ctx context.Context, q *query.Client) (string, any, error) {
			p, err := q.ReadSurface(ctx, dshq.SessionReadRequest{SessionID: id, Limit: dshq.MaxListLimit})
			if p != nil {
				p.Generation = 0
			}
			return "sessions.surface " + id, p, err
		})
	}
	reqs = append(reqs, func(ctx context.Context, q *query.Client) (string, any, error) {
		p, err := q.ReadTitles(ctx, dshq.SessionTitlesRequest{SessionIDs: c.ids()})
		if p != nil {
			p.Generation = 0
		}
		return "sessions.titles", p, err
	})
	for _, phrase := range c.phrases() {
		reqs = append(reqs, func(ctx context.Context, q *query.Client) (string, any, error) {
			p, err := q.SearchSessions(ctx, dshq.SessionSearchRequest{Query: phrase, Limit: dshq.MaxSearchLimit})
			if p != nil {
				p.Generation = 0
			}
			return "sessions.search " + phrase, p, err
		})
	}
	return reqs
}

func answer(ctx context.Context, q *query.Client, req func(context.Context, *query.Client) (string, any, error)) (string, string, error) {
	key, v, err := req(ctx, q)
	if err != nil {
		return key, "", err
	}
	b, err := json.Marshal(v)
	return key, string(b), err
}

func takeSnapshot(t *testing.T, ctx context.Context, q *query.Client, c *corpus) snapshot {
	t.Helper()
	s := snapshot{answers: map[string]string{}}
	for _, req := range snapshotRequests(c) {
		key, a, err := answer(ctx, q, req)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		s.keys = append(s.keys, key)
		s.answers[key] = a
	}
	return s
}

// adminStatus is the part of the admin service's status reply the test
// reads (package admin, dsh.admin.v1.status).
type adminStatus struct {
	Generation uint64 `json:"generation"`
	Epoch      string `json:"epoch"`
	Rebuild    *struct {
		ID      string `json:"id"`
		Running bool   `json:"running"`
		Swapped bool   `json:"swapped"`
		Error   string `json:"error"`
	} `json:"rebuild"`
}

func adminCall(ctx context.Context, nc *nats.Conn, endpoint string) (adminStatus, error) {
	var st adminStatus
	m, err := nc.RequestWithContext(ctx, "dsh.admin.v1."+endpoint, []byte(`{}`))
	if err != nil {
		return st, fmt.Errorf("admin %s: %w", endpoint, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return st, fmt.Errorf("admin %s: %s %s", endpoint, code, m.Header.Get("Nats-Service-Error"))
	}
	if endpoint == "rebuild" {
		st.Rebuild = &struct {
			ID      string `json:"id"`
			Running bool   `json:"running"`
			Swapped bool   `json:"swapped"`
			Error   string `json:"error"`
		}{}
		return st, json.Unmarshal(m.Data, st.Rebuild)
	}
	return st, json.Unmarshal(m.Data, &st)
}

// rebuildWhileQuerying starts a rebuild through the admin API while a
// client keeps asking the snapshot's requests, and checks every answer
// against the snapshot until the rebuilt projection is swapped in.
func rebuildWhileQuerying(t *testing.T, ctx context.Context, nc *nats.Conn, q *query.Client, c *corpus, want snapshot) {
	before, err := adminCall(ctx, nc, "status")
	if err != nil {
		t.Fatal(err)
	}
	reqs := snapshotRequests(c)

	var (
		mu       sync.Mutex // guards answered and failures
		answered int
		failures []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key, got, err := answer(ctx, q, reqs[i%len(reqs)])
			mu.Lock()
			answered++
			switch {
			case err != nil:
				failures = append(failures, fmt.Sprintf("%s: %v", key, err))
			case got != want.answers[key]:
				failures = append(failures, fmt.Sprintf("%s:\n got %s\nwant %s", key, got, want.answers[key]))
			}
			mu.Unlock()
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	started, err := adminCall(ctx, nc, "rebuild")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	answered = 0
	mu.Unlock()
	id := started.Rebuild.ID
	var after adminStatus
	waitFor(t, 2*time.Minute, "the rebuild "+id+" to finish", func() (bool, error) {
		st, err := adminCall(ctx, nc, "status")
		if err != nil {
			return false, err
		}
		after = st
		return st.Rebuild != nil && st.Rebuild.ID == id && !st.Rebuild.Running, nil
	})
	mu.Lock()
	during, failed := answered, failures
	mu.Unlock()
	if r := after.Rebuild; !r.Swapped || r.Error != "" {
		t.Fatalf("rebuild %s: swapped %v, error %q", id, r.Swapped, r.Error)
	}
	if after.Epoch == before.Epoch {
		t.Errorf("the epoch stayed %s across the rebuild", after.Epoch)
	}
	if during == 0 {
		t.Fatal("no query was answered while the rebuild ran")
	}
	for _, f := range failed {
		t.Error(f)
	}
	t.Logf("%d queries answered while the rebuild ran, %d wrong or failed", during, len(failed))
}

// scrape reads a Prometheus text endpoint and returns its unlabelled
// samples by metric name.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	if url == "" {
		t.Fatal("no metrics endpoint")
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}
