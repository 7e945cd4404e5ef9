// Command projector is the dshq projector daemon: it follows the session log
// stream (JetStream DSH_SESSIONS) and folds it into the projection under
// --data (bbolt + Bleve), serves that projection's query shard, and exposes
// Prometheus metrics. It runs until SIGINT or SIGTERM, then shuts down
// cleanly (the loop stops between batches; nothing committed is lost, and
// nothing uncommitted was acknowledged).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/node"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
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
	conn        node.ConnectOptions
	data        string
	stream      string
	leaseBucket string
	durable     string
	metrics     string
	rebuild     bool
	noQueries   bool
	noVerify    bool
	batchSize   int
	cacheBytes  int64
	logLevel    string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("projector", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.conn.URL, "nats-url", nats.DefaultURL, "NATS server URL (comma-separated for a cluster)")
	fs.StringVar(&o.conn.Creds, "creds", "", "NATS credentials file (JWT + NKey seed)")
	fs.StringVar(&o.conn.User, "user", "", "NATS user")
	fs.StringVar(&o.conn.Password, "password", "", "NATS password")
	fs.StringVar(&o.conn.TLSCA, "tls-ca", "", "CA certificate file to trust")
	fs.StringVar(&o.conn.TLSCert, "tls-cert", "", "client certificate file (mutual TLS)")
	fs.StringVar(&o.conn.TLSKey, "tls-key", "", "client key file (mutual TLS)")
	fs.StringVar(&o.data, "data", "", "projection data directory (required)")
	fs.StringVar(&o.stream, "stream", projection.DefaultStream, "session log stream")
	fs.StringVar(&o.leaseBucket, "lease-bucket", projection.DefaultLeaseBucket, "write-lease key-value bucket")
	fs.StringVar(&o.durable, "durable", projection.DefaultDurable, "durable consumer name (one per projector)")
	fs.StringVar(&o.metrics, "metrics", "", "serve Prometheus metrics on HOST:PORT/metrics (off when empty)")
	fs.BoolVar(&o.rebuild, "rebuild", false, "rebuild the projection from the stream beside the serving one, then swap it in")
	fs.BoolVar(&o.noQueries, "no-queries", false, "do not serve the query shard")
	fs.BoolVar(&o.noVerify, "no-verify", false, "skip bbolt's full consistency check of the store on start (it grows with the store)")
	fs.IntVar(&o.batchSize, "batch-size", projection.DefaultBatchSize, "records applied per transaction, at most")
	fs.Int64Var(&o.cacheBytes, "fold-cache-bytes", projection.DefaultFoldCacheBytes, "memory budget of the fold-state cache")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.data == "" {
		return o, errors.New("--data is required")
	}
	if o.batchSize < 1 {
		return o, fmt.Errorf("--batch-size: batch size %d is not positive", o.batchSize)
	}
	if o.cacheBytes < 0 {
		return o, fmt.Errorf("--fold-cache-bytes: %d is negative", o.cacheBytes)
	}
	o.conn.Name = "dshq-projector"
	return o, nil
}

// run runs the projector until ctx ends. ready, when not nil, receives the
// metrics address ("" when off) once the projector runs.
func run(ctx context.Context, args []string, stderr io.Writer, ready chan<- string) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	nc, err := node.Connect(o.conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p, err := projection.Open(ctx, js, o.data,
		projection.WithStream(o.stream), projection.WithLeaseBucket(o.leaseBucket), projection.WithDurable(o.durable),
		projection.WithRegisterer(reg), projection.WithLogger(log), projection.WithVerifyOnOpen(!o.noVerify),
		projection.WithBatchSize(o.batchSize), projection.WithFoldCacheBytes(o.cacheBytes))
	if err != nil {
		return err
	}
	defer p.Close()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	addr, stopMetrics, err := serveMetrics(o.metrics, reg, log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	// Query wiring point: this projector's projection is served as a query
	// shard (package query); the query service fans requests out to shards.
	if !o.noQueries {
		stopShard, err := serveShard(runCtx, nc, js, p, log)
		if err != nil {
			return err
		}
		defer stopShard()
	}

	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(runCtx) }()
	rebuilt := make(chan struct{})
	if o.rebuild {
		go func() {
			defer close(rebuilt)
			err := p.Rebuild(runCtx, func(pr projection.RebuildProgress) {
				log.Info("rebuild progress", "applied", pr.Applied, "target", pr.Target, "records", pr.Records, "swapped", pr.Swapped)
			})
			if err != nil && runCtx.Err() == nil {
				cancel(fmt.Errorf("rebuild: %w", err))
			}
		}()
	} else {
		close(rebuilt)
	}
	log.Info("projector running", "data", o.data, "stream", o.stream, "generation", p.Generation(), "epoch", p.Epoch(), "metrics", addr)
	if ready != nil {
		ready <- addr
	}
	err = <-runErr
	cancel(nil)
	<-rebuilt
	if err == nil {
		if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
	}
	log.Info("projector stopped", "generation", p.Generation(), "err", err)
	return err
}

func serveShard(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, p *projection.Projector, log *slog.Logger) (func(), error) {
	cursors, err := query.NewKVCursorStore(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("cursor store: %w", err)
	}
	engine := query.NewEngine(query.FromProjector(p), query.WithSearcher(servingIndex{p}), query.WithCursorStore(cursors))
	stop, err := query.ServeShard(ctx, nc, query.DefaultShard, engine, query.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("serve query shard: %w", err)
	}
	return func() {
		if err := stop(); err != nil {
			log.Warn("stop query shard", "err", err)
		}
	}, nil
}

// servingIndex searches the projector's serving index at each call, so that
// searches follow a rebuild swap instead of hitting the closed old index.
type servingIndex struct{ p *projection.Projector }

func (s servingIndex) SearchSessions(ctx context.Context, q query.SearchQuery) ([]query.SessionHit, error) {
	return query.FromIndex(s.p.Index()).SearchSessions(ctx, q)
}

func (s servingIndex) SearchEvents(ctx context.Context, q query.SearchQuery) ([]dshq.EventSearchHit, error) {
	return query.FromIndex(s.p.Index()).SearchEvents(ctx, q)
}

// serveMetrics serves reg on addr/metrics; it returns the bound address and
// a stop function. An empty addr serves nothing.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (string, func(), error) {
	if addr == "" {
		return "", func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "err", err)
		}
	}()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
	}, nil
}
