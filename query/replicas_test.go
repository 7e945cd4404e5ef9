package query

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// fakeReplica is a replica of shard 0 that announces gen and answers every
// request with its name (or never, when silent).
type fakeReplica struct {
	name   string
	gen    atomic.Uint64
	silent atomic.Bool
	asked  atomic.Int64
	stop   chan struct{}
	done   chan struct{}
}

func startFakeReplica(t *testing.T, nc *nats.Conn, name string, gen uint64) *fakeReplica {
	t.Helper()
	r := &fakeReplica{name: name, stop: make(chan struct{}), done: make(chan struct{})}
	r.gen.Store(gen)
	sub, err := nc.Subscribe(dshq.ShardReplicaSubject(dshq.DefaultShard, name, ">"), func(m *nats.Msg) {
		r.asked.Add(1)
		if !r.silent.Load() {
			_ = m.Respond([]byte(`{"items":[],"generation":` + jsonNum(r.gen.Load()) + `,"by":"` + name + `"}`))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		tick := time.NewTicker(ReplicaStatusEvery)
		defer tick.Stop()
		for {
			b, _ := json.Marshal(ReplicaStatus{Replica: name, Lineage: "l1-test", Generation: r.gen.Load()})
			_ = nc.Publish(dshq.ShardStatusSubject(dshq.DefaultShard), b)
			select {
			case <-r.stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { r.halt(); _ = sub.Unsubscribe() })
	return r
}

// halt stops the announcements: the replica is as good as dead.
func (r *fakeReplica) halt() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

func jsonNum(n uint64) string { b, _ := json.Marshal(n); return string(b) }

func answeredBy(t *testing.T, body []byte) string {
	t.Helper()
	var r struct{ By string }
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("reply %s: %v", body, err)
	}
	return r.By
}

// The query service sends a request to a replica that has reached its
// minGeneration, and one a replica took and never answered to another once
// that replica stops announcing itself.
func TestServe_RoutesToAReplicaThatHasReachedTheRequest(t *testing.T) {
	nc := conn(t)
	serve(t, nc)
	behind := startFakeReplica(t, nc, "behind", 10)
	ahead := startFakeReplica(t, nc, "ahead", 100)
	c := NewClient(nc)
	ctx := ctxT(t)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond) // poll interval
		}
	}
	// Both are known once a request at 0 has been answered by each.
	seen := map[string]bool{}
	waitFor("both replicas to answer", func() bool {
		body, err := c.request(ctx, wire.EndpointSessionsList, []byte(`{}`))
		if err == nil {
			seen[answeredBy(t, body)] = true
		}
		return seen["behind"] && seen["ahead"]
	})
	for range 20 {
		body, err := c.request(ctx, wire.EndpointSessionsList, []byte(`{"minGeneration":50}`))
		if err != nil {
			t.Fatal(err)
		}
		if by := answeredBy(t, body); by != "ahead" {
			t.Fatalf("a request at minGeneration 50 was answered by %q (generation 10)", by)
		}
	}

	// ahead takes requests and never answers, then dies: its requests go to
	// the other replica.
	ahead.silent.Store(true)
	before := ahead.asked.Load()
	got := make(chan string, 1)
	go func() {
		body, err := c.request(ctx, wire.EndpointSessionsList, []byte(`{"minGeneration":50}`))
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- answeredBy(t, body)
	}()
	waitFor("the silent replica to take the request", func() bool { return ahead.asked.Load() > before })
	behind.gen.Store(100)
	start := time.Now()
	ahead.halt()
	select {
	case by := <-got:
		// Answered by the other replica at all is the move: a request
		// left with the dead one ends in an error at its timeout. How
		// long the move took is a figure (replicaExpiry on a quiet
		// machine), not asserted.
		if by != "behind" {
			t.Fatalf("the request of a dead replica: %s", by)
		}
		t.Logf("moved to the other replica %v after the first stopped announcing itself (replicaExpiry %v)", time.Since(start).Round(time.Millisecond), replicaExpiry)
	case <-time.After(20 * time.Second):
		t.Fatal("the request of a dead replica was never answered")
	}
}

// A shard conn whose replicas were all taken for dead because their
// announcements came late (a busy machine) waits for the next announcement
// instead of saying at once that the shard is not available: the replica
// was alive all along.
func TestFurthestWaitsForAReplicaThatWasOnlyLate(t *testing.T) {
	nc := conn(t)
	c, err := DialShard(nc, dshq.DefaultShard)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := startFakeReplica(t, nc, "r1", 7)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, _, ok := c.Furthest(ctx); !ok {
		t.Fatal("the replica never announced itself")
	}
	r.halt()
	// What expire does to a replica not heard from for replicaExpiry.
	c.table.mu.Lock()
	for name, e := range c.table.reps {
		close(e.gone)
		delete(c.table.reps, name)
	}
	c.table.mu.Unlock()

	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // the late replica announces itself again
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			b, _ := json.Marshal(ReplicaStatus{Replica: "r1", Lineage: "l1-test", Generation: 8})
			_ = nc.Publish(dshq.ShardStatusSubject(dshq.DefaultShard), b)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	defer func() { close(stop); <-done }()
	gen, _, ok := c.Furthest(ctx)
	if !ok || gen != 8 {
		t.Fatalf("Furthest after the replica was late: generation %d, ok %v; want 8, true", gen, ok)
	}
}
