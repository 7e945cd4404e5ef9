// Package microhost is the one host of dshq's NATS micro services
// (dsh-query, dsh-projection, dsh-tools, dsh-admin): it subscribes each
// endpoint in its queue group, answers every request on a goroutine of its
// own (at most MaxInFlight at a time, so that a long wait never blocks other
// requests), turns a handler's panic into a failed answer, encodes failures
// with the micro error headers and the {"error":{code,message}} body, and
// answers the micro monitoring requests ($SRV.PING, $SRV.INFO, $SRV.STATS)
// that `nats micro ls|info|stats` send.
//
// It speaks the micro protocol itself, with the micro package's own types
// and subjects, rather than through micro.AddService: micro times and counts
// a request around its handler's synchronous call, so a service that answers
// from a goroutine would show no errors and only the hand-off's time. Here
// num_requests, num_errors, last_error, processing_time and
// average_processing_time count the answers themselves, from the request's
// arrival to its reply, and the endpoint's data (EndpointData) splits the
// errors by code (docs/protocol.md#7-monitoring-the-services).
package microhost

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/dshq/dshq"
)

// DefaultMaxInFlight bounds the requests one service instance answers at
// once when Config.MaxInFlight is 0; further requests wait in their
// endpoint's subscription.
const DefaultMaxInFlight = 256

// Handler answers one request: the reply body, or an error. A *dshq.Error
// is answered with its code and message (EncodeError); an InBody error with
// its body as a normal reply; any other error as Config.Failed says.
type Handler func(ctx context.Context, msg *nats.Msg) ([]byte, error)

// Endpoint is one endpoint of a service.
type Endpoint struct {
	// Name is the endpoint's name as the protocol spells it
	// ("sessions.list"); micro endpoint names hold no dots, so `nats micro`
	// shows it as sessions_list.
	Name string
	// Subject is the subject it is served on.
	Subject string
	// Handler answers its requests.
	Handler Handler
}

// Config describes a service. Every service announces dshq.ServiceVersion.
type Config struct {
	// Name and Description are the service's, as `nats micro ls` shows them.
	Name, Description string
	// QueueGroup is the endpoints' queue group ("" = dshq.ServiceQueueGroup).
	QueueGroup string
	// Metadata annotates the service (INFO, PING and STATS carry it).
	Metadata map[string]string
	// MaxInFlight bounds the requests answered at once (0 =
	// DefaultMaxInFlight).
	MaxInFlight int
	// Logger receives failures and panics (nil = slog.Default()).
	Logger *slog.Logger
	// Stopping is the answer to a request that arrives while the service
	// stops (nil = SESSION_QUERY_ABORTED "service is stopping").
	Stopping error
	// Panicked is the answer to a request whose handler panicked (nil =
	// SESSION_QUERY_PERSISTENCE_FAILED "internal error").
	Panicked error
	// Failed maps a handler error that is neither a *dshq.Error nor InBody
	// to its answer (nil = SESSION_QUERY_PERSISTENCE_FAILED with the error's
	// text).
	Failed func(error) *dshq.Error
	// Observe, when set, is called once for each answered request with the
	// protocol's endpoint name, the time from arrival to reply, and the
	// failure (nil for a success): request metrics.
	Observe func(endpoint string, took time.Duration, failure *dshq.Error)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9\-_]+$`)

// Service is a running service instance.
type Service struct {
	cfg     Config
	nc      *nats.Conn
	id      string
	started time.Time
	eps     []*endpoint
	verbs   []*nats.Subscription
	slots   chan struct{}
	ctx     context.Context // cancelled by Stop; the handlers' parent
	cancel  context.CancelFunc

	mu      sync.Mutex // guards stopped and the workers' wg.Add
	stopped bool
	wg      sync.WaitGroup

	stopOnce sync.Once
	stopErr  error
}

// endpoint is an Endpoint being served, with its statistics.
type endpoint struct {
	Endpoint
	micro string // the micro endpoint name
	queue string
	sub   *nats.Subscription
	stats stats
}

// Start serves endpoints as the service cfg on nc until Stop (or until ctx
// is done, which answers later requests with cfg.Stopping). Handlers run
// with a context that ends when the service stops.
func Start(ctx context.Context, nc *nats.Conn, cfg Config, endpoints []Endpoint) (*Service, error) {
	if !nameRE.MatchString(cfg.Name) {
		return nil, fmt.Errorf("service name %q: letters, digits, dashes and underscores only", cfg.Name)
	}
	cfg = withDefaults(cfg)
	ctx, cancel := context.WithCancel(ctx)
	s := &Service{cfg: cfg, nc: nc, id: nuid.Next(), started: time.Now().UTC(),
		slots: make(chan struct{}, cfg.MaxInFlight), ctx: ctx, cancel: cancel}
	for _, e := range endpoints {
		ep := &endpoint{Endpoint: e, micro: strings.ReplaceAll(e.Name, ".", "_"), queue: cfg.QueueGroup}
		if !nameRE.MatchString(ep.micro) {
			s.abort()
			return nil, fmt.Errorf("%s: endpoint name %q: letters, digits, dots, dashes and underscores only", cfg.Name, e.Name)
		}
		sub, err := nc.QueueSubscribe(e.Subject, ep.queue, func(m *nats.Msg) { s.dispatch(ep, m, time.Now()) })
		if err != nil {
			s.abort()
			return nil, fmt.Errorf("%s: subscribe endpoint %s: %w", cfg.Name, e.Name, err)
		}
		ep.sub = sub
		s.eps = append(s.eps, ep)
	}
	if err := s.serveMonitoring(); err != nil {
		s.abort()
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	// The subscriptions may still be in the client's buffer: a round trip
	// makes the server hold them, so that the service answers every
	// connection once Start returns.
	if err := nc.FlushTimeout(subscribeTimeout); err != nil {
		s.abort()
		return nil, fmt.Errorf("%s: the server did not confirm the subscriptions: %w", cfg.Name, err)
	}
	return s, nil
}

// subscribeTimeout bounds Start's wait for the server to confirm the
// service's subscriptions.
const subscribeTimeout = 10 * time.Second

func withDefaults(cfg Config) Config {
	if cfg.QueueGroup == "" {
		cfg.QueueGroup = dshq.ServiceQueueGroup
	}
	cfg.Metadata = maps.Clone(cfg.Metadata)
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Stopping == nil {
		cfg.Stopping = &dshq.Error{Code: dshq.CodeAborted, Message: "service is stopping"}
	}
	if cfg.Panicked == nil {
		cfg.Panicked = &dshq.Error{Code: dshq.CodePersistenceFailed, Message: "internal error"}
	}
	if cfg.Failed == nil {
		cfg.Failed = func(err error) *dshq.Error {
			return &dshq.Error{Code: dshq.CodePersistenceFailed, Message: err.Error(), Err: err}
		}
	}
	return cfg
}

// ID returns the instance's id (the last token of its monitoring subjects).
func (s *Service) ID() string { return s.id }

// Stop stops taking requests (the endpoints' subscriptions drain: requests
// already delivered are answered with Config.Stopping), cancels the handlers'
// context and waits for the requests in progress. It may be called more
// than once.
func (s *Service) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		for _, ep := range s.eps {
			if err := ep.sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				errs = append(errs, fmt.Errorf("drain %s: %w", ep.Name, err))
			}
		}
		for _, sub := range s.verbs {
			if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				errs = append(errs, fmt.Errorf("drain monitoring: %w", err))
			}
		}
		s.halt()
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// halt cancels the handlers, refuses new work and waits for the work in
// progress.
func (s *Service) halt() {
	s.cancel()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.wg.Wait()
}

// abort undoes a Start that failed half way.
func (s *Service) abort() {
	for _, ep := range s.eps {
		_ = ep.sub.Unsubscribe()
	}
	for _, sub := range s.verbs {
		_ = sub.Unsubscribe()
	}
	s.halt()
}

// dispatch runs on ep's subscription: it waits for a slot (so that a full
// service holds further requests in the subscription) and answers msg on a
// worker goroutine.
func (s *Service) dispatch(ep *endpoint, msg *nats.Msg, arrived time.Time) {
	select {
	case s.slots <- struct{}{}:
	case <-s.ctx.Done():
		s.reply(ep, msg, arrived, nil, s.cfg.Stopping)
		return
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		<-s.slots
		s.reply(ep, msg, arrived, nil, s.cfg.Stopping)
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer func() { <-s.slots; s.wg.Done() }()
		out, err := s.handle(ep, msg)
		s.reply(ep, msg, arrived, out, err)
	}()
}

// handle runs ep's handler and turns a panic (a bug) into cfg.Panicked, so
// that one bad request never takes the process down.
func (s *Service) handle(ep *endpoint, msg *nats.Msg) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.Error("request panicked", "service", s.cfg.Name, "endpoint", ep.Name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			out, err = nil, s.cfg.Panicked
		}
	}()
	return ep.Handler(s.ctx, msg)
}

// reply answers msg with out or err, counting the answer first (so that a
// client that got its reply finds it in STATS).
func (s *Service) reply(ep *endpoint, msg *nats.Msg, arrived time.Time, out []byte, err error) {
	answer := &nats.Msg{Subject: msg.Reply, Data: out}
	var failure *dshq.Error
	if err != nil {
		if ib, ok := asInBody(err); ok {
			answer.Data, failure = ib.body, ib.err
		} else {
			if !errors.As(err, &failure) {
				failure = s.cfg.Failed(err)
			}
			answer.Header, answer.Data = EncodeError(failure)
		}
		s.logFailure(ep, failure)
	}
	took := time.Since(arrived)
	ep.stats.record(took, failure)
	if s.cfg.Observe != nil {
		s.cfg.Observe(ep.Name, took, failure)
	}
	if msg.Reply == "" {
		return
	}
	if err := s.nc.PublishMsg(answer); err != nil {
		ep.stats.respondFailed(err)
		s.cfg.Logger.Warn("respond", "service", s.cfg.Name, "endpoint", ep.Name, "subject", msg.Reply, "err", err)
	}
}

// logFailure logs a failure of the service itself as an error and a refused
// request (the caller's mistake) at debug level.
func (s *Service) logFailure(ep *endpoint, f *dshq.Error) {
	switch f.Code {
	case dshq.CodePersistenceFailed, dshq.CodeIndexFailed, dshq.CodeCorruptSession, dshq.CodeToolFailed:
		s.cfg.Logger.Error("request failed", "service", s.cfg.Name, "endpoint", ep.Name, "code", f.Code, "err", f)
	default:
		s.cfg.Logger.Debug("request refused", "service", s.cfg.Name, "endpoint", ep.Name, "code", f.Code, "err", f)
	}
}
