package engine

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
)

// NewShardEngine returns the Engine a projector process hosts: reads from
// p's snapshots, search through p's index, paged search hits kept in the
// JetStream KV bucket dshq.CursorBucket and cursors authenticated with the
// deployment's key (LoadCursorKey), so that any replica can continue a
// cursor. Serve it with ServeShard.
func NewShardEngine(ctx context.Context, js jetstream.JetStream, p *projection.Projector, opts ...Option) (*Engine, error) {
	store, err := NewKVCursorStore(ctx, js)
	if err != nil {
		return nil, err
	}
	key, err := LoadCursorKey(ctx, js, 1)
	if err != nil {
		return nil, err
	}
	base := []Option{WithSearcher(FromIndexFunc(p.Index)), WithCursorStore(store), WithCursorKey(key)}
	return New(FromProjector(p), append(base, opts...)...), nil
}

// Answer runs req with a reply budget of at most maxReply bytes (0 = the
// engine's own): e as a query.Shard, in the process of a query service
// (query.WithLocalShard) or behind ServeShard.
func (e *Engine) Answer(ctx context.Context, req *query.Request, maxReply int) ([]byte, error) {
	if maxReply <= 0 || maxReply >= e.maxReply {
		return e.Run(ctx, req)
	}
	bounded := *e
	bounded.maxReply = maxReply
	return bounded.Run(ctx, req)
}

// ServeShard serves e as projection shard shard on nc: the micro service
// dsh-projection with one endpoint per query endpoint on
// dsh.proj.<shard>.v1.<endpoint>, in the queue group p<shard>. The projector
// process calls it. Replies are bounded by nc's max payload. Of opts,
// query.WithLogger and query.WithRegisterer apply. stop drains and waits for
// in-flight requests.
func ServeShard(ctx context.Context, nc *nats.Conn, shard string, e *Engine, opts ...query.ServiceOption) (stop func() error, err error) {
	budget := query.ReplyBudget(nc)
	spec := query.Spec{
		Name:        dshq.ShardService,
		Description: "dshq projection reads for the query service",
		QueueGroup:  dshq.ShardQueueGroup(shard),
		Metadata:    map[string]string{"shard": shard},
		Subject:     func(endpoint string) string { return dshq.ShardSubject(shard, endpoint) },
	}
	return query.ServeEndpoints(ctx, nc, spec, func(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
		req, err := query.DecodeRequest(endpoint, body)
		if err != nil {
			return nil, err
		}
		return e.Answer(ctx, req, budget)
	}, opts...)
}
