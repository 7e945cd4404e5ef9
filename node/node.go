// Package node runs dshq's parts in one process: the NATS connection
// (embedded server or an existing deployment), stream provisioning, the
// projector with its query shard, the live feed of its commits (DSH_FEED), the
// admin service (dsh-admin: status, stats, rebuild), the query service, the
// tools service and the metrics endpoint. `dshq serve` runs all of them;
// cmd/projector runs the projector part against --nats-url (cmd/query serves
// dsh-query without node, so that it links no store). There is one code
// path: the all-in-one process talks to its parts over an in-process NATS
// connection exactly as separate processes do over the network.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/internal/metricsrv"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// Parts selects what a node runs.
type Parts struct {
	Projector bool // the projector and its query shard
	Query     bool // the dsh-query front service
	Tools     bool // the dsh-tools service
}

// All is every part: what `dshq serve` runs.
var All = Parts{Projector: true, Query: true, Tools: true}

// Config configures Run.
type Config struct {
	// Home is the data directory ($DSH_HOME); the embedded server keeps its
	// JetStream store under Home/nats and the projector under Home/projection.
	Home string
	// Conn says how to reach NATS. With Conn.URL empty an embedded server is
	// started under Home.
	Conn natsconn.Options
	// Listen is the embedded server's client address ("" = DefaultListen).
	Listen string
	// RelaxedSync relaxes the embedded server's sync_interval=always.
	RelaxedSync bool
	// Metrics is the HTTP address of /metrics ("" = none).
	Metrics string
	// Parts selects the parts to run.
	Parts Parts
	// Stream configures the session stream and lease bucket.
	Stream bus.StreamConfig
	// Projection configures the projector part.
	Projection ProjectionConfig
	// QueryShard is the projection shard the query part asks
	// ("" = dshq.DefaultShard).
	QueryShard string
	// Logger receives structured logs (nil = slog.Default()).
	Logger *slog.Logger

	// feedFault, when set, runs before each commit's feed publication; an
	// error stops the node with it before that commit is published (tests:
	// a crash between the bbolt commit and the feed publication).
	feedFault func(gen uint64) error
}

// ProjectionConfig configures the projector part; zero values are the
// projection package's defaults.
type ProjectionConfig struct {
	// Dir is the projection's data directory ("" = Home/projection).
	Dir string
	// Durable is the durable consumer's name (dshq.ProjectorDurable).
	Durable string
	// BatchSize bounds the records applied per transaction
	// (projection.DefaultBatchSize).
	BatchSize int
	// FoldCacheBytes is the fold-state cache budget
	// (projection.DefaultFoldCacheBytes); negative is refused.
	FoldCacheBytes int64
	// SkipVerify skips bbolt's full consistency check of the store on open.
	SkipVerify bool
	// RebuildOnStart rebuilds the projection from the stream beside the
	// serving one once the node is up, then swaps it in; a failed rebuild
	// stops the node.
	RebuildOnStart bool
	// NoShard does not serve the projection's query shard.
	NoShard bool
}

// options returns the projection options of c.
func (c ProjectionConfig) options() ([]projection.Option, error) {
	var opts []projection.Option
	if c.Durable != "" {
		opts = append(opts, projection.WithDurable(c.Durable))
	}
	switch {
	case c.BatchSize < 0:
		return nil, fmt.Errorf("projection: batch size %d is negative", c.BatchSize)
	case c.BatchSize > 0:
		opts = append(opts, projection.WithBatchSize(c.BatchSize))
	}
	switch {
	case c.FoldCacheBytes < 0:
		return nil, fmt.Errorf("projection: fold cache bytes %d is negative", c.FoldCacheBytes)
	case c.FoldCacheBytes > 0:
		opts = append(opts, projection.WithFoldCacheBytes(c.FoldCacheBytes))
	}
	if c.SkipVerify {
		opts = append(opts, projection.WithVerifyOnOpen(false))
	}
	return opts, nil
}

// DefaultListen is the embedded server's default client address: loopback only.
const DefaultListen = "127.0.0.1:4222"

// Info describes a node that is ready.
type Info struct {
	// ClientURL is the NATS URL clients use (the embedded server's, or the
	// configured one).
	ClientURL string
	// MetricsURL is the metrics endpoint, "" when disabled.
	MetricsURL string
	// Embedded is true when this node runs its own NATS server.
	Embedded bool
	// Generation is the projection generation at start (0 without a projector).
	Generation uint64
}

// Run starts the configured parts, calls ready once they all serve, and runs
// until ctx is done; then it stops every part in reverse order and returns.
// A part that fails stops the node and its error is returned.
func Run(ctx context.Context, cfg Config, ready func(Info)) (err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	var stack stopStack
	defer func() { err = errors.Join(err, stack.stop()) }()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	nc, info, err := connect(ctx, cfg, &stack)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if cfg.Parts.Projector {
		// Only the projector needs the log; a query or tools node runs with
		// credentials that may not manage streams.
		if _, err := bus.EnsureStream(ctx, js, cfg.Stream); err != nil {
			return err
		}
		if _, err := bus.EnsureLeaseBucket(ctx, js, cfg.Stream); err != nil {
			return err
		}
	}

	reg := metricsrv.NewRegistry()

	var wg sync.WaitGroup
	stack.push(func() error { wg.Wait(); return nil })
	var shard query.Shard // the query shard this process serves, if any
	if cfg.Parts.Projector {
		var gen uint64
		gen, shard, err = startProjector(ctx, cancel, cfg, js, nc, reg, log, &stack, &wg)
		if err != nil {
			return err
		}
		info.Generation = gen
	}
	if cfg.Parts.Query {
		qopts := []query.ServiceOption{query.WithLogger(log), query.WithRegisterer(reg)}
		if cfg.QueryShard != "" {
			qopts = append(qopts, query.WithShard(cfg.QueryShard))
		}
		if shard != nil && (cfg.QueryShard == "" || cfg.QueryShard == dshq.DefaultShard) {
			// The shard is in this process: no second hop.
			qopts = append(qopts, query.WithLocalShard(shard))
		}
		stop, err := query.Serve(ctx, nc, qopts...)
		if err != nil {
			return fmt.Errorf("start query service: %w", err)
		}
		stack.push(stop)
	}
	if cfg.Parts.Tools {
		t, err := tools.New(tools.FromQueryClient(query.NewClient(nc)), tools.WithLogger(log))
		if err != nil {
			return fmt.Errorf("tools: %w", err)
		}
		stop, err := toolservice.Serve(ctx, nc, t, toolservice.WithLogger(log), toolservice.WithRegisterer(reg))
		if err != nil {
			return fmt.Errorf("start tools service: %w", err)
		}
		stack.push(stop)
	}
	if cfg.Metrics != "" {
		url, stop, err := metricsrv.Serve(cfg.Metrics, reg, log)
		if err != nil {
			return err
		}
		stack.push(stop)
		info.MetricsURL = url
	}
	if ready != nil {
		ready(info)
	}
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// startProjector opens the projector under Home/projection (or
// Projection.Dir), republishes what the live feed lacks up to its checkpoint,
// runs it in a goroutine owned by wg (a failure cancels the node), publishes
// its commits to the live feed, and serves its query shard (returned; nil
// without one) and the admin service.
func startProjector(ctx context.Context, cancel context.CancelCauseFunc, cfg Config, js jetstream.JetStream, nc *nats.Conn, reg prometheus.Registerer, log *slog.Logger, stack *stopStack, wg *sync.WaitGroup) (gen uint64, shard query.Shard, err error) {
	if _, err := feed.EnsureStream(ctx, js, feed.StreamConfig{}); err != nil {
		return 0, nil, fmt.Errorf("feed stream: %w", err)
	}
	popts, err := cfg.Projection.options()
	if err != nil {
		return 0, nil, err
	}
	fp := &feedPublisher{pub: feed.NewPublisher(js), log: log, fault: cfg.feedFault, stop: cancel, queue: make(chan projection.Commit)}
	quitFeed, feedDone := make(chan struct{}), make(chan struct{})
	var p *projection.Projector // set before the publisher and the loop start
	opts := append([]projection.Option{projection.WithLogger(log), projection.WithRegisterer(reg), projection.WithOnCommit(fp.hook(quitFeed, feedDone))}, popts...)
	stream := dshq.SessionStream
	if cfg.Stream.Name != "" {
		stream = cfg.Stream.Name
		opts = append(opts, projection.WithStream(cfg.Stream.Name))
	}
	if cfg.Stream.LeaseBucket != "" {
		opts = append(opts, projection.WithLeaseBucket(cfg.Stream.LeaseBucket))
	}
	dir := cfg.Projection.Dir
	if dir == "" {
		dir = filepath.Join(cfg.Home, "projection")
	}
	p, err = projection.Open(ctx, js, dir, opts...)
	if err != nil {
		return 0, nil, fmt.Errorf("open projector: %w", err)
	}
	stack.push(p.Close)
	if err := fp.catchUp(ctx, p); err != nil {
		return 0, nil, err
	}
	// The feed's publisher runs beside the projector's loop: it stops after
	// the loop (the stack stops in reverse), finishing the publication in
	// progress within feedDrain.
	feedCtx, stopFeed := context.WithCancel(ctx)
	stack.push(func() error {
		close(quitFeed)
		t := time.AfterFunc(feedDrain, stopFeed)
		defer t.Stop()
		<-feedDone
		stopFeed()
		return nil
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(feedDone)
		fp.run(feedCtx, quitFeed, func() *projection.Projector { return p })
	}()
	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan struct{})
	stack.push(func() error { stopRun(); <-done; return nil })
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		if err := p.Run(runCtx); err != nil && runCtx.Err() == nil {
			cancel(fmt.Errorf("projector: %w", err))
		}
	}()
	if !cfg.Projection.NoShard {
		cursors, err := engine.NewKVCursorStore(ctx, js)
		if err != nil {
			return 0, nil, fmt.Errorf("cursor store: %w", err)
		}
		eng := engine.New(engine.FromProjector(p), engine.WithSearcher(engine.FromIndexFunc(p.Index)), engine.WithCursorStore(cursors))
		stop, err := engine.ServeShard(ctx, nc, dshq.DefaultShard, eng, query.WithLogger(log))
		if err != nil {
			return 0, nil, fmt.Errorf("start query shard: %w", err)
		}
		stack.push(stop)
		shard = eng
	}
	stopAdmin, err := admin.Serve(ctx, nc, p, admin.WithStream(stream), admin.WithLogger(log))
	if err != nil {
		return 0, nil, fmt.Errorf("start admin service: %w", err)
	}
	stack.push(stopAdmin)
	if cfg.Projection.RebuildOnStart {
		startRebuild(runCtx, cancel, p, log, stack, wg)
	}
	return p.Generation(), shard, nil
}

// feedDrain bounds how long a stopping node lets the feed's publisher finish
// the publication in progress; what it leaves, the next start publishes.
const feedDrain = 5 * time.Second

// startRebuild rebuilds p beside the serving projection in a goroutine
// owned by wg; a failure stops the node.
func startRebuild(ctx context.Context, cancel context.CancelCauseFunc, p *projection.Projector, log *slog.Logger, stack *stopStack, wg *sync.WaitGroup) {
	done := make(chan struct{})
	stack.push(func() error { <-done; return nil })
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		err := p.Rebuild(ctx, func(pr projection.RebuildProgress) {
			log.Info("rebuild progress", "applied", pr.Applied, "target", pr.Target, "records", pr.Records, "swapped", pr.Swapped)
		})
		if err != nil && ctx.Err() == nil {
			cancel(fmt.Errorf("rebuild: %w", err))
		}
	}()
}

// stopStack runs stop functions in reverse order of registration.
type stopStack struct {
	fns []func() error
}

func (s *stopStack) push(fn func() error) { s.fns = append(s.fns, fn) }

func (s *stopStack) stop() error {
	var errs []error
	for i := len(s.fns) - 1; i >= 0; i-- {
		if err := s.fns[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.fns = nil
	return errors.Join(errs...)
}
