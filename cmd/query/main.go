// Command query runs the dshq query service dsh-query: the stateless NATS
// micro service of the trusted query API
// (docs/protocol.md#3-the-trusted-query-api), and beside it, unless
// --no-tools, the model-facing tools dsh-tools
// (docs/protocol.md#4-the-model-facing-tools), which ask that API. Run any
// number of replicas; each joins the same queue groups and asks the
// projection shard (hosted by the projectors) over NATS, each request a
// projection replica that has reached what it needs (docs/cluster.md,
// "Projection replicas"). It connects, serves query.Serve and
// toolservice.Serve and, with --metrics, their Prometheus metrics; it opens
// no store and does not import node. Its connection and lifecycle flags are
// cmd/projector's (package daemonflags).
//
//	query [--nats-url URL] [--creds FILE] [--shard 0 | --shards N] [--replicas 3] [--no-tools] [--metrics :9310] [--log-level info]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/daemonflags"
	"github.com/dshq/dshq/internal/lifecycle"
	"github.com/dshq/dshq/internal/metricsrv"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/shards"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], nil)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "query:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done. ready, when set, receives the connection's
// URL once the services are up.
func run(ctx context.Context, args []string, ready chan<- string) error {
	var o options
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	o.Register(fs, "replicas of the spill bucket OBJ_DSH_SPILL that dsh-tools creates (as projector --replicas)")
	fs.StringVar(&o.shard, "shard", dshq.DefaultShard, "projection shard token to ask (unpartitioned)")
	fs.IntVar(&o.shards, "shards", 1, "ask a projection partitioned into this many shards (projector --shard I --shards N), merging their answers (docs/cluster.md)")
	fs.BoolVar(&o.noTools, "no-tools", false, "serve dsh-query alone, not the model-facing tools dsh-tools beside it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if err := o.Check(); err != nil {
		return err
	}
	if o.shards < 1 || o.shards > dshq.MaxShards {
		return fmt.Errorf("--shards %d: want 1 to %d", o.shards, dshq.MaxShards)
	}
	log, stopPprof, err := o.Start(os.Stderr)
	if err != nil {
		return err
	}
	defer stopPprof()
	o.Conn.Name = dshq.QueryService
	err = serve(ctx, o, log, ready)
	log.Info("stopped", "err", err)
	return err
}

// options are the command's flags.
type options struct {
	daemonflags.Flags
	// shard and shards are the projection the services ask: shard, or
	// shards when partitioned.
	shard   string
	shards  int
	noTools bool
}

// serve serves on a connection until ctx is done. When the server closes the
// connection for good (a protocol error, a kick that is not followed by a
// reconnect), it connects again (lifecycle.Reconnect: backing off from
// lifecycle.FirstWait to lifecycle.MaxWait), and serves again; when the server refuses the credentials,
// or no connection succeeds within lifecycle.ReconnectFor, it returns the error, so
// that the process exits non-zero rather than stay alive serving nothing.
func serve(ctx context.Context, o options, log *slog.Logger, ready chan<- string) error {
	conn := o.Conn
	reg := metricsrv.NewRegistry()
	if o.Metrics != "" {
		url, stopMetrics, err := metricsrv.Serve(o.Metrics, reg, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
		log.Info("metrics", "url", url)
	}
	nc, err := natsconn.Connect(conn)
	if err != nil {
		return err
	}
	for {
		cause := serveOn(ctx, nc, o, reg, log, ready)
		ready = nil
		if ctx.Err() != nil || !errors.Is(cause, natsconn.ErrConnectionClosed) {
			return cause
		}
		if nc, err = reconnect(ctx, conn, cause, log); nc == nil {
			return err
		}
	}
}

// serveOn serves dsh-query, and dsh-tools unless --no-tools, on nc until
// ctx is done (nil) or the connection closes for good (an error wrapping
// natsconn.ErrConnectionClosed); either way the services are stopped and
// the connection drained.
func serveOn(ctx context.Context, nc *nats.Conn, o options, reg prometheus.Registerer, log *slog.Logger, ready chan<- string) (err error) {
	conn, shard := o.Conn, o
	watched, stopWatch := natsconn.WatchConnection(ctx, nc)
	defer func() { err = errors.Join(err, natsconn.Drain(nc)) }()
	defer stopWatch()
	qopts := []query.ServiceOption{query.WithLogger(log), query.WithRegisterer(reg), query.WithShardToken(shard.shard)}
	if shard.shards > 1 {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		// A partitioned projection: the wire over an engine over its
		// shards.
		eng, src, err := shards.NewEngine(js, shard.shards)
		if err != nil {
			return err
		}
		defer src.Close()
		qopts = append(qopts, query.WithEngine(eng))
	}
	stop, err := query.Serve(watched, nc, qopts...)
	if err != nil {
		return fmt.Errorf("start query service: %w", err)
	}
	defer func() { err = errors.Join(err, stop()) }()
	if !o.noTools {
		stopTools, err := serveTools(watched, nc, o.Replicas, reg, log)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stopTools()) }()
	}
	log.Info("serving", "service", dshq.QueryService, "subjects", dshq.QuerySubjectPrefix+".>", "shard", shard.shard, "shards", shard.shards, "tools", !o.noTools, "nats", natsconn.Redacted(conn.URL))
	if ready != nil {
		ready <- conn.URL
	}
	<-watched.Done()
	if cause := context.Cause(watched); errors.Is(cause, natsconn.ErrConnectionClosed) {
		return cause
	}
	return nil
}

// reconnect connects again after the connection closed for good (cause). It
// returns a nil connection and nil error when ctx ends first.
func reconnect(ctx context.Context, conn natsconn.Options, cause error, log *slog.Logger) (*nats.Conn, error) {
	nc, _, err := lifecycle.Reconnect(ctx, lifecycle.FirstWait, cause, func(cause error, wait time.Duration) {
		log.Error("nats connection closed by the server; connecting again", "err", cause, "in", wait)
	}, func() (*nats.Conn, error) {
		nc, err := natsconn.Connect(conn)
		if err == nil {
			log.Info("reconnected", "nats", natsconn.Redacted(conn.URL))
		}
		return nc, err
	}, func(err error) bool { return !natsconn.IsAuthError(err) })
	return nc, err
}
