// Package node runs dshq's parts in one process: the NATS connection
// (embedded server or an existing deployment), stream provisioning, the
// projector with its query shard, the live feed of its commits (DSH_FEED), the
// admin service (dsh-admin: status, stats, rebuild), the query service, the
// tools service and the metrics endpoint. `dshq serve` runs all of them;
// cmd/projector and cmd/query run a subset against --nats-url. There is one
// code path: the all-in-one process talks to its parts over an in-process
// NATS connection exactly as separate processes do over the network.
//
// A connection the server closes for good (nats.go reconnects by itself
// after network failures, not after a protocol error) ends the parts that
// ran on it; the node then connects again and restarts them, so a process
// never stays alive serving nothing (see Node.Run).
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/lifecycle"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/projection"
)

// Parts selects what a node runs.
type Parts struct {
	Projector bool // the projector and its query shard
	Query     bool // the dsh-query front service
	Tools     bool // the dsh-tools service
}

// All is every part: what `dshq serve` runs.
var All = Parts{Projector: true, Query: true, Tools: true}

// Config configures a Node.
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
	// MetricsAlso are metrics of the process's parts outside the node (the
	// web UI of dshq serve), served on /metrics with the node's (nil = none).
	MetricsAlso prometheus.Gatherer
	// Parts selects the parts to run.
	Parts Parts
	// Stream configures the session stream and lease bucket.
	Stream bus.StreamConfig
	// Feed sizes the live feed stream.
	Feed FeedConfig
	// Projection configures the projector part.
	Projection ProjectionConfig
	// QueryShard is the projection shard the query part asks
	// ("" = query.DefaultShard).
	QueryShard string
	// Logger receives structured logs (nil = slog.Default()).
	Logger *slog.Logger

	// feedFault, when set, runs before each commit's feed publication
	// (feedcommit.WithFault; tests).
	feedFault func(gen uint64) error
	// configureServer, when set, adjusts the embedded server's options
	// (tests: a small JetStream store).
	configureServer func(*serverOptions)
	// onConnect, when set, receives each connection the node makes
	// (tests: make the server close it).
	onConnect func(*nats.Conn)
}

// FeedConfig sizes the live feed stream (DSH_FEED). A limit left at 0 is
// the default when the stream is created and, for an existing stream,
// whatever it has; a limit set here is applied to an existing stream that
// differs.
type FeedConfig struct {
	// Off publishes nothing to the feed: a further replica of the
	// projection (one projector publishes the feed; each replica would
	// publish its own commits).
	Off bool
	// MaxBytes bounds the stream's size, oldest messages first (0 =
	// feed.DefaultMaxBytes, or a quarter of the storage JetStream can
	// still reserve when that is less; negative = no limit).
	MaxBytes int64
	// MaxAge bounds how long a message is kept (0 = feed.DefaultMaxAge;
	// negative = no limit).
	MaxAge time.Duration
	// Duplicates is the duplicate window (0 = feed.DefaultDuplicates).
	Duplicates time.Duration
}

// ProjectionConfig configures the projector part; zero values are the
// projection package's defaults.
type ProjectionConfig struct {
	// Dir is the projection's data directory ("" = Home/projection).
	Dir string
	// Durable is the durable consumer's name (projection.DefaultDurable).
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
	// CursorMaxBytes bounds the memory of the search cursor bucket
	// DSH_CURSORS (0 = query.DefaultCursorMaxBytes; negative = no bound).
	CursorMaxBytes int64
	// Shard and Shards partition the projection (docs/cluster.md,
	// "Partitioned projectors"): this projector projects and serves shard
	// Shard of Shards (0 of 0 or 1 = the whole stream, shard "0"). A
	// partitioned projector publishes no feed and runs no query part in
	// its process (Check).
	Shard, Shards int
}

// Partitioned reports whether c is one shard of a partitioned projection.
func (c ProjectionConfig) Partitioned() bool { return c.Shards > 1 }

// durable is the durable consumer's name: Durable, else
// dshq.ShardDurable of the partition.
func (c ProjectionConfig) durable() string {
	if c.Durable != "" {
		return c.Durable
	}
	if c.Partitioned() {
		return dshq.ShardDurable(c.Shard, c.Shards)
	}
	return dshq.ProjectorDurable
}

// options returns the projection options of c.
func (c ProjectionConfig) options() ([]projection.Option, error) {
	opts := []projection.Option{projection.WithDurable(c.durable())}
	if c.Partitioned() || c.Shard != 0 {
		if c.Shards < 2 || c.Shards > dshq.MaxShards || c.Shard < 0 || c.Shard >= c.Shards {
			return nil, fmt.Errorf("projection: shard %d of %d: want 0 <= shard < shards, 2 <= shards <= %d", c.Shard, c.Shards, dshq.MaxShards)
		}
		opts = append(opts, projection.WithPartition(c.Shard, c.Shards))
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

// Node is one process's assembly of the parts. It owns what lives as long
// as the process (the embedded server, the metrics endpoint, the logger)
// and, through a life, what lives as long as one NATS connection (the
// connection, the metrics registry, the parts and their stop stack).
type Node struct {
	cfg      Config
	log      *slog.Logger
	shutdown stopStack        // what Run started for the process, stopped in reverse
	emb      *embedded.Server // nil with Conn.URL
	metrics  *metricsEndpoint // nil without Config.Metrics
	info     Info
	// lastWait is the wait before the last restart (0 before the first).
	lastWait time.Duration
}

// checkPartition refuses what a partitioned projector cannot do in its
// process: publish the live feed (each shard would publish only its own
// sessions' commits, and the feed's generations would not rise along it)
// and answer the query API (a shard holds only its own sessions: the
// query service of a partitioned deployment is the query command, run
// with --shards).
func (c Config) checkPartition() error {
	if !c.Parts.Projector || !c.Projection.Partitioned() {
		return nil
	}
	switch {
	case !c.Feed.Off:
		return fmt.Errorf("shard %d of %d: a partitioned projector does not publish the live feed (run it with --no-feed; an unpartitioned projector may publish it)",
			c.Projection.Shard, c.Projection.Shards)
	case c.Parts.Query || c.Parts.Tools:
		return fmt.Errorf("shard %d of %d: a partitioned projector serves no query service or tools in its process (run the query command with --shards %d)",
			c.Projection.Shard, c.Projection.Shards, c.Projection.Shards)
	}
	return nil
}

// New returns a Node for cfg; Run starts it.
func New(cfg Config) *Node {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Node{cfg: cfg, log: log}
}

// Run starts the configured parts of cfg (New(cfg).Run).
func Run(ctx context.Context, cfg Config, ready func(Info)) error {
	return New(cfg).Run(ctx, ready)
}

// Run starts the configured parts, calls ready once they all serve, and runs
// until ctx is done; then it stops every part in reverse order and returns.
// A part that fails stops the node and its error is returned. When the
// server closes the node's connection for good, the parts on it stop, the
// node connects again (lifecycle.Reconnect: backing off from
// lifecycle.FirstWait to lifecycle.MaxWait) and starts them again; if the
// server refuses its credentials, or it cannot connect within
// lifecycle.ReconnectFor, Run returns that error, so that the
// process exits non-zero for a supervisor to restart it.
func (n *Node) Run(ctx context.Context, ready func(Info)) (err error) {
	defer func() { err = errors.Join(err, n.shutdown.stop()) }()
	if err := n.cfg.checkPartition(); err != nil {
		return err
	}
	if err := n.startServer(ctx); err != nil {
		return err
	}
	if err := n.serveMetrics(); err != nil {
		return err
	}
	l, err := n.start(ctx, true)
	if err != nil {
		return err
	}
	n.info.Generation = l.generation()
	if ready != nil {
		ready(n.info)
	}
	for {
		began := time.Now()
		err := l.wait(ctx)
		if !errors.Is(err, natsconn.ErrConnectionClosed) || ctx.Err() != nil {
			return err
		}
		if l, err = n.restart(ctx, err, time.Since(began)); l == nil {
			return err // nil when ctx ended
		}
	}
}

// stableLife is how long a life must have lasted for the next restart to
// wait lifecycle.FirstWait again rather than twice the last wait.
const stableLife = time.Minute

// restart starts a new life after the last one lost its connection
// (cause), backing off while connecting fails or the connection keeps
// closing (lifecycle.Reconnect). It returns nil and no error when ctx ends.
func (n *Node) restart(ctx context.Context, cause error, lived time.Duration) (*life, error) {
	first := lifecycle.FirstWait
	if lived < stableLife && n.lastWait > 0 {
		first = min(2*n.lastWait, lifecycle.MaxWait)
	}
	l, wait, err := lifecycle.Reconnect(ctx, first, cause, func(cause error, wait time.Duration) {
		n.log.Error("nats connection closed by the server; connecting again", "err", cause, "in", wait)
	}, func() (*life, error) {
		l, err := n.start(ctx, false)
		if err == nil {
			n.log.Info("dshq reconnected", "nats", n.info.ClientURL, "generation", l.generation())
		}
		return l, err
	}, func(err error) bool {
		var de *dialError
		return errors.Is(err, natsconn.ErrConnectionClosed) || (errors.As(err, &de) && !natsconn.IsAuthError(err))
	})
	n.lastWait = wait
	return l, err
}

// feedDrain bounds how long a stopping node lets the feed's publisher finish
// the publication in progress; what it leaves, the next start publishes.
const feedDrain = 5 * time.Second
