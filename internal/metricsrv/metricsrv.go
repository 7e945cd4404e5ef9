// Package metricsrv serves a process's Prometheus registry over HTTP on
// /metrics: the --metrics endpoint of dshq serve, the projector and the query
// service.
package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a registry holding the Go runtime and process
// collectors, to which each part adds its own metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// ShutdownTimeout bounds how long stop waits for requests in progress.
const ShutdownTimeout = 5 * time.Second

// Serve serves reg on addr/metrics in a goroutine it owns and returns the
// endpoint's URL and stop, which shuts the server down (waiting at most
// ShutdownTimeout for requests in progress) and waits for the goroutine.
func Serve(addr string, reg *prometheus.Registry, log *slog.Logger) (url string, stop func() error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("metrics listener: %w", err)
	}
	srv := &http.Server{Handler: Handler(ln.Addr(), promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "err", err)
		}
	}()
	stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		err := srv.Shutdown(ctx)
		<-done
		return err
	}
	return "http://" + ln.Addr().String() + "/metrics", stop, nil
}

// Handler serves metrics on /metrics for a listener bound to addr. Bound
// to a loopback address, it answers only requests that name a loopback
// host (localhost, 127.0.0.1, [::1]), as the web UI does: another Host is
// a page of another site reaching this machine's port through DNS
// rebinding, answered 421 Misdirected Request. Bound to another address
// it is meant for scrapers elsewhere and answers any Host.
func Handler(addr net.Addr, metrics http.Handler) http.Handler {
	loopback := false
	if a, ok := addr.(*net.TCPAddr); ok {
		loopback = a.IP.IsLoopback()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if loopback && !isLoopbackHost(r.Host) {
			http.Error(w, "this metrics endpoint serves only loopback host names (localhost, 127.0.0.1, [::1])", http.StatusMisdirectedRequest)
			return
		}
		metrics.ServeHTTP(w, r)
	})
	return mux
}

// isLoopbackHost reports whether a Host header (a name or address, with
// or without a port) names only this machine.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
