package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/internal/bytesize"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/internal/pprofsrv"
	"github.com/dshq/dshq/node"
	"github.com/dshq/dshq/shards"
	"github.com/dshq/dshq/shellenv"
	"github.com/dshq/dshq/web"
)

func newServeCmd(g *globals) *cobra.Command {
	var (
		home        string
		listen      string
		external    bool
		metrics     string
		relaxedSync bool
		replicas    int
		logLevel    string
		pprofAddr   string
		h           httpFlags
		feedBytes   bytesize.Size
		feedAge     time.Duration
		cursorBytes = bytesize.Size(shards.DefaultCursorMaxBytes)
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run everything in one process: NATS, projector, query and tools services",
		Long: `serve runs an embedded NATS server with JetStream (data under --home, default
$DSH_HOME or ~/.dsh), the projector, the query service (dsh-query) and the
tools service (dsh-tools), and the web UI on --http (` + web.DefaultAddr + ` by
default; --http off for none; see 'dshq ui --help'). With --nats-url it joins an
existing NATS deployment instead of starting its own server.

It logs one line when ready ("dshq ready"), shuts down cleanly on SIGINT or
SIGTERM, and logs when it begins ("dshq shutting down") and when it is done
("dshq stopped").`,
		Example: `  dshq serve
  dshq serve --home /var/lib/dshq --listen 127.0.0.1:4333 --metrics 127.0.0.1:9464
  dshq serve --nats-url nats://nats-1:4222,nats://nats-2:4222 --creds dshq.creds
  dshq serve --http off`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var explicit *string
			if cmd.Flags().Changed("home") {
				explicit = &home
			}
			resolved, err := resolveHome(explicit, g.getenv)
			if err != nil {
				return err
			}
			level := slog.LevelInfo
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageErrorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: level}))
			if g.getenv("GOGC") == "" {
				debug.SetGCPercent(serveGCPercent)
			}
			if pprofAddr != "" {
				stop, err := pprofsrv.Serve(pprofAddr)
				if err != nil {
					return usageErrorf("%w", err)
				}
				defer stop()
			}
			// The web UI lives across the node's reconnections: its request
			// metrics are the process's, served with the node's.
			uiMetrics := prometheus.NewRegistry()
			cfg := node.Config{
				Home:        resolved,
				Listen:      listen,
				RelaxedSync: relaxedSync,
				Metrics:     metrics,
				MetricsAlso: uiMetrics,
				Parts:       node.All,
				Logger:      log,
				Stream:      bus.StreamConfig{Replicas: replicas},
				Feed:        node.FeedConfig{MaxBytes: int64(feedBytes), MaxAge: feedAge},
				Projection:  node.ProjectionConfig{CursorMaxBytes: int64(cursorBytes)},
			}
			external = cmd.Flags().Changed("nats-url")
			if external {
				cfg.Conn = g.conn
			}
			if err := os.MkdirAll(resolved, 0o700); err != nil {
				return fmt.Errorf("create home: %w", err)
			}
			ctx, cancel := context.WithCancelCause(cmd.Context())
			defer cancel(nil)
			uiDone := make(chan error, 1)
			uiDone <- nil
			var uiFailed error // the web UI's start failure (--http given), which ends serve
			stopping := context.AfterFunc(cmd.Context(), func() { log.Info("dshq shutting down", "reason", context.Cause(cmd.Context()).Error()) })
			defer stopping()
			err = node.Run(ctx, cfg, func(info node.Info) {
				uiURL, uiURLs := "", []string(nil)
				if h.addr != "off" {
					uiConn := g.conn
					if !external {
						uiConn = natsconn.Options{URL: info.ClientURL}
					}
					u, err := startUI(uiConn, h, log, uiMetrics)
					switch {
					case err == nil:
						uiURL, uiURLs = u.l.URL, u.l.URLs
						<-uiDone
						go func() { <-ctx.Done(); uiDone <- u.stop() }()
					case cmd.Flags().Changed("http"):
						uiFailed = err
						cancel(err)
						return
					default:
						// The default address may be taken (another dshq on this
						// machine): serve without the UI rather than not at all.
						log.Warn("web UI not served; pass --http HOST:PORT or --http off", "err", err)
					}
				}
				log.Info("dshq ready", "nats", info.ClientURL, "embedded", info.Embedded, "home", resolved,
					"metrics", info.MetricsURL, "ui", uiURL, "ui_urls", uiURLs, "generation", info.Generation)
				if g.json {
					_ = json.NewEncoder(g.stdout).Encode(struct {
						node.Info
						UIURL  string
						UIURLs []string
					}{info, uiURL, uiURLs})
				}
			})
			cancel(nil)
			if uiFailed != nil && !errors.Is(err, uiFailed) {
				err = errors.Join(uiFailed, err) // Run ends without error when its context is canceled
			}
			err = errors.Join(err, <-uiDone)
			if err != nil {
				log.Error("dshq stopped", "err", err)
			} else {
				log.Info("dshq stopped")
			}
			if errors.Is(err, syscall.EADDRINUSE) && !external && uiFailed == nil {
				err = fmt.Errorf("%w (another dshq serve or NATS server listens there; --listen HOST:PORT picks another address)", err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&home, "home", "", "data directory (default $DSH_HOME, else ~/.dsh)")
	f.StringVar(&listen, "listen", node.DefaultListen, "embedded NATS client address (loopback by default)")
	f.StringVar(&metrics, "metrics", "", "serve Prometheus metrics on HOST:PORT (/metrics)")
	f.IntVar(&replicas, "replicas", 1, "replicas of the session stream, the lease bucket, the feed, the cursor and the spill buckets (a NATS cluster with --nats-url; the embedded server has one; an existing stream must have as many)")
	f.BoolVar(&relaxedSync, "relaxed-sync", false, "let the embedded server fsync periodically instead of on every write (faster; a power loss can lose acknowledged records)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&pprofAddr, "pprof", "", "serve Go's net/http/pprof profiles on HOST:PORT/debug/pprof/ (off when empty; keep it on loopback)")
	h.add(cmd, g, true)
	addSizeFlags(f, &feedBytes, &feedAge, &cursorBytes)
	return cmd
}

// serveGCPercent is the garbage collector's target of dshq serve unless GOGC
// says otherwise: the heap grows by half its live size between collections
// instead of doubling. dshq serve's live heap is mostly the embedded
// server's (block buffers, message ids), which a collection keeps; at the
// default of 100 its resident memory after a 100k-event load peaked at
// 186-205 MiB, at 50 at 139 MiB (dshq-bench -sessions 1630 -serve-only),
// for collections the live path, which waits on syncs, has the CPU for.
// There is no soft memory limit: GOMEMLIMIT=100MiB lowered that peak by a
// tenth only (105-110 to 95-96 MiB) for 4-12% more CPU per record, and the
// embedded server sizes JetStream's memory store at 75% of GOMEMLIMIT, so
// under ~171 MiB the 128 MiB cursor bucket does not fit and serve exits.
const serveGCPercent = 50

// addSizeFlags adds the flags that size the live feed stream and the
// search cursor bucket.
func addSizeFlags(f *pflag.FlagSet, feedBytes *bytesize.Size, feedAge *time.Duration, cursorBytes *bytesize.Size) {
	f.Var(feedBytes, "feed-max-bytes", "size bound of the live feed stream DSH_FEED, oldest messages first (default 1GiB, or a quarter of the storage JetStream can reserve when less; an existing stream keeps its size unless this is given; -1 = none)")
	f.DurationVar(feedAge, "feed-max-age", 0, "how long the live feed keeps a message (default 168h; an existing stream keeps its age unless this is given)")
	f.Var(cursorBytes, "cursor-max-bytes", "memory bound of the search cursor bucket DSH_CURSORS; when full, the oldest stored hits go first (-1 = none)")
}

// resolveHome resolves the data directory (docs/sdk.md#dsh_home): --home when
// given, then $DSH_HOME when set and not blank, then ~/.dsh; ~ expanded,
// absolute.
func resolveHome(configured *string, getenv func(string) string) (string, error) {
	osHome, _ := os.UserHomeDir()
	home, err := shellenv.ResolveHome(configured, getenv, osHome)
	if err != nil {
		return "", fmt.Errorf("resolve DSH_HOME: %w", err)
	}
	return home, nil
}
