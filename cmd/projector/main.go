// Command projector is the dshq projector daemon: it follows the session log
// stream (JetStream DSH_SESSIONS) and folds it into the projection under
// --data (bbolt + Bleve), serves that projection's query shard, publishes
// its commits to the live feed (DSH_FEED), serves the admin service
// (dsh-admin: status, stats, rebuild) and exposes Prometheus metrics. It is
// node.Run with the projector part: the same assembly as `dshq serve`. It
// runs until SIGINT or SIGTERM, then shuts down cleanly (the loop stops
// between batches; nothing committed is lost, and nothing uncommitted was
// acknowledged).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/internal/bytesize"
	"github.com/dshq/dshq/internal/daemonflags"
	"github.com/dshq/dshq/node"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/shards"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "projector:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	daemonflags.Flags
	data        string
	stream      string
	leaseBucket string
	durable     string
	rebuild     bool
	noQueries   bool
	noFeed      bool
	noVerify    bool
	batchSize   int
	cacheBytes  int64
	feedBytes   bytesize.Size
	feedAge     time.Duration
	cursorBytes bytesize.Size
	shard       int
	shards      int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("projector", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.Register(fs, "replicas of the session stream, the lease bucket, the feed and the cursor bucket (as `dshq serve --replicas`: an existing stream must have as many)")
	fs.StringVar(&o.data, "data", "", "projection data directory (required)")
	fs.StringVar(&o.stream, "stream", dshq.SessionStream, "session log stream")
	fs.StringVar(&o.leaseBucket, "lease-bucket", dshq.LeaseBucket, "write-lease key-value bucket")
	fs.BoolVar(&o.noFeed, "no-feed", false, "publish nothing to the live feed DSH_FEED: for a further replica of the projection (one projector publishes the feed)")
	fs.StringVar(&o.durable, "durable", "", "durable consumer name, one per projector (default dsh-projector; dsh-projector-<shard>of<shards> for a shard of a partitioned projection)")
	fs.IntVar(&o.shard, "shard", 0, "the shard of a partitioned projection this projector projects and serves, 0 to --shards - 1")
	fs.IntVar(&o.shards, "shards", 1, "the number of shards the projection is partitioned into (1 = not partitioned); a partitioned projector needs --no-feed, and the query service --shards as many (docs/cluster.md)")
	fs.BoolVar(&o.rebuild, "rebuild", false, "rebuild the projection from the stream beside the serving one, then swap it in")
	fs.BoolVar(&o.noQueries, "no-queries", false, "do not serve the query shard")
	fs.BoolVar(&o.noVerify, "no-verify", false, "skip bbolt's full consistency check of the store on start (it grows with the store)")
	fs.IntVar(&o.batchSize, "batch-size", projection.DefaultBatchSize, "records applied per transaction, at most")
	fs.Int64Var(&o.cacheBytes, "fold-cache-bytes", projection.DefaultFoldCacheBytes, "memory budget of the fold-state cache")
	fs.Var(&o.feedBytes, "feed-max-bytes", "size bound of the live feed stream DSH_FEED, oldest messages first (default 1GiB, or a quarter of the storage JetStream can reserve when less; an existing stream keeps its size unless this is given; -1 = none)")
	fs.DurationVar(&o.feedAge, "feed-max-age", 0, "how long the live feed keeps a message (default 168h; an existing stream keeps its age unless this is given)")
	o.cursorBytes = bytesize.Size(shards.DefaultCursorMaxBytes)
	fs.Var(&o.cursorBytes, "cursor-max-bytes", "memory bound of the search cursor bucket DSH_CURSORS; when full, the oldest stored hits go first (-1 = none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	if o.data == "" {
		return o, errors.New("--data is required")
	}
	if o.shards < 1 || o.shards > dshq.MaxShards || o.shard < 0 || o.shard >= o.shards {
		return o, fmt.Errorf("--shard %d --shards %d: want 0 <= shard < shards <= %d", o.shard, o.shards, dshq.MaxShards)
	}
	if o.shards > 1 && !o.noFeed {
		return o, errors.New("--shards: a partitioned projector publishes no live feed: add --no-feed (an unpartitioned projector, --no-queries, may publish it)")
	}
	if o.batchSize < 1 {
		return o, fmt.Errorf("--batch-size: batch size %d is not positive", o.batchSize)
	}
	if o.cacheBytes < 0 {
		return o, fmt.Errorf("--fold-cache-bytes: %d is negative", o.cacheBytes)
	}
	o.Conn.Name = "dshq-projector"
	return o, nil
}

// run runs the projector until ctx ends: node.Run with the projector part
// (the same assembly as `dshq serve`: projection, its query shard, the live
// feed, the admin service, metrics). ready, when not nil, receives the
// metrics address ("" when off) once the projector runs.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- string) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	log, stopPprof, err := o.Start(stderr)
	if err != nil {
		return err
	}
	defer stopPprof()
	cfg := node.Config{
		Home:    o.data,
		Conn:    o.Conn,
		Metrics: o.Metrics,
		Parts:   node.Parts{Projector: true},
		Stream:  bus.StreamConfig{Name: o.stream, LeaseBucket: o.leaseBucket, Replicas: o.Replicas},
		Projection: node.ProjectionConfig{
			Dir:            o.data,
			Durable:        o.durable,
			BatchSize:      o.batchSize,
			FoldCacheBytes: o.cacheBytes,
			SkipVerify:     o.noVerify,
			RebuildOnStart: o.rebuild,
			NoShard:        o.noQueries,
			CursorMaxBytes: int64(o.cursorBytes),
			Shard:          o.shard,
			Shards:         o.shards,
		},
		Feed:   node.FeedConfig{Off: o.noFeed, MaxBytes: int64(o.feedBytes), MaxAge: o.feedAge},
		Logger: log,
	}
	err = node.Run(ctx, cfg, func(info node.Info) {
		addr := strings.TrimSuffix(strings.TrimPrefix(info.MetricsURL, "http://"), "/metrics")
		log.Info("projector running", "data", o.data, "stream", o.stream, "generation", info.Generation, "nats", info.ClientURL, "metrics", addr)
		if ready != nil {
			ready <- addr
		}
	})
	log.Info("projector stopped", "err", err)
	return err
}
