package admin

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/projection"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// fixture is a test's stack with a projector (not yet running) and
// dsh-admin serving it.
type fixture struct {
	env    *testenv.Env
	p      *projection.Projector
	client *Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	env := testenv.Start(t)
	p := env.OpenProjector(t)
	stop, err := Serve(context.Background(), env.Conn, p, WithLogger(testenv.Quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &fixture{env: env, p: p, client: NewClient(env.Conn)}
}

// run runs the projector until the test ends.
func (f *fixture) run(t *testing.T) { f.env.RunProjector(t, f.p) }

func (f *fixture) publish(t *testing.T, subject, data string) {
	t.Helper()
	f.env.Publish(t, subject, []byte(data))
}

func (f *fixture) session(t *testing.T, id string) {
	f.publish(t, "dsh.log."+id, `{"type":"session","version":2,"id":"`+id+`","createdAt":1,"cwd":"/w","isSeeded":false}`)
	f.publish(t, "dsh.log."+id, `{"type":"turn/start","seq":0,"time":2,"data":{}}`)
	f.publish(t, "dsh.log."+id, `{"type":"user/message","seq":1,"time":3,"data":{"id":"m1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"hello admin"}]},"surfaceOp":"append"}`)
}

func TestStats(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.session(t, "s-1")
	f.publish(t, "dsh.log.bad", `{"type":"session","version":7,"id":"bad"}`)

	t.Run("records the projector has not applied are lag", func(t *testing.T) {
		st, err := f.client.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Generation != 0 || st.Lag != 4 || st.StreamLastSeq != 4 || st.Sessions != 0 {
			t.Errorf("%+v", st)
		}
	})

	f.run(t)
	if err := f.p.WaitGeneration(ctx, f.env.Last()); err != nil {
		t.Fatal(err)
	}
	t.Run("applied records are counted as sessions, events and quarantined records", func(t *testing.T) {
		st, err := f.client.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := Stats{Generation: 4, Epoch: f.p.Epoch(), StreamLastSeq: 4, StreamRecords: 4, Sessions: 1, Events: 2, Quarantined: 1,
			IndexDocs: st.IndexDocs, IndexBytes: st.IndexBytes, Harnesses: map[string]int64{NativeHarness: 1}}
		if !reflect.DeepEqual(*st, want) || st.IndexDocs == 0 {
			t.Errorf("stats %+v, want %+v", *st, want)
		}
	})

	t.Run("a rebuild swaps in a new epoch and status follows it to the end", func(t *testing.T) {
		before, err := f.client.Status(ctx)
		if err != nil || before.Rebuild != nil || before.Generation != 4 {
			t.Fatalf("status %+v, %v", before, err)
		}
		r, err := f.client.Rebuild(ctx)
		if err != nil || r.ID == "" || !r.Running {
			t.Fatalf("rebuild %+v, %v", r, err)
		}
		var st *Status
		for {
			if st, err = f.client.Status(ctx); err != nil {
				t.Fatal(err)
			}
			if !st.Rebuild.Running {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal("rebuild did not finish")
			case <-time.After(20 * time.Millisecond):
			}
		}
		if rb := st.Rebuild; rb.ID != r.ID || !rb.Swapped || rb.Error != "" || rb.Applied != 4 || rb.Records != 4 || rb.FinishedAt < rb.StartedAt {
			t.Errorf("rebuild status %+v", rb)
		}
		if st.Epoch == before.Epoch {
			t.Error("the epoch did not change")
		}
		after, err := f.client.Stats(ctx)
		if err != nil || after.Sessions != 1 || after.Events != 2 || after.Quarantined != 1 {
			t.Errorf("stats after rebuild %+v, %v", after, err)
		}
	})
}

func TestClientWithoutService(t *testing.T) {
	nc := testnats.Start(t, embedded.Config{}).Conn(t)
	_, err := NewClient(nc).Stats(context.Background())
	if dshq.ErrorCode(err) != dshq.CodeIndexFailed || !strings.Contains(err.Error(), "no projector serves dsh-admin") {
		t.Errorf("got %v", err)
	}
}

// TestPartitionedStats: on a projection partitioned into three shards,
// stats is the sum of the shards' (each shard counts only its sessions),
// with each shard's own reply beside; a shard that does not answer fails
// the call, naming it.
func TestPartitionedStats(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	perShard := make([]int64, 3)
	for i := range 12 {
		id := fmt.Sprintf("s-%d", i)
		perShard[dshq.ShardOf(id, 3)]++
		env.Publish(t, "dsh.log."+id, []byte(`{"type":"session","version":2,"id":"`+id+`","createdAt":1,"cwd":"/w","isSeeded":false}`))
		env.Publish(t, "dsh.log."+id, []byte(`{"type":"turn/start","seq":0,"time":2,"data":{}}`))
		env.Publish(t, "dsh.log."+id, []byte(`{"type":"user/message","seq":1,"time":3,"data":{"id":"m1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"hello admin"}]},"surfaceOp":"append"}`))
	}
	env.Publish(t, "dsh.log.bad", []byte(`{"type":"session","version":7,"id":"bad"}`))
	for _, n := range perShard {
		if n == 0 {
			t.Fatalf("the sessions do not span the shards: %v", perShard)
		}
	}
	var stops []func() error
	for i := range 3 {
		p := env.StartProjector(t, projection.WithPartition(i, 3), projection.WithDurable(dshq.ShardDurable(i, 3)))
		if err := p.WaitGeneration(ctx, env.Last()); err != nil {
			t.Fatal(err)
		}
		stop, err := Serve(ctx, env.Conn, p, WithLogger(testenv.Quiet()))
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, stop)
	}
	defer func() {
		for _, stop := range stops {
			if stop != nil {
				if err := stop(); err != nil {
					t.Errorf("stop: %v", err)
				}
			}
		}
	}()
	client := NewClient(env.Conn)
	st, err := client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := env.Last()
	if st.Shards != 3 || st.Sessions != 12 || st.Events != 24 || st.Quarantined != 1 || st.Generation != last ||
		st.Lag != 0 || st.StreamLastSeq != last || !reflect.DeepEqual(st.Harnesses, map[string]int64{NativeHarness: 12}) || len(st.PerShard) != 3 {
		t.Fatalf("stats %+v", *st)
	}
	var docs uint64
	for i, p := range st.PerShard {
		if p.Shard != i || p.Shards != 3 || p.Sessions != perShard[i] || p.Events != 2*perShard[i] || p.Generation != last {
			t.Errorf("shard %d: %+v, want %d sessions", i, p, perShard[i])
		}
		docs += p.IndexDocs
	}
	if st.IndexDocs != docs || docs < 12 {
		t.Errorf("index docs %d, the shards' sum %d", st.IndexDocs, docs)
	}

	if err := stops[2](); err != nil {
		t.Fatal(err)
	}
	stops[2] = nil
	_, err = client.Stats(ctx)
	if dshq.ErrorCode(err) != dshq.CodeIndexFailed || !strings.Contains(err.Error(), "shard 2of3") {
		t.Fatalf("stats without shard 2: %v", err)
	}
}
