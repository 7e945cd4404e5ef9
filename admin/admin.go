// Package admin is dshq's operator API: the NATS micro service dsh-admin,
// served next to a projector, with three endpoints on dsh.admin.v1.<name>:
//
//	status   {}  → Status: generation, epoch, catching up, the last (or running) rebuild
//	stats    {}  → Stats: sessions, events, quarantined records, lag, generation, catching up
//	rebuild  {}  → RebuildStatus: starts a rebuild (or reports the running one)
//
// A rebuild runs in a goroutine owned by the service (stopping the service
// cancels it and waits); clients follow it by polling status until the new
// projection is swapped in or the rebuild failed. A request's body is empty
// or {}; any other is SESSION_QUERY_INVALID_REQUEST. Failures answer with the micro
// error headers and the {"error":{code,message}} body of the query API
// (docs/protocol.md#3-the-trusted-query-api), so Client returns a *dshq.Error.
//
// The admin API is for trusted operators: deployments give harness
// credentials no access to dsh.admin.>.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
	"github.com/dshq/dshq/projection"
)

// Endpoint names: each is served on dshq.AdminSubjectPrefix.<name>
// (dsh.admin.v1.<name>) by the service dshq.AdminService.
const (
	EndpointStatus  = "status"
	EndpointStats   = "stats"
	EndpointRebuild = "rebuild"
)

// Status is the status reply.
type Status struct {
	// Generation is the stream sequence through which the serving
	// projection has been applied.
	Generation uint64 `json:"generation"`
	// Epoch identifies the serving projection; a rebuild swap changes it.
	Epoch string `json:"epoch"`
	// StreamLastSeq is the session stream's last sequence as the
	// projector last learnt it (from its consumer, at no extra cost).
	StreamLastSeq uint64 `json:"streamLastSeq"`
	// CatchingUp is true while the projector works off a backlog (after a
	// start or an automatic rebuild with records to apply): answers may be
	// incomplete until it is false.
	CatchingUp bool `json:"catchingUp"`
	// Rebuild is the running rebuild, or the last one this service ran;
	// nil when none ran.
	Rebuild *RebuildStatus `json:"rebuild,omitempty"`
}

// RebuildStatus describes one rebuild.
type RebuildStatus struct {
	// ID identifies the rebuild (unique per start).
	ID string `json:"id"`
	// Running is true until the rebuild swapped in or failed.
	Running bool `json:"running"`
	// Applied is the stream sequence the new projection has reached.
	Applied uint64 `json:"applied"`
	// Target is the stream's last sequence when the rebuild (or its final
	// catch-up) began.
	Target uint64 `json:"target"`
	// Records is the number of records applied so far.
	Records int `json:"records"`
	// Swapped is true once the new projection serves.
	Swapped bool `json:"swapped"`
	// Error is why the rebuild failed ("" unless it failed).
	Error string `json:"error,omitempty"`
	// StartedAt and FinishedAt are epoch milliseconds (FinishedAt 0 while
	// running).
	StartedAt  int64 `json:"startedAt"`
	FinishedAt int64 `json:"finishedAt,omitempty"`
	// AlreadyRunning is set on a rebuild reply that found a rebuild running
	// and started none.
	AlreadyRunning bool `json:"alreadyRunning,omitempty"`
}

// Stats is the stats reply: what the serving projection holds, taken from
// one consistent snapshot, and how far it is behind the stream.
type Stats struct {
	Generation uint64 `json:"generation"`
	Epoch      string `json:"epoch"`
	// StreamLastSeq is the session stream's last sequence.
	StreamLastSeq uint64 `json:"streamLastSeq"`
	// StreamRecords is the number of records in the session stream.
	StreamRecords uint64 `json:"streamRecords"`
	// Lag is StreamLastSeq - Generation: records not yet applied.
	Lag uint64 `json:"lag"`
	// CatchingUp is Status.CatchingUp.
	CatchingUp bool `json:"catchingUp"`
	// Sessions counts sessions with a valid header record.
	Sessions int64 `json:"sessions"`
	// InvalidSessions counts sessions whose surface is invalid.
	InvalidSessions int64 `json:"invalidSessions"`
	// LiveSessions counts sessions whose write lease is held.
	LiveSessions int64 `json:"liveSessions"`
	// Harnesses counts sessions by the harness whose own file they were
	// converted from (the header's harness: "claude-code", "codex"); the
	// key NativeHarness counts native sessions (written through the SDK or
	// imported from deepseek-harness logs), as dshq stats and dshq search
	// --harness name them. An addition to the stats reply.
	Harnesses map[string]int64 `json:"harnesses"`
	// Events counts stored events (invalid ones included).
	Events int64 `json:"events"`
	// Quarantined counts records the projector refused.
	Quarantined int64 `json:"quarantined"`
	// IndexDocs and IndexBytes describe the full-text index.
	IndexDocs  uint64 `json:"indexDocs"`
	IndexBytes int64  `json:"indexBytes"`
	// Shards is the number of shards of a partitioned projection (an
	// addition; omitted unpartitioned). A shard's own reply also names its
	// Shard; Client.Stats asks every shard and answers their sum, with each
	// shard's own reply in PerShard (see mergeStats).
	Shards   int     `json:"shards,omitempty"`
	Shard    int     `json:"shard,omitempty"`
	PerShard []Stats `json:"perShard,omitempty"`
}

// shardStatsSubject is where every replica of shard token of a partitioned
// projection answers stats for its shard alone: dsh.admin.v1.shard.<token>.stats.
func shardStatsSubject(token string) string {
	return dshq.AdminSubjectPrefix + ".shard." + token + "." + EndpointStats
}

// mergeStats sums the shards' stats (in shard order) into the stats of
// the whole projection: counts are summed; the generation is the least
// (every record up to it is counted) and the lag is measured from it; the
// stream figures are the furthest seen; catching up if any shard is; the
// epoch is shard 0's (each shard's is in PerShard).
func mergeStats(parts []Stats) Stats {
	out := Stats{Generation: parts[0].Generation, Epoch: parts[0].Epoch, Harnesses: map[string]int64{},
		Shards: len(parts), PerShard: parts}
	for _, p := range parts {
		out.Generation = min(out.Generation, p.Generation)
		out.StreamLastSeq = max(out.StreamLastSeq, p.StreamLastSeq)
		out.StreamRecords = max(out.StreamRecords, p.StreamRecords)
		out.CatchingUp = out.CatchingUp || p.CatchingUp
		out.Sessions += p.Sessions
		out.InvalidSessions += p.InvalidSessions
		out.LiveSessions += p.LiveSessions
		for h, n := range p.Harnesses {
			out.Harnesses[h] += n
		}
		out.Events += p.Events
		out.Quarantined += p.Quarantined
		out.IndexDocs += p.IndexDocs
		out.IndexBytes += p.IndexBytes
	}
	if out.StreamLastSeq > out.Generation {
		out.Lag = out.StreamLastSeq - out.Generation
	}
	return out
}

// Option configures Serve.
type Option func(*config)

type config struct {
	stream string
	log    *slog.Logger
}

// WithStream sets the session stream whose tail Stats compares with the
// generation (default dshq.SessionStream).
func WithStream(name string) Option { return func(c *config) { c.stream = name } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// server answers the admin endpoints for one projector.
type server struct {
	p   *projection.Projector
	js  jetstream.JetStream
	cfg config

	ctx context.Context // cancelled by stop; parent of every rebuild
	wg  sync.WaitGroup  // the running rebuild goroutine

	mu      sync.Mutex // guards rebuild
	rebuild *RebuildStatus
}

// Serve starts dsh-admin for projector p on nc and returns its stop
// function, which stops the service, cancels a running rebuild and waits for
// it. p must be running (Run) for a rebuild to finish.
func Serve(ctx context.Context, nc *nats.Conn, p *projection.Projector, opts ...Option) (stop func() error, err error) {
	cfg := config{stream: dshq.SessionStream, log: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("admin: jetstream: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &server{p: p, js: js, cfg: cfg, ctx: sctx}
	endpoint := func(name string, fn func(context.Context) (any, error)) microhost.Endpoint {
		return microhost.Endpoint{Name: name, Subject: dshq.AdminSubjectPrefix + "." + name, Handler: s.handler(fn)}
	}
	eps := []microhost.Endpoint{
		endpoint(EndpointRebuild, func(context.Context) (any, error) { return s.startRebuild(), nil }),
		endpoint(EndpointStats, s.stats),
		endpoint(EndpointStatus, func(context.Context) (any, error) { return s.status(), nil }),
	}
	if part := p.Partition(); part.Shards > 1 {
		// A partitioned shard's stats count its sessions only: each shard
		// answers on a subject of its own too, for Client.Stats to sum.
		eps = append(eps, microhost.Endpoint{Name: "shard." + EndpointStats,
			Subject: shardStatsSubject(dshq.ShardToken(part.Shard, part.Shards)), Handler: s.handler(s.stats)})
	}
	svc, err := microhost.Start(ctx, nc, microhost.Config{
		Name:        dshq.AdminService,
		Description: "dshq operator API: status, stats, rebuild",
		MaxInFlight: maxInFlight,
		Logger:      cfg.log,
		Panicked:    &dshq.Error{Code: dshq.CodeIndexFailed, Message: "admin request failed: internal error"},
		Failed: func(err error) *dshq.Error {
			return &dshq.Error{Code: dshq.CodeIndexFailed, Message: err.Error(), Err: err}
		},
	}, eps)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("admin: %w", err)
	}
	return func() error {
		err := svc.Stop()
		cancel()
		s.wg.Wait()
		return err
	}, nil
}

// maxInFlight bounds the admin requests answered at once.
const maxInFlight = 16

// handler adapts fn to a microhost handler: a JSON reply, or the error
// shape of the query API (a failure without a code is
// SESSION_QUERY_INDEX_FAILED with the error's text).
func (s *server) handler(fn func(context.Context) (any, error)) microhost.Handler {
	return func(_ context.Context, msg *nats.Msg) ([]byte, error) {
		if err := checkEmpty(msg.Data); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		defer cancel()
		out, err := fn(ctx)
		if err != nil {
			var de *dshq.Error
			if errors.As(err, &de) {
				// The message of the whole chain, as before.
				return nil, &dshq.Error{Code: de.Code, Message: err.Error(), Err: err}
			}
			return nil, err
		}
		return json.Marshal(out)
	}
}

// checkEmpty accepts the body of an admin request: empty, or a JSON object
// with no members ({}). Anything else is SESSION_QUERY_INVALID_REQUEST,
// before the request does anything (a rebuild included).
func checkEmpty(body []byte) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil || fields == nil {
		return dshq.Errorf(dshq.CodeInvalidRequest, "request body must be empty or {}")
	}
	if len(fields) > 0 {
		first := slices.Sorted(maps.Keys(fields))[0]
		return dshq.Errorf(dshq.CodeInvalidRequest, "unknown request field %s (admin requests take none)", dshq.Quote(first))
	}
	return nil
}

func (s *server) status() Status {
	pr := s.p.Progress()
	st := Status{Generation: pr.Generation, Epoch: s.p.Epoch(), StreamLastSeq: pr.StreamLastSeq, CatchingUp: pr.CatchingUp}
	s.mu.Lock()
	if s.rebuild != nil {
		r := *s.rebuild
		st.Rebuild = &r
	}
	s.mu.Unlock()
	return st
}

// startRebuild starts a rebuild unless one is running, and returns its
// status.
func (s *server) startRebuild() RebuildStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rebuild != nil && s.rebuild.Running {
		r := *s.rebuild
		r.AlreadyRunning = true
		return r
	}
	s.rebuild = &RebuildStatus{ID: nuid.Next(), Running: true, StartedAt: time.Now().UnixMilli()}
	r := *s.rebuild
	s.wg.Add(1)
	go s.runRebuild(r.ID)
	return r
}

func (s *server) runRebuild(id string) {
	defer s.wg.Done()
	s.cfg.log.Info("rebuild started", "id", id)
	err := s.p.Rebuild(s.ctx, func(pr projection.RebuildProgress) {
		s.mu.Lock()
		s.rebuild.Applied, s.rebuild.Target, s.rebuild.Records = pr.Applied, pr.Target, pr.Records
		s.rebuild.Swapped = s.rebuild.Swapped || pr.Swapped
		s.mu.Unlock()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rebuild.Running = false
	s.rebuild.FinishedAt = time.Now().UnixMilli()
	if err != nil {
		s.rebuild.Error = err.Error()
		s.cfg.log.Error("rebuild failed", "id", id, "err", err)
		return
	}
	s.rebuild.Swapped = true
	s.cfg.log.Info("rebuild swapped in", "id", id, "records", s.rebuild.Records, "epoch", s.p.Epoch())
}

// NativeHarness is the Harnesses key of the sessions no harness file was
// converted into (their header names no harness).
const NativeHarness = "native"

// harnessKey is the Harnesses key of a header's harness.
func harnessKey(h string) string {
	if h == "" {
		return NativeHarness
	}
	return h
}

// stats counts what one snapshot holds and compares its generation with
// the stream's tail.
func (s *server) stats(ctx context.Context) (any, error) {
	var st Stats
	err := s.p.View(ctx, 0, func(snap projection.Snapshot) error {
		st.Generation, st.Epoch = snap.Generation(), snap.Epoch()
		st.LiveSessions = int64(len(snap.LiveSet()))
		st.Harnesses = map[string]int64{}
		err := snap.SessionsByCreated(nil, func(info dshq.SessionInfo) bool {
			st.Sessions++
			st.Harnesses[harnessKey(info.Header.Header.Harness)]++
			st.Events += info.EventCount
			if !info.Valid() {
				st.InvalidSessions++
			}
			return true
		})
		if err != nil {
			return err
		}
		if err := snap.Quarantined(0, func(projection.QuarantineRecord) bool { st.Quarantined++; return true }); err != nil {
			return err
		}
		is, err := snap.Index().Stats()
		if err != nil {
			return fmt.Errorf("index stats: %w", err)
		}
		st.IndexDocs, st.IndexBytes = is.Docs, is.DiskBytes
		return nil
	})
	if err != nil {
		return nil, err
	}
	stream, err := s.js.Stream(ctx, s.cfg.stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", s.cfg.stream, err)
	}
	info := stream.CachedInfo()
	st.StreamLastSeq, st.StreamRecords = info.State.LastSeq, info.State.Msgs
	if st.StreamLastSeq > st.Generation {
		st.Lag = st.StreamLastSeq - st.Generation
	}
	st.CatchingUp = s.p.Progress().CatchingUp && st.Lag > 0
	if part := s.p.Partition(); part.Shards > 1 {
		st.Shard, st.Shards = part.Shard, part.Shards
	}
	return st, nil
}

// Client is a typed client of dsh-admin.
type Client struct {
	nc *nats.Conn
}

// NewClient returns a Client over nc.
func NewClient(nc *nats.Conn) *Client { return &Client{nc: nc} }

// Status calls status.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	var out Status
	return &out, c.call(ctx, EndpointStatus, &out)
}

// Stats calls stats.
//
// On a partitioned projection (the answering projector's reply names its
// Shards) it asks every shard on its own subject and returns the sum
// (mergeStats); a shard that does not answer fails the call
// (SESSION_QUERY_INDEX_FAILED naming the shard): a part is never the whole.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	var out Stats
	if err := c.call(ctx, EndpointStats, &out); err != nil || out.Shards < 2 {
		return &out, err
	}
	if out.Shards > dshq.MaxShards {
		return nil, fmt.Errorf("%s stats: %d shards: at most %d", dshq.AdminService, out.Shards, dshq.MaxShards)
	}
	parts := make([]Stats, out.Shards)
	errs := make([]error, out.Shards)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := dshq.ShardToken(i, out.Shards)
			err := c.request(ctx, shardStatsSubject(tok), &parts[i])
			if errors.Is(err, nats.ErrNoResponders) {
				err = &dshq.Error{Code: dshq.CodeIndexFailed, Err: err, Message: "no projector serves shard " + tok + " of the partitioned projection"}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m := mergeStats(parts)
	return &m, nil
}

// Rebuild calls rebuild: it starts a rebuild, or reports the running one
// (AlreadyRunning).
func (c *Client) Rebuild(ctx context.Context) (*RebuildStatus, error) {
	var out RebuildStatus
	return &out, c.call(ctx, EndpointRebuild, &out)
}

// call sends {} to endpoint and decodes the reply into out. A service error
// is a *dshq.Error with the reply's code; no responder is a *dshq.Error of
// code SESSION_QUERY_INDEX_FAILED saying that no projector serves dsh-admin.
func (c *Client) call(ctx context.Context, endpoint string, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 35*time.Second)
		defer cancel()
	}
	err := c.request(ctx, dshq.AdminSubjectPrefix+"."+endpoint, out)
	if errors.Is(err, nats.ErrNoResponders) {
		return &dshq.Error{Code: dshq.CodeIndexFailed, Message: "no projector serves " + dshq.AdminService + " (is dshq serve or the projector running?)", Err: err}
	}
	return err
}

// request sends {} to subject and decodes the reply into out; no
// responder is nats.ErrNoResponders, wrapped.
func (c *Client) request(ctx context.Context, subject string, out any) error {
	msg, err := c.nc.RequestWithContext(ctx, subject, []byte("{}"))
	if err != nil {
		return fmt.Errorf("%s %s: %w", dshq.AdminService, subject, err)
	}
	if err := microhost.DecodeError(msg); err != nil {
		return err
	}
	if err := json.Unmarshal(msg.Data, out); err != nil {
		return fmt.Errorf("%s %s: decode reply: %w", dshq.AdminService, subject, err)
	}
	return nil
}
