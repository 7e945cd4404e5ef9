// Command query runs the dshq query service dsh-query: the stateless NATS
// micro service of the trusted query API (CONTRACT §3). Run any number of
// replicas; each joins the same queue group and asks the projection shard
// (hosted by the projector) over NATS.
//
//	query [--nats-url URL] [--creds FILE] [--shard 0] [--log-level info]
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

	"github.com/dshq/dshq/query"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "query:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	url := fs.String("nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL")
	creds := fs.String("creds", os.Getenv("NATS_CREDS"), "NATS credentials file")
	shard := fs.String("shard", query.DefaultShard, "projection shard token to ask")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))

	opts := []nats.Option{nats.Name(query.ServiceName), nats.MaxReconnects(-1)}
	if *creds != "" {
		opts = append(opts, nats.UserCredentials(*creds))
	}
	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		return fmt.Errorf("connect %s: %w", *url, err)
	}
	defer nc.Close()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	stop, err := query.Serve(ctx, nc, query.WithShard(*shard), query.WithLogger(log))
	if err != nil {
		return err
	}
	log.Info("serving", "service", query.ServiceName, "subjects", query.SubjectPrefix+".>", "shard", *shard, "nats", nc.ConnectedUrlRedacted())
	<-ctx.Done()
	log.Info("stopping")
	err = stop()
	if derr := nc.Drain(); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
		err = errors.Join(err, derr)
	}
	return err
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
