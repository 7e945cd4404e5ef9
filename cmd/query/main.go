// Command query runs the dshq query service dsh-query: the stateless NATS
// micro service of the trusted query API (CONTRACT §3). Run any number of
// replicas; each joins the same queue group and asks the projection shard
// (hosted by the projector) over NATS. It is node.Run with the query part.
//
//	query [--nats-url URL] [--creds FILE] [--shard 0] [--metrics-addr :9310] [--log-level info]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/node"
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

// run serves until ctx is done: node.Run with the query part (the same
// assembly as `dshq serve`). ready, when set, receives the connection's URL
// once the service is up.
func run(ctx context.Context, args []string, ready chan<- string) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	url := fs.String("nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL")
	creds := fs.String("creds", os.Getenv("NATS_CREDS"), "NATS credentials file")
	shard := fs.String("shard", query.DefaultShard, "projection shard token to ask")
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
	cfg := node.Config{
		Conn:       node.ConnectOptions{URL: *url, Name: query.ServiceName, Creds: *creds},
		Metrics:    *metricsAddr,
		Parts:      node.Parts{Query: true},
		QueryShard: *shard,
		Logger:     log,
	}
	err := node.Run(ctx, cfg, func(info node.Info) {
		log.Info("serving", "service", query.ServiceName, "subjects", query.SubjectPrefix+".>", "shard", *shard, "nats", info.ClientURL, "metrics", info.MetricsURL)
		if ready != nil {
			ready <- info.ClientURL
		}
	})
	log.Info("stopped", "err", err)
	return err
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
