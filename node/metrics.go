package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/dshq/dshq/internal/metricsrv"
)

// metricsEndpoint serves the registry of the node's current life on
// /metrics: the listener lives as long as the process, the registry as
// long as a connection (its parts register their metrics anew).
type metricsEndpoint struct {
	reg atomic.Pointer[prometheus.Registry]
	// also is Config.MetricsAlso (nil = none).
	also prometheus.Gatherer
}

// Gather gathers the current registry and Config.MetricsAlso
// (prometheus.Gatherer).
func (m *metricsEndpoint) Gather() ([]*dto.MetricFamily, error) {
	gs := prometheus.Gatherers{}
	if reg := m.reg.Load(); reg != nil {
		gs = append(gs, reg)
	}
	if m.also != nil {
		gs = append(gs, m.also)
	}
	return gs.Gather()
}

// newRegistry returns a registry with the Go and process collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics serves /metrics on Config.Metrics until the node stops.
func (n *Node) serveMetrics() error {
	if n.cfg.Metrics == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.Metrics)
	if err != nil {
		return fmt.Errorf("metrics listener: %w", err)
	}
	m := &metricsEndpoint{also: n.cfg.MetricsAlso}
	srv := &http.Server{Handler: metricsrv.Handler(ln.Addr(), promhttp.HandlerFor(m, promhttp.HandlerOpts{})), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("metrics server failed", "err", err)
		}
	}()
	n.shutdown.push(func() error {
		defer wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(ctx)
	})
	n.metrics = m
	n.info.MetricsURL = "http://" + ln.Addr().String() + "/metrics"
	return nil
}

// stopStack runs stop functions in reverse order of registration.
type stopStack struct {
	fns []func() error
}

func (s *stopStack) push(fn func() error) { s.fns = append(s.fns, fn) }

func (s *stopStack) stop() error {
	var errs []error
	for i := len(s.fns) - 1; i >= 0; i-- {
		if err := s.fns[i](); err != nil {
			errs = append(errs, err)
		}
	}
	s.fns = nil
	return errors.Join(errs...)
}
