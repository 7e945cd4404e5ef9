package query

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
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
	local      *Engine
}

// WithLocalShard tells Serve that engine, the engine this process serves as
// the service's shard (ServeShard), is in the same process: requests are
// answered by calling it directly, decoded once, instead of a second NATS
// round trip to the shard subject. The answers are the same (the engine,
// its generation and cursors are shared with every remote replica that
// asks the shard over NATS); `dshq serve` runs this way.
func WithLocalShard(engine *Engine) ServiceOption {
	return func(c *serviceConfig) { c.local = engine }
}

// WithShard sets the projection shard token the service asks (default "0").
func WithShard(shard string) ServiceOption { return func(c *serviceConfig) { c.shard = shard } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) ServiceOption { return func(c *serviceConfig) { c.logger = l } }

// Serve starts the query service dsh-query on nc: one micro endpoint per
// endpoint on dsh.query.v1.<endpoint>, in the queue group "q" so replicas
// share the load. Each request is decoded strictly and validated, then
// forwarded to the projection shard and its answer relayed. stop drains the
// endpoints and waits for in-flight requests.
func Serve(ctx context.Context, nc *nats.Conn, opts ...ServiceOption) (stop func() error, err error) {
	cfg := serviceConfig{shard: dshq.DefaultShard, logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	return serve(ctx, nc, microhost.Config{
		Name:        dshq.QueryService,
		Description: "dshq trusted query API (CONTRACT §3)",
		Metadata:    map[string]string{"shard": cfg.shard},
	}, func(endpoint string) string { return dshq.QuerySubjectPrefix + "." + endpoint },
		shardAnswer(nc, cfg), cfg)
}

// shardAnswer returns how Serve answers: through the local engine, or by
// forwarding to the shard over NATS.
func shardAnswer(nc *nats.Conn, cfg serviceConfig) answerFunc {
	if cfg.local == nil {
		return func(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
			return forward(ctx, nc, cfg.shard, endpoint, body)
		}
	}
	return engineAnswer(nc, cfg.local)
}

// engineAnswer answers requests with engine, its replies bounded by nc's
// max payload.
func engineAnswer(nc *nats.Conn, engine *Engine) answerFunc {
	eng := *engine
	if limit := int(nc.MaxPayload()) - replyHeadroom; limit > 0 && limit < eng.maxReply {
		eng.maxReply = limit
	}
	return func(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
		req, err := DecodeRequest(endpoint, body)
		if err != nil {
			return nil, err
		}
		return eng.Run(ctx, req)
	}
}

// ServeShard serves engine as projection shard shard on nc: the micro
// service dsh-projection with one endpoint per query endpoint on
// dsh.proj.<shard>.v1.<endpoint>. The projector process calls it. Replies
// are bounded by nc's max payload. stop drains and waits for in-flight
// requests.
func ServeShard(ctx context.Context, nc *nats.Conn, shard string, engine *Engine, opts ...ServiceOption) (stop func() error, err error) {
	cfg := serviceConfig{logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	return serve(ctx, nc, microhost.Config{
		Name:        dshq.ShardService,
		Description: "dshq projection reads for the query service",
		QueueGroup:  dshq.ShardQueueGroup(shard),
		Metadata:    map[string]string{"shard": shard},
	}, func(endpoint string) string { return dshq.ShardSubject(shard, endpoint) },
		engineAnswer(nc, engine), cfg)
}

type answerFunc func(ctx context.Context, endpoint string, body []byte) ([]byte, error)

// serve hosts one endpoint per query endpoint on subject(endpoint), each
// answered by answer (microhost: slots, panics, error headers, STATS).
func serve(ctx context.Context, nc *nats.Conn, mc microhost.Config, subject func(string) string, answer answerFunc, sc serviceConfig) (func() error, error) {
	m, err := newMetrics(sc.registerer, mc.Name)
	if err != nil {
		return nil, err
	}
	mc.Logger = sc.logger
	mc.MaxInFlight = maxInFlight
	mc.Panicked = &dshq.Error{Code: dshq.CodePersistenceFailed, Message: "query failed: internal error"}
	mc.Failed = func(err error) *dshq.Error {
		return &dshq.Error{Code: dshq.CodePersistenceFailed, Message: "query failed: " + err.Error(), Err: err}
	}
	mc.Observe = m.observe
	eps := make([]microhost.Endpoint, len(Endpoints))
	for i, ep := range Endpoints {
		eps[i] = microhost.Endpoint{Name: ep, Subject: subject(ep), Handler: func(ctx context.Context, msg *nats.Msg) ([]byte, error) {
			return answer(ctx, ep, msg.Data)
		}}
	}
	svc, err := microhost.Start(ctx, nc, mc, eps)
	if err != nil {
		return nil, err
	}
	return svc.Stop, nil
}

// forward validates body and asks the projection shard, relaying its
// answer (errors included).
func forward(ctx context.Context, nc *nats.Conn, shard, endpoint string, body []byte) ([]byte, error) {
	req, err := DecodeRequest(endpoint, body)
	if err != nil {
		return nil, err
	}
	wait := msDuration(req.TimeoutMs) + 10*time.Second
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, dshq.ShardSubject(shard, endpoint), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s is not available", shard)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s did not answer within %s", shard, wait)}
	case err != nil:
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s: %v", shard, err)}
	}
	if err := microhost.DecodeError(msg); err != nil {
		return nil, err
	}
	return msg.Data, nil
}
