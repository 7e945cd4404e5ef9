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
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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
