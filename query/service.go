package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
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
	return serve(ctx, nc, micro.Config{
		Name:        dshq.QueryService,
		Version:     dshq.ServiceVersion,
		Description: "dshq trusted query API (CONTRACT §3)",
		QueueGroup:  dshq.ServiceQueueGroup,
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
	return serve(ctx, nc, micro.Config{
		Name:        dshq.ShardService,
		Version:     dshq.ServiceVersion,
		Description: "dshq projection reads for the query service",
		QueueGroup:  dshq.ShardQueueGroup(shard),
		Metadata:    map[string]string{"shard": shard},
	}, func(endpoint string) string { return dshq.ShardSubject(shard, endpoint) },
		engineAnswer(nc, engine), cfg)
}

type answerFunc func(ctx context.Context, endpoint string, body []byte) ([]byte, error)

func serve(ctx context.Context, nc *nats.Conn, cfg micro.Config, subject func(string) string, answer answerFunc, sc serviceConfig) (func() error, error) {
	log := sc.logger
	m, err := newMetrics(sc.registerer, cfg.Name)
	if err != nil {
		return nil, err
	}
	stats := newServiceStats()
	cfg.StatsHandler = stats.data
	svc, err := micro.AddService(nc, cfg)
	if err != nil {
		return nil, fmt.Errorf("add service %s: %w", cfg.Name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxInFlight)
	for _, ep := range Endpoints {
		// Endpoint names may not hold dots: sessions.list is named sessions_list.
		name := strings.ReplaceAll(ep, ".", "_")
		handle := func(r micro.Request) {
			// The answer is sent from a goroutine, so it goes straight to the
			// reply subject: micro's Respond may not be called once the
			// handler has returned. For the same reason micro's own error
			// count stays 0: stats counts the answers, shown as endpoint data.
			start := time.Now()
			data, reply := r.Data(), r.Reply()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				err := &dshq.Error{Code: dshq.CodeAborted, Message: "service is stopping"}
				stats.record(name, time.Since(start), err)
				respond(nc, reply, nil, err, log)
				return
			}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				out, err := safeAnswer(ctx, answer, ep, data, log)
				m.observe(ep, start, err)
				stats.record(name, time.Since(start), err)
				if err != nil {
					logFailure(log, cfg.Name, ep, err)
				}
				respond(nc, reply, out, err, log)
			}()
		}
		if err := svc.AddEndpoint(name, micro.HandlerFunc(handle), micro.WithEndpointSubject(subject(ep))); err != nil {
			cancel()
			_ = svc.Stop()
			return nil, fmt.Errorf("add endpoint %s: %w", ep, err)
		}
	}
	var once sync.Once
	var stopErr error
	return func() error {
		once.Do(func() {
			stopErr = svc.Stop()
			cancel()
			wg.Wait()
		})
		return stopErr
	}, nil
}

// safeAnswer runs answer and turns a panic (a bug) into a failed request,
// so that one bad request never takes the process down.
func safeAnswer(ctx context.Context, answer answerFunc, endpoint string, body []byte, log *slog.Logger) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("query panicked", "endpoint", endpoint, "panic", r, "stack", string(debug.Stack()))
			out, err = nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Message: "query failed: internal error"}
		}
	}()
	return answer(ctx, endpoint, body)
}

func logFailure(log *slog.Logger, service, endpoint string, err error) {
	code := dshq.ErrorCode(err)
	switch code {
	case dshq.CodePersistenceFailed, dshq.CodeIndexFailed, dshq.CodeCorruptSession, "":
		log.Error("query failed", "service", service, "endpoint", endpoint, "code", code, "err", err)
	default:
		log.Debug("query refused", "service", service, "endpoint", endpoint, "code", code, "err", err)
	}
}

// respond sends out, or err with the micro error headers and the error
// body, to reply.
func respond(nc *nats.Conn, reply string, out []byte, err error, log *slog.Logger) {
	if reply == "" {
		return
	}
	msg := &nats.Msg{Subject: reply, Data: out}
	if err != nil {
		var de *dshq.Error
		if !errors.As(err, &de) {
			de = &dshq.Error{Code: dshq.CodePersistenceFailed, Message: "query failed: " + err.Error(), Err: err}
		}
		msg.Data, _ = json.Marshal(dshq.ErrorReply{Error: dshq.ErrorBody{Code: de.Code, Message: de.Message}})
		msg.Header = nats.Header{}
		msg.Header.Set(micro.ErrorCodeHeader, string(de.Code))
		msg.Header.Set(micro.ErrorHeader, headerText(de.Message))
	}
	if err := nc.PublishMsg(msg); err != nil {
		log.Warn("respond", "subject", reply, "err", err)
	}
}

// headerText makes a message safe for a header value.
func headerText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if s == "" {
		s = "error"
	}
	return s
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
	if err := replyError(msg); err != nil {
		return nil, err
	}
	return msg.Data, nil
}
