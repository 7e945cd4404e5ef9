// Command query runs the dshq query service dsh-query: the stateless NATS
// micro service of the trusted query API (CONTRACT §3). Run any number of
// replicas; each joins the same queue group and asks the projection shard
// (hosted by the projector) over NATS.
//
//	query [--nats-url URL] [--creds FILE] [--shard 0] [--metrics-addr :9310] [--log-level info]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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

	opts := []nats.Option{nats.Name(query.ServiceName), nats.MaxReconnects(-1)}
	if *creds != "" {
		opts = append(opts, nats.UserCredentials(*creds))
	}
	nc, err := nats.Connect(*url, opts...)
	if err != nil {
		return fmt.Errorf("connect %s: %w", *url, err)
	}
	defer nc.Close()

	reg := prometheus.NewRegistry()
	stopMetrics, err := serveMetrics(*metricsAddr, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	stop, err := query.Serve(ctx, nc, query.WithShard(*shard), query.WithLogger(log), query.WithRegisterer(reg))
	if err != nil {
		return err
	}
	log.Info("serving", "service", query.ServiceName, "subjects", query.SubjectPrefix+".>", "shard", *shard, "nats", nc.ConnectedUrlRedacted())
	if ready != nil {
		ready <- nc.ConnectedUrl()
	}
	<-ctx.Done()
	log.Info("stopping")
	err = stop()
	if derr := nc.Drain(); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
		err = errors.Join(err, derr)
	}
	return err
}

// serveMetrics serves reg on addr/metrics until the returned stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
