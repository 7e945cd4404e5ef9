package query

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/internal/microhost"
	"github.com/dshq/dshq/query/wire"
)

// maxInFlight bounds the requests one service instance works on at once;
// further requests wait in the subscription.
const maxInFlight = 256

// ServiceOption configures Serve.
type ServiceOption func(*serviceConfig)

type serviceConfig struct {
	shard      string
	logger     *slog.Logger
	registerer prometheus.Registerer
	local      Engine
}

// Engine is a query engine in this process (package engine's Engine): what
// WithEngine answers through instead of forwarding to a shard.
type Engine interface {
	// Answer answers a decoded request with its reply body, at most
	// maxReply bytes (0 = the engine's own budget).
	Answer(ctx context.Context, req *wire.Request, maxReply int) ([]byte, error)
}

// ReplyBudget returns the largest reply body nc can carry.
func ReplyBudget(nc *nats.Conn) int { return int(nc.MaxPayload()) - wire.ReplyHeadroom }

// WithEngine makes Serve answer every request through e, decoded once,
// instead of forwarding it to a projection shard: the engine of the shard
// this process serves (shardhost.ServeShard; the answers are the same, the
// engine, its generation and cursors shared with every remote replica, and
// `dshq serve` runs this way), or an engine over the shards of a
// partitioned projection (package shards), which asks them over NATS.
func WithEngine(e Engine) ServiceOption {
	return func(c *serviceConfig) { c.local = e }
}

// WithShardToken sets the token of the one projection shard the service
// forwards requests to (default "0"; dshq.ShardToken names a shard of a
// partitioned projection). With WithEngine it is only shown in the
// service's metadata.
func WithShardToken(shard string) ServiceOption { return func(c *serviceConfig) { c.shard = shard } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) ServiceOption { return func(c *serviceConfig) { c.logger = l } }

// Serve starts the query service dsh-query on nc: one micro endpoint per
// endpoint on dsh.query.v1.<endpoint>, in the queue group "q" so replicas
// share the load. Each request is decoded strictly and validated, then
// forwarded to the projection shard and its answer relayed. stop drains the
// endpoints and waits for in-flight requests.
func Serve(ctx context.Context, nc *nats.Conn, opts ...ServiceOption) (stop func() error, err error) {
	cfg := serviceConfig{shard: dshq.DefaultShard}
	for _, o := range opts {
		o(&cfg)
	}
	spec := Spec{
		Name:        dshq.QueryService,
		Description: "dshq trusted query API (docs/protocol.md §3)",
		Metadata:    map[string]string{"shard": cfg.shard},
		Subject:     func(endpoint string) string { return dshq.QuerySubjectPrefix + "." + endpoint },
	}
	var table *replicaTable
	if cfg.local == nil {
		// The shard's replicas announce their generations: each request
		// goes to one that has reached what it needs.
		if table, err = followReplicas(nc, cfg.shard); err != nil {
			return nil, fmt.Errorf("follow the replicas of shard %s: %w", cfg.shard, err)
		}
	}
	stopService, err := ServeEndpoints(ctx, nc, spec, shardAnswer(nc, cfg, table), opts...)
	if err != nil {
		if table != nil {
			table.close()
		}
		return nil, err
	}
	return func() error {
		err := stopService()
		if table != nil {
			table.close()
		}
		return err
	}, nil
}

// shardAnswer returns how Serve answers: through the local shard, or by
// forwarding to a replica of the shard over NATS (table).
func shardAnswer(nc *nats.Conn, cfg serviceConfig, table *replicaTable) Answer {
	if cfg.local == nil {
		return func(ctx context.Context, endpoint string, body []byte, _ nats.Header) ([]byte, error) {
			return forward(ctx, nc, table, cfg.shard, endpoint, body)
		}
	}
	budget := ReplyBudget(nc)
	return func(ctx context.Context, endpoint string, body []byte, _ nats.Header) ([]byte, error) {
		req, err := wire.DecodeRequest(endpoint, body)
		if err != nil {
			return nil, err
		}
		return cfg.local.Answer(ctx, req, budget)
	}
}

// Answer answers one request body of endpoint, sent with header (nil
// without): the reply body or a failure.
type Answer func(ctx context.Context, endpoint string, body []byte, header nats.Header) ([]byte, error)

// Spec names a service that hosts every query endpoint: dsh-query, or a
// projection shard.
type Spec struct {
	// Name, Description and Metadata are what nats micro shows.
	Name, Description string
	Metadata          map[string]string
	// QueueGroup is the endpoints' queue group ("" = dshq.ServiceQueueGroup).
	QueueGroup string
	// Subject returns an endpoint's subject.
	Subject func(endpoint string) string
	// Endpoints lists the endpoints to serve (nil = Endpoints).
	Endpoints []string
}

// ServeEndpoints hosts every query endpoint (Endpoints) as the service spec
// on nc, each request answered by answer, at most 256 at a time, with the
// query API's failures (a panic is SESSION_QUERY_PERSISTENCE_FAILED "query
// failed: internal error") and, with WithRegisterer, its request metrics.
// Serve and the projection shard (engine.ServeShard) use it; of opts, only
// WithLogger and WithRegisterer apply. stop drains the endpoints and waits
// for in-flight requests.
func ServeEndpoints(ctx context.Context, nc *nats.Conn, spec Spec, answer Answer, opts ...ServiceOption) (stop func() error, err error) {
	cfg := serviceConfig{logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := newMetrics(cfg.registerer, spec.Name)
	if err != nil {
		return nil, err
	}
	names := spec.Endpoints
	if names == nil {
		names = wire.Endpoints
	}
	eps := make([]microhost.Endpoint, len(names))
	for i, ep := range names {
		eps[i] = microhost.Endpoint{Name: ep, Subject: spec.Subject(ep), Handler: func(ctx context.Context, msg *nats.Msg) ([]byte, error) {
			return answer(ctx, ep, msg.Data, msg.Header)
		}}
	}
	svc, err := microhost.Start(ctx, nc, microhost.Config{
		Name:        spec.Name,
		Description: spec.Description,
		QueueGroup:  spec.QueueGroup,
		Metadata:    spec.Metadata,
		MaxInFlight: maxInFlight,
		Logger:      cfg.logger,
		Panicked:    &dshq.Error{Code: dshq.CodePersistenceFailed, Message: "query failed: internal error"},
		Failed: func(err error) *dshq.Error {
			return &dshq.Error{Code: dshq.CodePersistenceFailed, Message: "query failed: " + err.Error(), Err: err}
		},
		Observe: m.observe,
	}, eps)
	if err != nil {
		return nil, err
	}
	// Clients waiting for replies send their requests again when the
	// instance (re)connects: those in flight when its connection dropped
	// are lost (failover.Watch.Announce).
	stopAnnounce := failover.For(nc).Announce(spec.Subject(dshq.MovedEndpoint))
	return func() error {
		stopAnnounce()
		return svc.Stop()
	}, nil
}

// forward validates body and asks a replica of the projection shard
// (forwardReplicas), relaying its answer (errors included).
func forward(ctx context.Context, nc *nats.Conn, table *replicaTable, shard, endpoint string, body []byte) ([]byte, error) {
	req, err := wire.DecodeRequest(endpoint, body)
	if err != nil {
		return nil, err
	}
	wait := time.Duration(req.TimeoutMs)*time.Millisecond + 10*time.Second
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return relay(ctx, nc, table, shard, endpoint, req, body, nil, wait)
}
