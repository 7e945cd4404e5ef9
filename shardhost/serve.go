package shardhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shards"
)

// NewShardEngine returns the Engine a projector process hosts: reads from
// p's snapshots (Local), search through p's index, paged search hits kept
// in the JetStream KV bucket dshq.CursorBucket and cursors authenticated
// with the deployment's key (LoadCursorKey), so that any replica can
// continue a cursor. Serve it with ServeShard.
func NewShardEngine(ctx context.Context, js jetstream.JetStream, p *projection.Projector, opts ...engine.Option) (*engine.Engine, error) {
	store, err := shards.NewKVCursorStore(ctx, js)
	if err != nil {
		return nil, err
	}
	key, err := shards.LoadCursorKey(ctx, js, 1)
	if err != nil {
		return nil, err
	}
	base := []engine.Option{engine.WithCursorStore(store), engine.WithCursorKey(key)}
	return engine.New(Local(p), append(base, opts...)...), nil
}

// answer decodes a shard request, with the corpus statistics its header
// carries as an argument of the request, and answers it within budget.
func answer(e *engine.Engine, budget int) query.Answer {
	return func(ctx context.Context, endpoint string, body []byte, header nats.Header) ([]byte, error) {
		req, err := wire.DecodeRequest(endpoint, body)
		if err != nil {
			return nil, err
		}
		if req.CorpusStats, err = wire.DecodeCorpusStats(header.Get(wire.CorpusStatsHeader)); err != nil {
			return nil, err
		}
		return e.Answer(ctx, req, budget)
	}
}

// ServeShard serves e as projection shard shard on nc: the micro service
// dsh-projection with one endpoint per query endpoint on
// dsh.proj.<shard>.v1.<endpoint>, in the queue group p<shard>. The projector
// process calls it. Replies are bounded by nc's max payload. Of opts,
// query.WithLogger and query.WithRegisterer apply. stop drains and waits for
// in-flight requests.
func ServeShard(ctx context.Context, nc *nats.Conn, shard string, e *engine.Engine, opts ...query.ServiceOption) (stop func() error, err error) {
	budget := query.ReplyBudget(nc)
	spec := query.Spec{
		Name:        dshq.ShardService,
		Description: "dshq projection reads for the query service",
		QueueGroup:  dshq.ShardQueueGroup(shard),
		Metadata:    map[string]string{"shard": shard},
		Subject:     func(endpoint string) string { return dshq.ShardSubject(shard, endpoint) },
		Endpoints:   wire.ShardEndpoints,
	}
	return query.ServeEndpoints(ctx, nc, spec, answer(e, budget), opts...)
}

// ServeReplica serves e as replica replica of projection shard shard: the
// shard's queue-group endpoints (ServeShard), the replica's own endpoints
// dsh.proj.<shard>.v1.replica.<replica>.<endpoint>, and its status
// (query.ReplicaStatus, from status) on dsh.proj.<shard>.v1.status every
// query.ReplicaStatusEvery and as soon as its generation moves, so that
// the query service sends each request to a replica that has reached what
// it needs. replica must be a NATS subject token: the projector's durable
// consumer name, unique per projector. stop announces the replica gone,
// then drains both services.
func ServeReplica(ctx context.Context, nc *nats.Conn, shard, replica string, e *engine.Engine, status func() query.ReplicaStatus,
	opts ...query.ServiceOption) (stop func() error, err error) {
	if replica == "" || strings.ContainsAny(replica, ".*> \t\r\n") {
		return nil, fmt.Errorf("replica name %q is not a subject token", replica)
	}
	stopShard, err := ServeShard(ctx, nc, shard, e, opts...)
	if err != nil {
		return nil, err
	}
	budget := query.ReplyBudget(nc)
	spec := query.Spec{
		Name:        dshq.ShardService,
		Description: "dshq projection reads of one replica, for the query service",
		Metadata:    map[string]string{"shard": shard, "replica": replica},
		Subject:     func(endpoint string) string { return dshq.ShardReplicaSubject(shard, replica, endpoint) },
		Endpoints:   wire.ShardEndpoints,
	}
	stopReplica, err := query.ServeEndpoints(ctx, nc, spec, answer(e, budget), opts...)
	if err != nil {
		_ = stopShard()
		return nil, err
	}
	subject := dshq.ShardStatusSubject(shard)
	announce := func(st query.ReplicaStatus) {
		st.Replica = replica
		if b, err := json.Marshal(st); err == nil {
			_ = nc.Publish(subject, b)
		}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		poll := time.NewTicker(statusPoll)
		defer poll.Stop()
		var last query.ReplicaStatus
		var sent time.Time
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case now := <-poll.C:
				st := status()
				if st != last || now.Sub(sent) >= query.ReplicaStatusEvery {
					announce(st)
					last, sent = st, now
				}
			}
		}
	}()
	var (
		once    sync.Once
		stopErr error
	)
	return func() error {
		once.Do(func() {
			close(quit)
			<-done
			announce(query.ReplicaStatus{Gone: true})
			_ = nc.Flush()
			stopErr = errors.Join(stopReplica(), stopShard())
		})
		return stopErr
	}, nil
}

// statusPoll is how often ServeReplica looks at its replica's status: a
// generation that moved is announced within it.
const statusPoll = 20 * time.Millisecond
