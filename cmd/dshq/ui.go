package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/dshq/dshq/internal/metricsrv"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/web"
)

// httpFlags are the web UI's flags of serve and ui.
type httpFlags struct {
	addr  string
	token string
}

func (h *httpFlags) add(cmd *cobra.Command, g *globals, offAllowed bool) {
	usage := "serve the web UI on HOST:PORT (loopback by default; a non-loopback address needs --http-token)"
	if offAllowed {
		usage += "; off = no UI"
	}
	cmd.Flags().StringVar(&h.addr, "http", web.DefaultAddr, usage)
	cmd.Flags().StringVar(&h.token, "http-token", g.getenv("DSH_HTTP_TOKEN"), "token the web UI requires (env DSH_HTTP_TOKEN); open the UI once with ?token=…")
}

// ui is a running web UI and its own NATS connection.
type ui struct {
	l  *web.Listening
	nc *nats.Conn
}

// startUI connects to NATS with o and serves the UI on h.addr, its request
// metrics registered on reg.
func startUI(o natsconn.Options, h httpFlags, log *slog.Logger, reg prometheus.Registerer) (*ui, error) {
	if err := web.CheckBind(h.addr, h.token); err != nil {
		return nil, err
	}
	o.Name = "dshq-ui"
	nc, err := natsconn.Connect(o)
	if err != nil {
		return nil, err
	}
	s, err := web.New(nc, web.WithToken(h.token), web.WithLogger(log), web.WithMetrics(reg))
	if err != nil {
		nc.Close()
		return nil, err
	}
	l, err := web.Listen(h.addr, s)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("web UI on %s: %w", h.addr, err)
	}
	return &ui{l: l, nc: nc}, nil
}

func (u *ui) stop() error {
	err := u.l.Stop()
	u.nc.Close()
	return err
}

func newUICmd(g *globals) *cobra.Command {
	var (
		h        httpFlags
		logLevel string
		metrics  string
	)
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the web UI of a running dshq (a trusted client of its NATS deployment)",
		Long: `ui serves the web UI — sessions, search, transcripts with their surfaces,
event traces, lineage, all live — for the dshq deployment at --nats-url. It is a
trusted client: it reads through the query API (dsh.query.v1) and follows the
live feed (DSH_FEED), so it needs the trusted credentials, and it shows every
workspace. 'dshq serve' serves the same UI itself (its --http flag).

It listens on loopback (` + web.DefaultAddr + `) by default. A non-loopback
--http needs --http-token (or DSH_HTTP_TOKEN): open the UI once as
http://HOST:PORT/?token=<token>, which sets an HttpOnly cookie. Behind a
reverse proxy that authenticates, bind to loopback instead.`,
		Example: `  dshq ui --nats-url nats://nats-1:4222 --user trusted
  dshq ui --http 127.0.0.1:8080
  DSH_HTTP_TOKEN=$(openssl rand -hex 16) dshq ui --http 0.0.0.0:4280`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log := slog.New(slog.NewJSONHandler(g.stderr, &slog.HandlerOptions{Level: level}))
			if h.addr == "off" {
				return errors.New("--http off: ui has nothing else to do")
			}
			reg := metricsrv.NewRegistry()
			metricsURL := ""
			if metrics != "" {
				url, stop, err := metricsrv.Serve(metrics, reg, log)
				if err != nil {
					return err
				}
				defer func() { _ = stop() }()
				metricsURL = url
			}
			u, err := startUI(g.conn, h, log, reg)
			if err != nil {
				return err
			}
			log.Info("dshq ui ready", "ui", u.l.URL, "urls", u.l.URLs, "nats", natsconn.Redacted(g.conn.URL), "token", h.token != "", "metrics", metricsURL)
			if g.json {
				_ = json.NewEncoder(g.stdout).Encode(struct {
					UIURL      string
					UIURLs     []string
					MetricsURL string `json:",omitempty"`
				}{u.l.URL, u.l.URLs, metricsURL})
			} else {
				fmt.Fprintf(g.stdout, "dshq ui at %s\n", strings.Join(u.l.URLs, " "))
			}
			<-cmd.Context().Done()
			return u.stop()
		},
	}
	h.add(cmd, g, false)
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().StringVar(&metrics, "metrics", "", "serve Prometheus metrics (the UI's requests, Go and process) on HOST:PORT (/metrics)")
	return cmd
}
