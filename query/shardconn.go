package query

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
	"github.com/dshq/dshq/query/wire"
)

// ShardConn asks one projection shard over NATS: each request goes to a
// replica that has reached what it needs (the replicas announce their
// status, ReplicaStatus), and to another when that one dies before it
// answers. A shards source (package shards) holds one per shard.
type ShardConn struct {
	nc    *nats.Conn
	token string
	table *replicaTable
}

// DialShard follows the replicas of the projection shard token on nc.
// Close stops following them.
func DialShard(nc *nats.Conn, token string) (*ShardConn, error) {
	t, err := followReplicas(nc, token)
	if err != nil {
		return nil, fmt.Errorf("follow the replicas of shard %s: %w", token, err)
	}
	return &ShardConn{nc: nc, token: token, table: t}, nil
}

// Token is the shard's subject token.
func (c *ShardConn) Token() string { return c.token }

// Close stops following the replicas.
func (c *ShardConn) Close() { c.table.close() }

// Ask sends req (its body, with header when not nil) to a replica and
// returns the reply body, or the shard's failure as it is.
func (c *ShardConn) Ask(ctx context.Context, req *wire.Request, body []byte, header nats.Header) ([]byte, error) {
	return relay(ctx, c.nc, c.table, c.token, req.Endpoint, req, body, header, 0)
}

// Furthest returns the generation and lineage of the replica furthest
// ahead. A conn that knows no replica (none announced itself yet, or the
// ones it knew were late past replicaExpiry) waits for one to announce
// itself, up to replicaExpiry; ok is false when none did.
func (c *ShardConn) Furthest(ctx context.Context) (gen uint64, lineage string, ok bool) {
	gen, lineage, ok, joined := c.table.furthestOrJoined()
	if ok {
		return gen, lineage, true
	}
	wait := time.NewTimer(replicaExpiry)
	defer wait.Stop()
	select {
	case <-joined:
	case <-wait.C:
	case <-ctx.Done():
	}
	return c.table.furthest()
}

// furthest returns the generation and lineage of the replica furthest
// ahead; ok is false without replicas.
func (t *replicaTable) furthest() (gen uint64, lineage string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.reps {
		if !ok || e.st.Generation > gen {
			gen, lineage, ok = e.st.Generation, e.st.Lineage, true
		}
	}
	return gen, lineage, ok
}

// relay asks a replica of shard (forwardReplicas) and returns its answer
// (its failures as they are). wait, when not 0, is the bound ctx sets, named
// in the failure when it passes.
func relay(ctx context.Context, nc *nats.Conn, table *replicaTable, shard, endpoint string, req *wire.Request, body []byte, header nats.Header, wait time.Duration) ([]byte, error) {
	msg, err := forwardReplicas(ctx, nc, table, shard, endpoint, req, body, header)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s is not available", shard)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		within := "in time"
		if wait > 0 {
			within = "within " + wait.String()
		}
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s did not answer %s", shard, within)}
	case err != nil:
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s: %v", shard, err)}
	}
	if err := microhost.DecodeError(msg); err != nil {
		return nil, err
	}
	return msg.Data, nil
}
