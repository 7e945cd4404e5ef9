package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

// Sizes and bounds of the failover test.
const (
	failoverWriters  = 8
	failoverSessions = 200
	// The paces are each writer's interval between appends (about 500
	// events/s from the eight) and the query loops' between queries: a
	// steady load the projector keeps up with on a loaded 2-core machine
	// with a margin (it applies 1,500 records/s or more there), so that a
	// read-your-writes wait measures the failover and not a backlog.
	failoverWritePace = 50 * time.Millisecond
	failoverQueryPace = 40 * time.Millisecond
	failoverRYWPace   = 100 * time.Millisecond
	// failoverOpTimeout bounds one operation of the test's clients, far
	// above the waits the test accepts, so that a stall is measured rather
	// than cut short.
	failoverOpTimeout = 60 * time.Second
	// The bounds of the waits through a failover (failoverBound).
	failoverKillBound      = 10 * time.Second
	failoverElectionMargin = time.Second
	failoverGracefulBound  = time.Second
)

// TestClusterFailoverLosesNothing runs a three-server JetStream cluster on
// loopback (nats-server processes) with the session stream and the lease
// bucket at three replicas (`dshq serve --replicas 3` joining it as the
// trusted user of the deployment example, deploy/nats-server.conf). Eight
// harness writers, four of each of its tenants, append to 200 sessions
// through the SDK in tenant mode at a steady pace,
// a query loop lists and pages searches and a read-your-writes loop asks for
// each writer's last acknowledged append, while the test SIGKILLs the
// stream's leader twice and gracefully restarts (lame-duck mode) the third
// leader, restarting each server once the stream has a new leader and the
// load flows again. Every log then holds exactly, byte for byte, the records
// its writer appended (nothing lost, duplicated or reordered), every replica
// holds the same stream, the projection has applied all of it and no
// operation failed. The waits are logged per phase, with each one over the bound its
// kind of failover should take (a report, not a failure: a busy machine
// stretches waits).
func TestClusterFailoverLosesNothing(t *testing.T) {
	ctx := testCtx(t, 5*time.Minute)
	c := startNATSCluster(t, 3)
	home := t.TempDir()
	// Its profiles, for the goroutines at the first failed operation.
	pprofAddr := freeLoopbackAddr(t)
	serve, _ := startServe(t, "dshq serve", []string{"serve", "--nats-url", c.urls(0), "--user", "trusted", "--replicas", "3",
		"--home", home, "--http", "127.0.0.1:0", "--log-level", "info", "--pprof", pprofAddr})

	mon := connectCluster(t, c, "e2e-monitor", 0)
	js, err := jetstream.New(mon)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{dshq.SessionStream, "KV_" + dshq.LeaseBucket} {
		waitStreamCurrent(t, js, s, 3, startTimeout)
	}

	ops := &opLog{serveProfiles: "http://" + pprofAddr + "/debug/pprof/"}
	var writers []*clusterWriter
	for i := range failoverWriters {
		tenant := tenantOf(i)
		nc := connectClusterTenant(t, c, tenant, fmt.Sprintf("e2e-writer-%d", i), i)
		store, err := bus.NewStore(ctx, nc, bus.WithTenant(tenant))
		if err != nil {
			t.Fatalf("writer %d: new store: %v", i, err)
		}
		w := &clusterWriter{n: i, tenant: tenant, store: store, ops: ops, rng: rand.New(rand.NewPCG(uint64(i), 0xc1))}
		for j := i; j < failoverSessions; j += failoverWriters {
			if err := w.create(ctx, fmt.Sprintf("cluster-%03d", j)); err != nil {
				t.Fatalf("writer %d: %v", i, err)
			}
		}
		writers = append(writers, w)
	}
	qc := query.NewClient(connectCluster(t, c, "e2e-query", 1))
	rywc := query.NewClient(connectCluster(t, c, "e2e-ryw", 2))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Go(func() { w.run(ctx, stop) })
	}
	// The queries start once the projection has every session.
	waitFor(t, 60*time.Second, "every session written", func() (bool, error) {
		for _, w := range writers {
			if w.ok.Load() < int64(len(w.sessions)) {
				return false, nil
			}
		}
		return true, nil
	})
	waitCaughtUp(t, qc, streamLastSeq(t, mon))
	ql := &queryLoop{c: qc, ops: ops}
	wg.Go(func() { ql.run(ctx, stop) })
	ryw := &rywLoop{c: rywc, ops: ops}
	for _, w := range writers {
		ryw.lasts = append(ryw.lasts, &w.last)
	}
	wg.Go(func() { ryw.run(ctx, stop) })
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopLoad)

	// progress waits until every writer and both query loops have
	// succeeded a few more times: the load flows.
	progress := func(what string) {
		t.Helper()
		base := make([]int64, len(writers))
		for i, w := range writers {
			base[i] = w.ok.Load()
		}
		qb, rb := ql.ok.Load(), ryw.ok.Load()
		waitFor(t, 90*time.Second, "writes and queries to flow "+what, func() (bool, error) {
			for i, w := range writers {
				if w.ok.Load() < base[i]+3 {
					return false, fmt.Errorf("writer %d: %d appends since", i, w.ok.Load()-base[i])
				}
			}
			if ql.ok.Load() < qb+3 || ryw.ok.Load() < rb+2 {
				return false, fmt.Errorf("queries %d, read-your-writes %d since", ql.ok.Load()-qb, ryw.ok.Load()-rb)
			}
			return true, nil
		})
	}
	progress("at the start")

	var (
		phases   []failoverPhase
		current  *failoverPhase // the phase in progress
		reported bool
	)
	defer func() {
		// A failure part way still reports the waits so far.
		if !reported {
			if current != nil {
				current.end = time.Now()
				phases = append(phases, *current)
			}
			reportFailovers(t, ops, phases)
		}
	}()
	for _, kind := range []string{"SIGKILL", "SIGKILL", "lame duck"} {
		leader := waitStreamLeader(t, js, dshq.SessionStream, "", 30*time.Second)
		nd := c.node(t, leader)
		ph := &failoverPhase{kind: kind, node: leader, start: time.Now()}
		current = ph
		if kind == "SIGKILL" {
			c.kill(t, nd)
		} else {
			// The lame duck hands its leaderships over at once and exits
			// once it has closed its clients one by one.
			c.enterLameDuck(t, nd)
			ph.newLeader = waitStreamLeader(t, js, dshq.SessionStream, leader, 30*time.Second)
			ph.elected = time.Since(ph.start)
			c.waitLameDuckExit(t, nd)
		}
		if ph.newLeader == "" {
			ph.newLeader = waitStreamLeader(t, js, dshq.SessionStream, leader, 30*time.Second)
			ph.elected = time.Since(ph.start)
		}
		progress(fmt.Sprintf("with %s down", leader))
		c.restart(t, nd, 90*time.Second)
		for _, s := range []string{dshq.SessionStream, "KV_" + dshq.LeaseBucket} {
			waitStreamCurrent(t, js, s, 3, 90*time.Second)
		}
		progress(fmt.Sprintf("after %s restarted", leader))
		ph.end = time.Now()
		phases, current = append(phases, *ph), nil
	}
	stopLoad()
	for _, w := range writers {
		w.closeAll(ctx, t)
	}

	reported = true
	reportFailovers(t, ops, phases)

	// Every replica holds the same stream.
	waitFor(t, 30*time.Second, "the three replicas of the session stream to agree", func() (bool, error) {
		states, err := c.streamStates(dshq.SessionStream)
		if err != nil {
			return false, err
		}
		for _, s := range states[1:] {
			if s != states[0] {
				return false, fmt.Errorf("replica states differ: %+v", states)
			}
		}
		return true, nil
	})

	// Every log is exactly what its writer appended.
	trustedStore, err := bus.NewStore(ctx, mon, bus.WithStreamConfig(bus.StreamConfig{Replicas: 3}))
	if err != nil {
		t.Fatal(err)
	}
	var diverged []string
	totalEvents := 0
	stored := map[string]int64{} // events stored per session
	for _, w := range writers {
		verifyStore, err := trustedStore.Namespace(w.tenant)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range w.sessions {
			recs, err := verifyStore.Records(ctx, s.id)
			if err != nil {
				diverged = append(diverged, fmt.Sprintf("session %s: %v", s.id, err))
				continue
			}
			if d := s.diff(recs); d != "" {
				diverged = append(diverged, d)
			}
			totalEvents += len(s.events)
			stored[s.id] = int64(len(recs) - 1)
		}
	}
	if len(diverged) > 0 {
		t.Errorf("%d of %d sessions diverge from what their writers appended:\n%s", len(diverged), failoverSessions,
			strings.Join(diverged, "\n"))
	}

	// The projection has applied everything and agrees.
	last := streamLastSeq(t, mon)
	waitCaughtUp(t, qc, last)
	for _, w := range writers {
		for _, s := range w.sessions {
			st, err := qc.StatSession(ctx, dshq.SessionStatRequest{SessionID: s.id}, query.WithMinGeneration(last))
			if err != nil {
				t.Errorf("sessions.stat %s: %v", s.id, err)
				continue
			}
			if st.EventCount != stored[s.id] {
				t.Errorf("projection: session %s has %d events, its log %d", s.id, st.EventCount, stored[s.id])
			}
		}
	}
	if v := c.permissionViolations(); len(v) > 0 {
		t.Errorf("the servers refused %d requests of the test's clients:\n%s", len(v), strings.Join(v, "\n"))
	}
	t.Logf("%d sessions, %d events appended, stream at sequence %d", failoverSessions, totalEvents, last)
	serve.stop(t, 30*time.Second)
}

// failoverPhase is one failover: a leader killed or restarted gracefully,
// until it has rejoined and the load flows again.
type failoverPhase struct {
	kind       string // "SIGKILL" or "lame duck"
	node       string // the stream's leader, taken down
	newLeader  string
	start, end time.Time
	elected    time.Duration // until the stream had a new leader
}

// op is one operation of the test's clients.
type op struct {
	kind  string // "write", "query", "read-your-writes"
	what  string
	start time.Time
	dur   time.Duration
	err   error
}

// opLog collects every operation, for the waits. At the first that
// fails it takes the goroutines of dshq serve (the process whose answer did
// not come) from serveProfiles, for the report.
type opLog struct {
	serveProfiles string
	dumpOnce      sync.Once
	mu            sync.Mutex // guards ops and dump
	ops           []op
	dump          string
}

func (l *opLog) add(o op) {
	if o.err != nil && l.serveProfiles != "" {
		l.dumpOnce.Do(func() {
			d := fmt.Sprintf("(%s %s, started %s)\n", o.kind, o.what, o.start.Format("15:04:05.000"))
			if resp, err := httpGet(l.serveProfiles + "goroutine?debug=2"); err != nil {
				d += err.Error()
			} else {
				d += string(resp.body)
			}
			l.mu.Lock()
			l.dump = d
			l.mu.Unlock()
		})
	}
	l.mu.Lock()
	l.ops = append(l.ops, o)
	l.mu.Unlock()
}

// freeLoopbackAddr returns a loopback address whose port was free a moment
// ago, for a process that binds it next.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The kinds of operation the test measures.
var opKinds = []string{"write", "query", "read-your-writes"}

// failoverBound is how long an operation of any kind may wait through a
// failover of that kind, whose stream election took elected. A follower
// campaigns 4-9 s after it last heard from a leader it lost (nats-server's
// Raft election timeout, not configurable), and a write or a query —
// read-your-writes included, which waits for the projector to apply the
// append — must add nothing to that: failoverKillBound. A campaign that
// fails (two candidates at once, or one whose log is behind) starts another
// 4-9 s later; an election that took longer than failoverKillBound is the
// cluster's own, and the bound is then the election and
// failoverElectionMargin. A graceful restart (lame-duck mode) hands every
// leadership over before it stops: failoverGracefulBound. noise, the
// longest wait of the same kind outside any failover in the same run (the
// machine's own jitter: a loaded machine stalls processes for hundreds of
// milliseconds), is added to the graceful bound.
func failoverBound(phase string, elected, noise time.Duration) time.Duration {
	if phase == "SIGKILL" {
		return max(failoverKillBound, elected+failoverElectionMargin)
	}
	return failoverGracefulBound + noise
}

// reportFailovers logs the longest wait of each kind of operation in each
// phase and outside them and every bound exceeded, and fails the test for
// every operation failed.
func reportFailovers(t *testing.T, l *opLog, phases []failoverPhase) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	// An operation belongs to the last phase it overlaps: one that began
	// just before a server went down waited for that failover.
	phaseOf := func(o op) int {
		for i := len(phases) - 1; i >= 0; i-- {
			if o.start.Before(phases[i].end) && o.start.Add(o.dur).After(phases[i].start) {
				return i
			}
		}
		return -1
	}
	worst := func(kind string, phase int) (w op, n int) {
		for _, o := range l.ops {
			if o.kind == kind && phaseOf(o) == phase {
				n++
				if o.dur > w.dur {
					w = o
				}
			}
		}
		return w, n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %-12s %-9s", "phase", "from", "election")
	for _, k := range opKinds {
		fmt.Fprintf(&b, " %-30s", k+" max (n, started)")
	}
	b.WriteString("\n")
	row := func(name string, from time.Time, elected string, phase int) {
		when := ""
		if !from.IsZero() {
			when = from.Format("15:04:05.000")
		}
		fmt.Fprintf(&b, "%-26s %-12s %-9s", name, when, elected)
		for _, k := range opKinds {
			w, n := worst(k, phase)
			started := ""
			if n > 0 {
				started = w.start.Format("15:04:05.000")
			}
			fmt.Fprintf(&b, " %-30s", fmt.Sprintf("%v (%d, %s)", w.dur.Round(time.Millisecond), n, started))
		}
		b.WriteString("\n")
	}
	for i, ph := range phases {
		row(fmt.Sprintf("%d %s %s→%s", i+1, ph.kind, ph.node, ph.newLeader), ph.start, ph.elected.Round(time.Millisecond).String(), i)
	}
	row("outside failovers", time.Time{}, "", -1)
	b.WriteString("the longest of each phase:\n")
	for i := range phases {
		for _, k := range opKinds {
			if w, n := worst(k, i); n > 0 {
				fmt.Fprintf(&b, "  %d %-17s %8v  %s\n", i+1, k, w.dur.Round(time.Millisecond), w.what)
			}
		}
	}
	t.Logf("failover waits (the longest operation of each phase: from the signal until the server has rejoined and the load flows):\n%s", b.String())
	// The bounds are what the waits should be (docs/cluster.md); a busy
	// machine stretches them, so a wait over its bound is reported, not a
	// failure: the test asserts that nothing is lost and nothing fails.
	for i, ph := range phases {
		for _, k := range opKinds {
			noise, _ := worst(k, -1)
			w, _ := worst(k, i)
			if bound := failoverBound(ph.kind, ph.elected, noise.dur); w.dur > bound {
				t.Logf("phase %d (%s of %s): a %s waited %v (%s, from %s), over the expected %v (load %s)", i+1, ph.kind, ph.node, k,
					w.dur.Round(time.Millisecond), w.what, w.start.Format("15:04:05.000"), bound.Round(time.Millisecond), loadAvg())
			}
		}
	}
	for _, o := range l.ops {
		if o.err != nil {
			t.Errorf("%s %s failed after %v (started %s): %v", o.kind, o.what, o.dur.Round(time.Millisecond),
				o.start.Format("15:04:05.000"), o.err)
		}
	}
	if l.dump != "" {
		t.Logf("the goroutines of dshq serve when the first operation failed %s", l.dump)
	}
}

// clusterWriter is one harness: its own connection and Store, and the
// sessions it writes, round robin, one append per tick.
type clusterWriter struct {
	n        int
	tenant   string
	store    *bus.Store
	ops      *opLog
	rng      *rand.Rand
	sessions []*writtenSession
	ok       atomic.Int64               // successful appends
	last     atomic.Pointer[ackedWrite] // the last acknowledged append
}

// ackedWrite is an acknowledged append, for read-your-writes.
type ackedWrite struct {
	id     string
	gen    uint64
	events int64
}

// writtenSession is a session and what its writer appended.
type writtenSession struct {
	id     string
	tenant string
	header []byte // the header record the SDK publishes
	h      *bus.Handle
	events [][]byte // the acknowledged events, in order
	// unsure is an append that failed: its records may or may not be
	// stored. The writer stops writing the session.
	unsure [][]byte
}

var failoverCreatedAt = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

func (w *clusterWriter) create(ctx context.Context, id string) error {
	hdr := dshq.Header{Version: dshq.FormatVersion2, ID: id, CreatedAt: failoverCreatedAt, Cwd: dshq.Str("/srv/cluster")}
	raw, err := record.EncodeHeader(dshq.HeaderRecord{Header: hdr, FormatVersion: dshq.FormatVersion2})
	if err != nil {
		return err
	}
	h, err := w.store.Create(ctx, hdr)
	if err != nil {
		return fmt.Errorf("create %s: %w", id, err)
	}
	w.sessions = append(w.sessions, &writtenSession{id: id, tenant: w.tenant, header: raw, h: h})
	return nil
}

// batchSize is the length of the next append: mostly a few events, now and
// then one long enough to go as an atomic batch.
func (w *clusterWriter) batchSize() int {
	switch r := w.rng.IntN(100); {
	case r < 85:
		return 1 + w.rng.IntN(3)
	case r < 98:
		return 4 + w.rng.IntN(7)
	default:
		return bus.DefaultAtomicMin + 8
	}
}

// event is event seq of session id, exactly as the writer appends it.
func failoverEvent(id string, seq int64) []byte {
	if seq%3 == 0 {
		return fmt.Appendf(nil, `{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m-%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"failover check %s event %d"}]},"surfaceOp":"append"}`,
			seq, failoverCreatedAt+seq, seq, id, seq)
	}
	return fmt.Appendf(nil, `{"type":"command/run","seq":%d,"time":%d,"data":{"command":"echo %s %d"}}`, seq, failoverCreatedAt+seq, id, seq)
}

func (w *clusterWriter) run(ctx context.Context, stop <-chan struct{}) {
	paced(ctx, stop, failoverWritePace, w.ops, "write", &w.ok, func(ctx context.Context, i int) (string, bool, error) {
		s := w.sessions[i%len(w.sessions)]
		if s.unsure != nil {
			return "", true, nil
		}
		next := int64(len(s.events))
		n := w.batchSize()
		raws := make([][]byte, n)
		evs := make([]dshq.Event, n)
		for j := range n {
			raws[j] = failoverEvent(s.id, next+int64(j))
			e, err := record.ParseEvent(raws[j])
			if err != nil {
				panic(err) // the test's own events
			}
			evs[j] = e
		}
		what := fmt.Sprintf("append of %d events to %s at seq %d (writer %d)", n, s.id, next, w.n)
		gen, err := s.h.Append(ctx, evs)
		if err != nil {
			s.unsure = raws
			return what, false, err
		}
		s.events = append(s.events, raws...)
		w.last.Store(&ackedWrite{id: s.id, gen: gen, events: int64(len(s.events))})
		return what, false, nil
	})
}

func (w *clusterWriter) closeAll(ctx context.Context, t *testing.T) {
	for _, s := range w.sessions {
		if err := s.h.Close(ctx); err != nil {
			t.Errorf("close %s: %v", s.id, err)
		}
	}
}

// diff compares a session's stored records with what its writer appended
// and says exactly how they differ ("" when they are identical): lost,
// duplicated, reordered or altered records, by position.
func (s *writtenSession) diff(recs []bus.Record) string {
	want := append([][]byte{s.header}, s.events...)
	got := make([][]byte, len(recs))
	for i, r := range recs {
		got[i] = r.Data
	}
	acked := len(want)
	if s.unsure != nil {
		// Any prefix of the failed append may have been stored (it went
		// record by record, or as atomic batches).
		want = append(want, s.unsure...)
	}
	tok, _ := record.SubjectToken(s.id)
	key := record.LogKey(s.tenant, tok)
	for i := range min(len(got), len(want)) {
		wantID := key + ":h"
		if i > 0 {
			wantID = fmt.Sprintf("%s:%d", key, i-1)
		}
		if bytes.Equal(got[i], want[i]) && recs[i].MsgID == wantID {
			continue
		}
		what := "altered"
		if j := slices.IndexFunc(want, func(b []byte) bool { return bytes.Equal(b, got[i]) }); j >= 0 && j < i {
			what = fmt.Sprintf("duplicated: it repeats record %d", j)
		} else if j > i {
			what = fmt.Sprintf("reordered or a gap: it is record %d of the writer's log", j)
		}
		return fmt.Sprintf("session %s: stored record %d (stream sequence %d, msg id %q, want %q) is %s (%d stored, %d appended)\n  stored:   %s\n  appended: %s",
			s.id, i, recs[i].Seq, recs[i].MsgID, wantID, what, len(got), len(want), clip(got[i]), clip(want[i]))
	}
	switch {
	case len(got) < acked:
		return fmt.Sprintf("session %s: %d acknowledged records lost: stored %d, acknowledged %d; the first lost is record %d: %s",
			s.id, acked-len(got), len(got), acked, len(got), clip(want[len(got)]))
	case len(got) < len(want) && s.unsure != nil:
		return "" // a prefix of the failed append, which was reported
	case len(got) < len(want):
		return fmt.Sprintf("session %s: %d records lost: stored %d, appended %d; the first lost is record %d: %s",
			s.id, len(want)-len(got), len(got), len(want), len(got), clip(want[len(got)]))
	case len(got) > len(want):
		return fmt.Sprintf("session %s: %d records stored beyond what was appended (%d stored, %d appended); the first: stream sequence %d: %s",
			s.id, len(got)-len(want), len(got), len(want), recs[len(want)].Seq, clip(got[len(want)]))
	}
	return ""
}

func clip(b []byte) string {
	if len(b) > 160 {
		return string(b[:160]) + "…"
	}
	return string(b)
}

// paced makes one call per tick of pace until stop is closed, each bounded
// by failoverOpTimeout, and logs each as an op of kind in ops; ok, when not
// nil, counts the calls that succeeded. A call that returns skip is not logged (it had
// nothing to do).
func paced(ctx context.Context, stop <-chan struct{}, pace time.Duration, ops *opLog, kind string, ok *atomic.Int64,
	call func(ctx context.Context, i int) (what string, skip bool, err error)) {
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		octx, cancel := context.WithTimeout(ctx, failoverOpTimeout)
		start := time.Now()
		what, skip, err := call(octx, i)
		dur := time.Since(start)
		cancel()
		if skip {
			continue
		}
		ops.add(op{kind: kind, what: what, start: start, dur: dur, err: err})
		if err == nil && ok != nil {
			ok.Add(1)
		}
	}
}

// queryLoop lists sessions and pages a search that every session matches
// (its later pages come from the cursor bucket), one query per tick.
type queryLoop struct {
	c   *query.Client
	ops *opLog
	ok  atomic.Int64
}

func (q *queryLoop) run(ctx context.Context, stop <-chan struct{}) {
	cursor := ""
	paced(ctx, stop, failoverQueryPace, q.ops, "query", &q.ok, func(ctx context.Context, i int) (what string, _ bool, err error) {
		switch {
		case i%3 == 0:
			what = "sessions.list"
			var p *dshq.SessionPage
			if p, err = q.c.ListSessions(ctx, dshq.SessionListRequest{Limit: 20}); err == nil && len(p.Items) == 0 {
				err = errors.New("no sessions listed")
			}
		case cursor != "":
			what = "sessions.search, next page"
			var p *dshq.SessionSearchPage
			if p, err = q.c.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "failover check", Limit: 5, Cursor: cursor}); err == nil {
				cursor = p.NextCursor
			} else if de := (*dshq.Error)(nil); errors.As(err, &de) && de.Code == dshq.CodeStaleCursor {
				err, cursor = nil, "" // the projection moved on: a cursor's documented end
			}
		default:
			what = "sessions.search"
			var p *dshq.SessionSearchPage
			if p, err = q.c.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "failover check", Limit: 5}); err == nil {
				if len(p.Items) == 0 {
					err = errors.New("search found nothing")
				}
				cursor = p.NextCursor
			}
		}
		return what, false, err
	})
}

// rywLoop reads the writers' last acknowledged appends back through the
// projection (sessions.stat with minGeneration), one writer's per tick,
// round robin.
type rywLoop struct {
	c   *query.Client
	ops *opLog
	// lasts are the writers' last acknowledged appends.
	lasts []*atomic.Pointer[ackedWrite]
	ok    atomic.Int64
}

func (r *rywLoop) run(ctx context.Context, stop <-chan struct{}) {
	paced(ctx, stop, failoverRYWPace, r.ops, "read-your-writes", &r.ok, func(ctx context.Context, i int) (string, bool, error) {
		a := r.lasts[i%len(r.lasts)].Load()
		if a == nil {
			return "", true, nil
		}
		st, err := r.c.StatSession(ctx, dshq.SessionStatRequest{SessionID: a.id}, query.WithMinGeneration(a.gen),
			query.WithTimeoutMs(dshq.MaxTimeoutMs))
		if err == nil && st.EventCount < a.events {
			err = fmt.Errorf("the projection at generation %d has %d events of %s, the append acknowledged at %d made %d",
				st.Generation, st.EventCount, a.id, a.gen, a.events)
		}
		return fmt.Sprintf("sessions.stat %s at generation %d", a.id, a.gen), false, err
	})
}

// streamState is one replica's state of a stream.
type streamState struct {
	msgs, bytes, first, last uint64
}

// streamStates returns each node's local state of stream, as its
// monitoring endpoint reports it.
func (c *natsCluster) streamStates(stream string) ([]streamState, error) {
	var out []streamState
	for _, nd := range c.nodes {
		resp, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/jsz?accounts=true&streams=true", nd.monitor))
		if err != nil {
			return nil, err
		}
		var jsz struct {
			Accounts []struct {
				Streams []struct {
					Name  string `json:"name"`
					State struct {
						Msgs     uint64 `json:"messages"`
						Bytes    uint64 `json:"bytes"`
						FirstSeq uint64 `json:"first_seq"`
						LastSeq  uint64 `json:"last_seq"`
					} `json:"state"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		if err := json.Unmarshal(resp.body, &jsz); err != nil {
			return nil, fmt.Errorf("%s /jsz: %v", nd.name, err)
		}
		found := false
		for _, a := range jsz.Accounts {
			for _, s := range a.Streams {
				if s.Name == stream {
					found = true
					out = append(out, streamState{msgs: s.State.Msgs, bytes: s.State.Bytes, first: s.State.FirstSeq, last: s.State.LastSeq})
				}
			}
		}
		if !found {
			return nil, fmt.Errorf("%s holds no replica of %s", nd.name, stream)
		}
	}
	return out, nil
}
