// Package toolstest starts the real stack the tools' tests run against:
// an embedded nats-server with JetStream, the projector (bbolt and Bleve in
// the test's temp dir), the one query engine serving the projection shard
// and the dsh-query service. There is no fake of the query rules: a test
// that injects a failure decorates the real service.
package toolstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/shardhost"
)

// Log is one session log to publish: the upstream JSONL layout, whether a
// harness holds the session (a write lease makes it live), and the tenant
// whose log subject it is written on ("" for none).
type Log struct {
	JSONL  []byte
	Live   bool
	Tenant string
}

// Pipeline is the real stack (package testenv: an embedded nats-server
// with JetStream, the projector, dsh-query) with the engine serving the
// projection shard, all owned by the test and stopped when it ends.
type Pipeline struct {
	// Conn is an in-process connection to the server.
	Conn *nats.Conn
	// Client is the trusted query API client.
	Client *query.Client
	env    *testenv.Env
}

// Publish publishes one more log while the projector runs and returns the
// stream sequence of its last record (the generation that holds it).
func (p *Pipeline) Publish(t testing.TB, jsonl []byte) uint64 {
	t.Helper()
	_, seq := p.env.PublishLog(t, jsonl)
	return seq
}

// StartPipeline starts the stack, publishes logs as a harness would (see
// testenv.Env.PublishLog), leases the live ones, and waits until
// everything is projected and visible.
func StartPipeline(t testing.TB, logs []Log) *Pipeline {
	t.Helper()
	env := testenv.Start(t, testenv.StreamConfig(bus.StreamConfig{LeaseTTL: time.Minute}))
	live := 0
	for _, l := range logs {
		id, _ := env.PublishTenantLog(t, l.Tenant, l.JSONL)
		if l.Live {
			live++
			env.SetLease(t, l.Tenant, id, true)
		}
	}
	p := env.StartProjector(t)
	eng := engine.New(shardhost.Local(p))
	stopShard, err := shardhost.ServeShard(context.Background(), env.Conn, dshq.DefaultShard, eng, query.WithLogger(testenv.Quiet()))
	if err != nil {
		t.Fatalf("serve shard: %v", err)
	}
	t.Cleanup(func() { _ = stopShard() })
	client := env.ServeQuery(t)

	testenv.WaitGeneration(t, p, env.Last())
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()
	waitLive(t, ctx, client, live)
	return &Pipeline{Conn: env.Conn, Client: client, env: env}
}

// waitLive waits until the projection reports want sessions live.
func waitLive(t testing.TB, ctx context.Context, c *query.Client, want int) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := c.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: []dshq.Filter{
			{Kind: dshq.FilterAvailability, Values: []*string{dshq.Str("live")}}}})
		if err == nil && len(p.Items) == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("live sessions not projected (want %d): last err %v", want, err)
		case <-tick.C:
		}
	}
}
