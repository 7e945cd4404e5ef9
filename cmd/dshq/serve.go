package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/node"
	"github.com/dshq/dshq/shellenv"
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
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run everything in one process: NATS, projector, query and tools services",
		Long: `serve runs an embedded NATS server with JetStream (data under --home, default
$DSH_HOME or ~/.dsh), the projector, the query service (dsh-query) and the
tools service (dsh-tools). With --nats-url it joins an existing NATS
deployment instead of starting its own server.

It logs one line when ready and shuts down cleanly on SIGINT or SIGTERM.`,
		Example: `  dshq serve
  dshq serve --home /var/lib/dshq --listen 127.0.0.1:4333 --metrics 127.0.0.1:9464
  dshq serve --nats-url nats://nats-1:4222,nats://nats-2:4222 --creds dshq.creds`,
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
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: level}))
			cfg := node.Config{
				Home:        resolved,
				Listen:      listen,
				RelaxedSync: relaxedSync,
				Metrics:     metrics,
				Parts:       node.All,
				Logger:      log,
				Stream:      bus.StreamConfig{Replicas: replicas},
			}
			external = cmd.Flags().Changed("nats-url")
			if external {
				cfg.Conn = g.conn
			}
			if err := os.MkdirAll(resolved, 0o700); err != nil {
				return fmt.Errorf("create home: %w", err)
			}
			return node.Run(cmd.Context(), cfg, func(info node.Info) {
				log.Info("dshq ready", "nats", info.ClientURL, "embedded", info.Embedded, "home", resolved,
					"metrics", info.MetricsURL, "generation", info.Generation)
				if g.json {
					_ = json.NewEncoder(g.stdout).Encode(info)
				}
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&home, "home", "", "data directory (default $DSH_HOME, else ~/.dsh)")
	f.StringVar(&listen, "listen", node.DefaultListen, "embedded NATS client address (loopback by default)")
	f.StringVar(&metrics, "metrics", "", "serve Prometheus metrics on HOST:PORT (/metrics)")
	f.IntVar(&replicas, "replicas", 1, "replicas of the session stream and the lease bucket when serve creates them (a NATS cluster with --nats-url; the embedded server has one)")
	f.BoolVar(&relaxedSync, "relaxed-sync", false, "let the embedded server fsync periodically instead of on every write (faster; a power loss can lose acknowledged records)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

// resolveHome resolves the data directory (UPSTREAM §7): --home when given,
// then $DSH_HOME when set and not blank, then ~/.dsh; ~ expanded, absolute.
func resolveHome(configured *string, getenv func(string) string) (string, error) {
	osHome, _ := os.UserHomeDir()
	home, err := shellenv.ResolveHome(configured, getenv, osHome)
	if err != nil {
		return "", fmt.Errorf("resolve DSH_HOME: %w", err)
	}
	return home, nil
}
