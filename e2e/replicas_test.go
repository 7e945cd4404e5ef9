package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

// The replicas of the replica test: two projectors of one stream, each with
// its own consumer, directory and full projection; the second publishes
// nothing to the feed (one projector publishes it).
const (
	replicaA = dshq.ProjectorDurable
	replicaB = "dsh-projector-b"
)

// startReplica runs a projector as replica name of the shard.
func startReplica(t testing.TB, label, url, data, name string) *proc {
	t.Helper()
	args := []string{"--nats-url", url, "--data", data, "--durable", name}
	if name != replicaA {
		args = append(args, "--no-feed")
	}
	p := startProc(t, label, bins.projector, args, nil)
	p.waitLine(t, startTimeout, `"projector running"`, func(l string) bool { return strings.Contains(l, `"projector running"`) })
	return p
}

// TestProjectionReplicas runs two projectors of one stream (distinct
// durables, each its own full projection) behind one query service
// process. A cursor issued by one replica continues on the other, page for
// page as on the first. Then, under a steady load of writes and of queries
// through the query service (lists and paged searches, and reads of each
// write with its minGeneration), one replica is SIGKILLed, restarted on
// its data and caught up, and then the other: no request fails, and the
// test reports the longest wait of each kind.
func TestProjectionReplicas(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 4*time.Minute)
	url, _ := startPlainNATS(t)
	dataA, dataB := t.TempDir(), t.TempDir()
	a := startReplica(t, "projector A", url, dataA, replicaA)
	b := startReplica(t, "projector B", url, dataB, replicaB)
	startQuery(t, "query", "--nats-url", url)

	nc, err := nats.Connect(url, append(bus.ConnectOptions(), nats.Name("e2e-replicas"))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	store, err := bus.NewStore(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	w := &replicaWriter{store: store}
	for i := range 40 {
		if err := w.create(ctx, fmt.Sprintf("replica-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		for _, s := range w.sessions {
			if _, err := w.append(ctx, s, "check"); err != nil {
				t.Fatal(err)
			}
		}
	}
	q := query.NewClient(nc)
	onA := query.NewClient(nc, query.WithSubjectPrefix(replicaPrefix(replicaA)))
	onB := query.NewClient(nc, query.WithSubjectPrefix(replicaPrefix(replicaB)))
	gen := streamLastSeq(t, nc)
	waitCaughtUp(t, onA, gen)
	waitCaughtUp(t, onB, gen)

	t.Run("a cursor issued by one replica continues on the other", func(t *testing.T) {
		search := dshq.SessionSearchRequest{Query: "replica check", Limit: 7}
		list := dshq.SessionListRequest{Limit: 7}
		for _, pair := range [][2]*query.Client{{onA, onB}, {onB, onA}} {
			// The first page's replica ranks the hits; every later page
			// comes from the stored hits, or (lists) from the immutable
			// order, whichever replica serves it.
			want, err := pageAll(ctx, pair[0], pair[0], search, list)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.search) != len(w.sessions) || len(want.list) != len(w.sessions) {
				t.Fatalf("one replica alone: %d search hits, %d sessions listed; want %d each", len(want.search), len(want.list), len(w.sessions))
			}
			got, err := pageAll(ctx, pair[0], pair[1], search, list)
			if err != nil {
				t.Fatalf("first page on one replica, the rest on the other: %v", err)
			}
			if fmt.Sprint(got.search) != fmt.Sprint(want.search) || fmt.Sprint(got.list) != fmt.Sprint(want.list) {
				t.Errorf("paged across the replicas:\n search %v\n list   %v\nwant (one replica):\n search %v\n list   %v",
					got.search, got.list, want.search, want.list)
			}
		}
	})

	// Requests per replica, as the server routes them to the replicas'
	// own subjects (a plain subscription sees them without answering).
	var served sync.Map
	counter, err := nc.Subscribe(dshq.ShardSubjectPrefix(dshq.DefaultShard)+".replica.*.>", func(m *nats.Msg) {
		name := strings.Split(m.Subject, ".")[5]
		n, _ := served.LoadOrStore(name, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Unsubscribe()

	ops := &opLog{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx, stop, ops) })
	ql := &queryLoop{c: q, ops: ops}
	wg.Go(func() { ql.runSearch(ctx, stop, "replica check") })
	ryw := &rywLoop{c: q, ops: ops, lasts: []*atomic.Pointer[ackedWrite]{&w.last}}
	wg.Go(func() { ryw.run(ctx, stop) })
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopLoad)

	flow := func(what string) {
		t.Helper()
		base, qb, rb := w.ok.Load(), ql.ok.Load(), ryw.ok.Load()
		waitFor(t, time.Minute, "writes and queries to flow "+what, func() (bool, error) {
			return w.ok.Load() >= base+20 && ql.ok.Load() >= qb+20 && ryw.ok.Load() >= rb+10, nil
		})
	}
	flow("with both replicas")
	var phases []failoverPhase
	for _, r := range []struct {
		name, data string
		proc       **proc
	}{{replicaB, dataB, &b}, {replicaA, dataA, &a}} {
		ph := failoverPhase{kind: "SIGKILL", node: r.name, start: time.Now()}
		t.Logf("%s: SIGKILL of %s", ph.start.Format("15:04:05.000"), r.name)
		(*r.proc).kill(t)
		flow(fmt.Sprintf("with %s dead", r.name))
		*r.proc = startReplica(t, r.name+" (restarted)", url, r.data, r.name)
		waitCaughtUp(t, query.NewClient(nc, query.WithSubjectPrefix(replicaPrefix(r.name))), streamLastSeq(t, nc))
		t.Logf("%s: %s restarted and caught up", time.Now().Format("15:04:05.000"), r.name)
		flow(fmt.Sprintf("after %s restarted", r.name))
		ph.end = time.Now()
		phases = append(phases, ph)
	}
	stopLoad()
	reportReplicaWaits(t, ops, phases)
	for _, name := range []string{replicaA, replicaB} {
		n, _ := served.Load(name)
		if n == nil || n.(*atomic.Int64).Load() == 0 {
			t.Errorf("replica %s served no request through the query service", name)
		}
	}
	served.Range(func(k, v any) bool {
		t.Logf("replica %s: %d requests", k, v.(*atomic.Int64).Load())
		return true
	})
	for _, s := range w.sessions {
		if err := s.h.Close(ctx); err != nil {
			t.Errorf("close %s: %v", s.id, err)
		}
	}
	a.stop(t, 30*time.Second)
	b.stop(t, 30*time.Second)
}

// replicaPrefix is the subject prefix of one replica's endpoints.
func replicaPrefix(replica string) string {
	return strings.TrimSuffix(dshq.ShardReplicaSubject(dshq.DefaultShard, replica, "x"), ".x")
}

// pages are the ids a paging through every page returned, in order.
type pages struct{ search, list []string }

// pageAll pages search and list to the end: the first page from first,
// every later one from rest.
func pageAll(ctx context.Context, first, rest *query.Client, search dshq.SessionSearchRequest, list dshq.SessionListRequest) (pages, error) {
	var out pages
	c := first
	for {
		p, err := c.SearchSessions(ctx, search)
		if err != nil {
			return out, fmt.Errorf("sessions.search after %d hits: %w", len(out.search), err)
		}
		for _, h := range p.Items {
			out.search = append(out.search, h.Header.ID)
		}
		if p.NextCursor == "" {
			break
		}
		search.Cursor, c = p.NextCursor, rest
	}
	c = first
	for {
		p, err := c.ListSessions(ctx, list)
		if err != nil {
			return out, fmt.Errorf("sessions.list after %d sessions: %w", len(out.list), err)
		}
		for _, s := range p.Items {
			out.list = append(out.list, s.Header.ID)
		}
		if p.NextCursor == "" {
			break
		}
		list.Cursor, c = p.NextCursor, rest
	}
	return out, nil
}

// replicaWriter appends to its sessions round robin, one event per tick.
type replicaWriter struct {
	store    *bus.Store
	sessions []*replicaSession
	ok       atomic.Int64
	last     atomic.Pointer[ackedWrite]
}

type replicaSession struct {
	id     string
	h      *bus.Handle
	events int64
}

func (w *replicaWriter) create(ctx context.Context, id string) error {
	h, err := w.store.Create(ctx, dshq.Header{Version: dshq.FormatVersion2, ID: id, CreatedAt: failoverCreatedAt, Cwd: dshq.Str("/srv/replicas")})
	if err != nil {
		return fmt.Errorf("create %s: %w", id, err)
	}
	w.sessions = append(w.sessions, &replicaSession{id: id, h: h})
	return nil
}

// append appends one event to s, its text "replica <word> …"; it returns
// the generation it was stored at.
func (w *replicaWriter) append(ctx context.Context, s *replicaSession, word string) (uint64, error) {
	raw := fmt.Appendf(nil, `{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m-%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"replica %s %s event %d"}]},"surfaceOp":"append"}`,
		s.events, failoverCreatedAt+s.events, s.events, word, s.id, s.events)
	e, err := record.ParseEvent(raw)
	if err != nil {
		return 0, err
	}
	gen, err := s.h.Append(ctx, []dshq.Event{e})
	if err != nil {
		return 0, err
	}
	s.events++
	w.ok.Add(1)
	w.last.Store(&ackedWrite{id: s.id, gen: gen, events: s.events})
	return gen, nil
}

func (w *replicaWriter) run(ctx context.Context, stop <-chan struct{}, ops *opLog) {
	// w.append counts the successful appends itself (w.ok).
	paced(ctx, stop, 20*time.Millisecond, ops, "write", nil, func(ctx context.Context, i int) (string, bool, error) {
		s := w.sessions[i%len(w.sessions)]
		// The load's events say "replica load", not the queries' phrase
		// "replica check": the searches rank the same events throughout.
		_, err := w.append(ctx, s, "load")
		return "append to " + s.id, false, err
	})
}

// runSearch is the query loop of the replica test: lists, and searches for
// phrase paged to their end.
func (q *queryLoop) runSearch(ctx context.Context, stop <-chan struct{}, phrase string) {
	cursor := ""
	paced(ctx, stop, failoverQueryPace, q.ops, "query", &q.ok, func(ctx context.Context, i int) (what string, _ bool, err error) {
		switch {
		case i%3 == 0 && cursor == "":
			what = "sessions.list"
			var p *dshq.SessionPage
			if p, err = q.c.ListSessions(ctx, dshq.SessionListRequest{Limit: 10}); err == nil && len(p.Items) == 0 {
				err = errors.New("no sessions listed")
			}
		default:
			what = "sessions.search"
			if cursor != "" {
				what = "sessions.search, next page"
			}
			var p *dshq.SessionSearchPage
			if p, err = q.c.SearchSessions(ctx, dshq.SessionSearchRequest{Query: phrase, Limit: 5, Cursor: cursor}); err == nil {
				if cursor == "" && len(p.Items) == 0 {
					err = fmt.Errorf("search found nothing at generation %d", p.Generation)
				}
				cursor = p.NextCursor
			}
		}
		return what, false, err
	})
}

// replicaDeathBound is how long a request may wait through a replica's
// death: the query service takes a replica not heard from for 1 s for
// gone and sends its requests to another; a margin for a loaded machine.
const replicaDeathBound = 3 * time.Second

// reportReplicaWaits logs the longest wait of each kind in each phase and
// outside them and every wait over replicaDeathBound, and fails the test for
// every failed operation.
func reportReplicaWaits(t *testing.T, l *opLog, phases []failoverPhase) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := -1; i < len(phases); i++ {
		name := "outside the deaths"
		if i >= 0 {
			name = fmt.Sprintf("%s of %s", phases[i].kind, phases[i].node)
		}
		var line strings.Builder
		for _, k := range opKinds {
			var w op
			n := 0
			for _, o := range l.ops {
				in := -1
				for j, ph := range phases {
					if o.start.Before(ph.end) && o.start.Add(o.dur).After(ph.start) {
						in = j
					}
				}
				if o.kind != k || in != i {
					continue
				}
				n++
				if o.dur > w.dur {
					w = o
				}
			}
			fmt.Fprintf(&line, "  %s %v (%d)", k, w.dur.Round(time.Millisecond), n)
			if i >= 0 && w.dur > replicaDeathBound {
				// A report, not a failure: a busy machine stretches waits.
				t.Logf("%s: a %s waited %v (%s), over the expected %v (load %s)", name, k, w.dur.Round(time.Millisecond), w.what, replicaDeathBound, loadAvg())
			}
		}
		t.Logf("%-30s%s", name, line.String())
	}
	for _, o := range l.ops {
		if o.err != nil {
			t.Errorf("%s %s failed after %v (started %s): %v", o.kind, o.what, o.dur.Round(time.Millisecond), o.start.Format("15:04:05.000"), o.err)
		}
	}
}
