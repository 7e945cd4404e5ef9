package node

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/dshq/dshq/feed/feedcommit"
	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/internal/lifecycle"
	"github.com/dshq/dshq/internal/metricsrv"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
	"github.com/dshq/dshq/shards"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// life is one connection of a node and the parts running on it: it ends
// when the node stops, a part fails, or the server closes the connection
// for good.
type life struct {
	*Node
	// ctx is canceled, with the cause, when the life must end: the node
	// stops, a part fails, or the connection closes (WatchConnection).
	ctx    context.Context
	cancel context.CancelCauseFunc
	nc     *nats.Conn
	js     jetstream.JetStream
	reg    *prometheus.Registry
	stack  stopStack      // the life's parts, stopped in reverse
	wg     sync.WaitGroup // the life's goroutines
	proj   *projection.Projector
	feeder *feedcommit.Feeder
	shard  query.Engine // the query shard this process serves, if any
}

// start connects and starts the configured parts; first is false on a
// restart after a lost connection (the rebuild on start is not repeated).
// A failure stops what was started.
func (n *Node) start(ctx context.Context, first bool) (_ *life, err error) {
	l := &life{Node: n, reg: metricsrv.NewRegistry()}
	l.ctx, l.cancel = context.WithCancelCause(ctx)
	defer func() {
		if err != nil {
			err = errors.Join(l.ended(err), l.stop())
		}
	}()
	if err := l.connect(); err != nil {
		return nil, err
	}
	steps := []func() error{l.provision}
	if n.cfg.Parts.Projector {
		steps = append(steps, l.openProjector, l.startFeed, l.runProjector, l.startShard, l.startAdmin)
		if first && n.cfg.Projection.RebuildOnStart {
			steps = append(steps, l.startRebuild)
		}
	}
	if n.cfg.Parts.Query {
		steps = append(steps, l.startQuery)
	}
	if n.cfg.Parts.Tools {
		steps = append(steps, l.startTools)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	if n.metrics != nil {
		n.metrics.reg.Store(l.reg)
	}
	return l, nil
}

// wait runs until the life ends, stops its parts and returns why it ended:
// nil when ctx ended, an error wrapping natsconn.ErrConnectionClosed when the
// server closed the connection, else the failure.
func (l *life) wait(ctx context.Context) error {
	<-l.ctx.Done()
	err := l.ended(context.Cause(l.ctx))
	if ctx.Err() != nil {
		err = nil
	}
	return errors.Join(err, l.stop())
}

// ended classifies why the life ended: a failure on a connection that the
// server closed is the closed connection.
func (l *life) ended(cause error) error {
	if errors.Is(cause, context.Canceled) && !errors.Is(cause, natsconn.ErrConnectionClosed) {
		cause = nil
	}
	if l.nc != nil && l.nc.IsClosed() && !errors.Is(cause, natsconn.ErrConnectionClosed) {
		if cause == nil {
			return natsconn.ClosedError(l.nc)
		}
		return fmt.Errorf("%w (%v)", natsconn.ClosedError(l.nc), cause)
	}
	return cause
}

// stop stops the life's parts in reverse order and waits for its
// goroutines.
func (l *life) stop() error {
	l.cancel(context.Canceled)
	err := l.stack.stop()
	l.wg.Wait()
	return err
}

// goRun runs fn in a goroutine the life waits for.
func (l *life) goRun(fn func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn()
	}()
}

// generation is the projection's generation (0 without a projector).
func (l *life) generation() uint64 {
	if l.proj == nil {
		return 0
	}
	return l.proj.Generation()
}

// connect makes the life's connection; its closing for good ends the life.
func (l *life) connect() error {
	nc, err := l.dial()
	if err != nil {
		return err
	}
	l.nc = nc
	nc.SetErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		subject := ""
		if sub != nil {
			subject = sub.Subject
		}
		l.log.Warn("nats: asynchronous error", "subject", subject, "err", err)
	})
	l.stack.push(func() error { return natsconn.Drain(nc) })
	watched, stopWatch := natsconn.WatchConnection(l.ctx, nc)
	l.stack.push(func() error { stopWatch(); return nil }) // before the drain closes it
	l.ctx = watched
	if l.js, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if l.cfg.onConnect != nil {
		l.cfg.onConnect(nc)
	}
	return nil
}

// provision creates or checks the streams the projector needs. Only the
// projector provisions: a query or tools node runs with credentials that
// may not manage streams.
func (l *life) provision() error {
	if !l.cfg.Parts.Projector {
		return nil
	}
	if err := l.retryTransient("ensure the session stream", func() error {
		_, err := bus.EnsureStream(l.ctx, l.js, l.cfg.Stream)
		return err
	}); err != nil {
		return err
	}
	if err := l.retryTransient("ensure the lease bucket", func() error {
		_, err := bus.EnsureLeaseBucket(l.ctx, l.js, l.cfg.Stream)
		return err
	}); err != nil {
		return err
	}
	f := l.cfg.Feed
	// The feed is replicated like the session stream: a copy on one server
	// would stall the projector while that server is down.
	cfg := feed.StreamConfig{MaxBytes: f.MaxBytes, MaxAge: f.MaxAge, Duplicates: f.Duplicates, Replicas: l.cfg.Stream.Replicas, Adopt: true}
	if f.MaxBytes == 0 {
		cfg.Budget = l.storageBudget(l.ctx, l.js)
	}
	var st jetstream.Stream
	if err := l.retryTransient("ensure the feed stream", func() error {
		var err error
		st, err = feed.EnsureStream(l.ctx, l.js, cfg)
		return err
	}); err != nil {
		return err
	}
	if l.emb != nil {
		// The embedded server supports the feed's asynchronous persist
		// mode; a feed created before it synced every write, which made
		// each commit's publication wait for one sync per message.
		replaced, err := feed.ReplaceSyncedStream(l.ctx, l.js, cfg)
		if err != nil {
			return err
		}
		if replaced {
			l.log.Warn("feed stream replaced by one that persists asynchronously (its history is dropped; subscribers resuming into it resynchronise)", "stream", st.CachedInfo().Config.Name)
			if st, err = feed.EnsureStream(l.ctx, l.js, cfg); err != nil {
				return err
			}
		}
	}
	c := st.CachedInfo().Config
	l.log.Debug("feed stream", "stream", c.Name, "maxBytes", c.MaxBytes, "maxAge", c.MaxAge, "duplicates", c.Duplicates)
	return nil
}

// provisionRetryFor bounds how long a start retries a stream or bucket
// that the cluster is slow to create: a JetStream cluster that has just
// formed, or a leader election, answers an API request late or not at all.
const provisionRetryFor = 30 * time.Second

// clusterNoPeers is JetStream's error code for a stream or bucket it cannot
// place: too few servers seen. A cluster that has just formed answers so
// until its servers have met (seen in the three-server failover test: the
// cursor bucket refused with "peer offline" while the session stream was
// already placed).
const clusterNoPeers jetstream.ErrorCode = 10005

// provisionTransient reports whether a start step's error may pass: a
// transient failure (failover.Transient) or a cluster still forming.
func provisionTransient(err error) bool {
	var apiErr *jetstream.APIError
	return failover.Transient(err) || errors.As(err, &apiErr) && apiErr.ErrorCode == clusterNoPeers
}

// retryTransient runs fn until it succeeds, fails other than transiently
// (provisionTransient), provisionRetryFor passes or the life ends.
func (l *life) retryTransient(what string, fn func() error) error {
	deadline := time.Now().Add(provisionRetryFor)
	wait := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil || !provisionTransient(err) || time.Now().After(deadline) || l.ctx.Err() != nil {
			return err
		}
		l.log.Warn("retrying", "what", what, "err", err, "in", wait)
		if lifecycle.Sleep(l.ctx, wait) != nil {
			return err
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// openProjector opens the projection under Home/projection (or
// Projection.Dir), its commits going to the feed's hook.
func (l *life) openProjector() error {
	popts, err := l.cfg.Projection.options()
	if err != nil {
		return err
	}
	fopts := []feedcommit.FeederOption{feedcommit.WithFeederLogger(l.log)}
	if l.cfg.feedFault != nil {
		fopts = append(fopts, feedcommit.WithFault(l.cfg.feedFault))
	}
	opts := append([]projection.Option{projection.WithLogger(l.log), projection.WithRegisterer(l.reg)}, popts...)
	if !l.cfg.Feed.Off {
		l.feeder = feedcommit.NewFeeder(feed.NewPublisher(l.js), fopts...)
		opts = append(opts, projection.WithOnCommit(l.feeder.Hook))
	}
	if l.cfg.Stream.Name != "" {
		opts = append(opts, projection.WithStream(l.cfg.Stream.Name))
	}
	if l.cfg.Stream.LeaseBucket != "" {
		opts = append(opts, projection.WithLeaseBucket(l.cfg.Stream.LeaseBucket))
	}
	dir := l.cfg.Projection.Dir
	if dir == "" {
		dir = filepath.Join(l.cfg.Home, "projection")
	}
	p, err := projection.Open(l.ctx, l.js, dir, opts...)
	if err != nil {
		return fmt.Errorf("open projector: %w", err)
	}
	l.proj = p
	l.stack.push(p.Close)
	return nil
}

// startFeed publishes what the feed lacks, then runs the feeder beside the
// projector's loop. It stops after the loop (the stack stops in reverse),
// finishing the publication in progress within feedDrain.
func (l *life) startFeed() error {
	if l.feeder == nil {
		return nil // Feed.Off
	}
	if err := l.feeder.CatchUp(l.ctx, l.proj); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(l.ctx)
	done := make(chan struct{})
	l.stack.push(func() error {
		l.feeder.Stop()
		t := time.AfterFunc(feedDrain, stop)
		defer t.Stop()
		<-done
		stop()
		return nil
	})
	l.goRun(func() {
		defer close(done)
		if err := l.feeder.Run(ctx); err != nil {
			l.cancel(fmt.Errorf("feed: %w", err))
		}
	})
	return nil
}

// runProjector runs the projector's loop; a failure ends the life.
func (l *life) runProjector() error {
	ctx, stop := context.WithCancel(l.ctx)
	done := make(chan struct{})
	l.stack.push(func() error { stop(); <-done; return nil })
	l.goRun(func() {
		defer close(done)
		if err := l.proj.Run(ctx); err != nil && ctx.Err() == nil {
			l.cancel(fmt.Errorf("projector: %w", err))
		}
	})
	return nil
}

// startShard serves the projection's query shard (dsh.proj.<shard>.v1),
// its search cursors in the DSH_CURSORS bucket, authenticated with the
// deployment's key in DSH_KEYS.
func (l *life) startShard() error {
	if l.cfg.Projection.NoShard {
		return nil
	}
	// The cursor bucket is replicated like the session stream: a copy on
	// one server would fail every later page of a search while it is down.
	var cursors *shards.KVCursorStore
	if err := l.retryTransient("ensure the cursor bucket", func() error {
		var err error
		cursors, err = shards.NewKVCursorStore(l.ctx, l.js, shards.WithCursorMaxBytes(l.cfg.Projection.CursorMaxBytes),
			shards.WithCursorReplicas(l.cfg.Stream.Replicas))
		return err
	}); err != nil {
		return fmt.Errorf("cursor store: %w", err)
	}
	var key wire.CursorKey
	if err := l.retryTransient("load the cursor key", func() error {
		var err error
		key, err = shards.LoadCursorKey(l.ctx, l.js, l.cfg.Stream.Replicas)
		return err
	}); err != nil {
		return fmt.Errorf("cursor key: %w", err)
	}
	eng := engine.New(shardhost.Local(l.proj), engine.WithCursorStore(cursors), engine.WithCursorKey(key))
	// Each projector is a replica of the shard, named by its durable
	// consumer: the query service sends a request to one that has reached
	// what it needs.
	replica := l.cfg.Projection.durable()
	part := l.proj.Partition()
	stop, err := shardhost.ServeReplica(l.ctx, l.nc, dshq.ShardToken(part.Shard, part.Count()), replica, eng, func() query.ReplicaStatus {
		pr := l.proj.Progress()
		st := query.ReplicaStatus{Lineage: l.proj.Lineage(), Generation: pr.Generation, CatchingUp: pr.CatchingUp}
		if part.Count() > 1 {
			st.Shards = part.Count()
		}
		return st
	}, query.WithLogger(l.log))
	if err != nil {
		return fmt.Errorf("start query shard: %w", err)
	}
	l.stack.push(stop)
	l.shard = eng
	return nil
}

// startAdmin serves dsh-admin (status, stats, rebuild).
func (l *life) startAdmin() error {
	stream := dshq.SessionStream
	if l.cfg.Stream.Name != "" {
		stream = l.cfg.Stream.Name
	}
	stop, err := admin.Serve(l.ctx, l.nc, l.proj, admin.WithStream(stream), admin.WithLogger(l.log))
	if err != nil {
		return fmt.Errorf("start admin service: %w", err)
	}
	l.stack.push(stop)
	return nil
}

// startRebuild rebuilds the projection beside the serving one; a failure
// ends the life.
func (l *life) startRebuild() error {
	done := make(chan struct{})
	l.stack.push(func() error { <-done; return nil })
	l.goRun(func() {
		defer close(done)
		err := l.proj.Rebuild(l.ctx, func(pr projection.RebuildProgress) {
			l.log.Info("rebuild progress", "applied", pr.Applied, "target", pr.Target, "records", pr.Records, "swapped", pr.Swapped)
		})
		if err != nil && l.ctx.Err() == nil {
			l.cancel(fmt.Errorf("rebuild: %w", err))
		}
	})
	return nil
}

// startQuery serves dsh-query; a shard in this process is called directly.
func (l *life) startQuery() error {
	qopts := []query.ServiceOption{query.WithLogger(l.log), query.WithRegisterer(l.reg)}
	if l.cfg.QueryShard != "" {
		qopts = append(qopts, query.WithShardToken(l.cfg.QueryShard))
	}
	if l.shard != nil && (l.cfg.QueryShard == "" || l.cfg.QueryShard == dshq.DefaultShard) {
		qopts = append(qopts, query.WithEngine(l.shard))
	}
	stop, err := query.Serve(l.ctx, l.nc, qopts...)
	if err != nil {
		return fmt.Errorf("start query service: %w", err)
	}
	l.stack.push(stop)
	return nil
}

// startTools serves dsh-tools, which asks the query service.
func (l *life) startTools() error {
	t, err := tools.New(tools.FromQueryClient(query.NewClient(l.nc)), tools.WithLogger(l.log))
	if err != nil {
		return fmt.Errorf("tools: %w", err)
	}
	// Its spill bucket is provisioned like the others: a cluster still
	// placing its peers is waited out.
	var stop func() error
	if err := l.retryTransient("ensure the spill bucket", func() error {
		var err error
		stop, err = toolservice.Serve(l.ctx, l.nc, t, toolservice.WithLogger(l.log), toolservice.WithRegisterer(l.reg),
			toolservice.WithSpillReplicas(l.cfg.Stream.Replicas))
		return err
	}); err != nil {
		return fmt.Errorf("start tools service: %w", err)
	}
	l.stack.push(stop)
	return nil
}
