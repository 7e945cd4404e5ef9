// Command query runs the dshq query service dsh-query: the stateless NATS
// micro service of the trusted query API (docs/protocol.md §3). Run any number
// of replicas; each joins the same queue group and asks the projection shard
// (hosted by the projector) over NATS. It connects, serves query.Serve and,
// with --metrics-addr, its Prometheus metrics; it opens no store and does not
// import node.
//
//	query [--nats-url URL] [--creds FILE] [--shard 0] [--metrics-addr :9310] [--log-level info]
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

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/metricsrv"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/query"
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
	shard := fs.String("shard", dshq.DefaultShard, "projection shard token to ask")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics on this address (/metrics); empty = off")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	err := serve(ctx, natsconn.Options{URL: *url, Name: dshq.QueryService, Creds: *creds}, *shard, *metricsAddr, log, ready)
	log.Info("stopped", "err", err)
	return err
}

// serve connects, starts the service and the metrics endpoint, and runs
// until ctx is done; then it stops them in reverse order and drains the
// connection.
func serve(ctx context.Context, conn natsconn.Options, shard, metricsAddr string, log *slog.Logger, ready chan<- string) (err error) {
	nc, err := natsconn.Connect(conn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, natsconn.Drain(nc)) }()
	reg := metricsrv.NewRegistry()
	stop, err := query.Serve(ctx, nc, query.WithLogger(log), query.WithRegisterer(reg), query.WithShard(shard))
	if err != nil {
		return fmt.Errorf("start query service: %w", err)
	}
	defer func() { err = errors.Join(err, stop()) }()
	var metricsURL string
	if metricsAddr != "" {
		url, stopMetrics, err := metricsrv.Serve(metricsAddr, reg, log)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stopMetrics()) }()
		metricsURL = url
	}
	log.Info("serving", "service", dshq.QueryService, "subjects", dshq.QuerySubjectPrefix+".>", "shard", shard, "nats", conn.URL, "metrics", metricsURL)
	if ready != nil {
		ready <- conn.URL
	}
	<-ctx.Done()
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
