// Command query runs the dshq query service dsh-query: the stateless NATS
// micro service of the trusted query API
// (docs/protocol.md#3-the-trusted-query-api). Run any number
// of replicas; each joins the same queue group and asks the projection shard
// (hosted by the projectors) over NATS, each request a projection replica that
// has reached what it needs (docs/cluster.md, "Projection replicas"). It connects, serves query.Serve and,
// with --metrics-addr, its Prometheus metrics; it opens no store and does not
// import node.
//
//	query [--nats-url URL] [--creds FILE] [--shard 0 | --shards N] [--metrics-addr :9310] [--log-level info]
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
// URL once the service is up.
func run(ctx context.Context, args []string, ready chan<- string) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	url := fs.String("nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL")
	creds := fs.String("creds", os.Getenv("NATS_CREDS"), "NATS credentials file")
	shard := fs.String("shard", dshq.DefaultShard, "projection shard token to ask (unpartitioned)")
	shards := fs.Int("shards", 1, "ask a projection partitioned into this many shards (projector --shard I --shards N), merging their answers (docs/cluster.md)")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (/metrics); empty = off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if *shards < 1 || *shards > dshq.MaxShards {
		return fmt.Errorf("--shards %d: want 1 to %d", *shards, dshq.MaxShards)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	err := serve(ctx, natsconn.Options{URL: *url, Name: dshq.QueryService, Creds: *creds}, target{*shard, *shards}, *metricsAddr, log, ready)
	log.Info("stopped", "err", err)
	return err
}

// serve serves on a connection until ctx is done. When the server closes the
// connection for good (a protocol error, a kick that is not followed by a
// reconnect), it connects again (lifecycle.Reconnect: backing off from
// lifecycle.FirstWait to lifecycle.MaxWait), and serves again; when the server refuses the credentials,
// or no connection succeeds within lifecycle.ReconnectFor, it returns the error, so
// that the process exits non-zero rather than stay alive serving nothing.
// target is the projection the service asks: shard, or shards when
// partitioned.
type target struct {
	shard  string
	shards int
}

func serve(ctx context.Context, conn natsconn.Options, shard target, metricsAddr string, log *slog.Logger, ready chan<- string) error {
	reg := metricsrv.NewRegistry()
	if metricsAddr != "" {
		url, stopMetrics, err := metricsrv.Serve(metricsAddr, reg, log)
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
		cause := serveOn(ctx, nc, conn, shard, reg, log, ready)
		ready = nil
		if ctx.Err() != nil || !errors.Is(cause, natsconn.ErrConnectionClosed) {
			return cause
		}
		if nc, err = reconnect(ctx, conn, cause, log); nc == nil {
			return err
		}
	}
}

// serveOn serves dsh-query on nc until ctx is done (nil) or the connection
// closes for good (an error wrapping natsconn.ErrConnectionClosed); either
// way the service is stopped and the connection drained.
func serveOn(ctx context.Context, nc *nats.Conn, conn natsconn.Options, shard target, reg prometheus.Registerer, log *slog.Logger, ready chan<- string) (err error) {
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
	log.Info("serving", "service", dshq.QueryService, "subjects", dshq.QuerySubjectPrefix+".>", "shard", shard.shard, "shards", shard.shards, "nats", natsconn.Redacted(conn.URL))
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

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
