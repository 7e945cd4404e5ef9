package microhost

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricsConfig names the request metrics of a service: <Prefix>_requests_total
// and <Prefix>_request_seconds, labelled by Label (the endpoint, or the
// tool) and code ("OK" for a success).
type MetricsConfig struct {
	Prefix string
	Label  string
	// RequestsHelp and SecondsHelp describe the two metrics.
	RequestsHelp, SecondsHelp string
	// ConstLabels are added to every series (the service's name).
	ConstLabels prometheus.Labels
}

// Metrics counts and times a service's answers. A nil *Metrics (no
// registerer) records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

// NewMetrics registers the metrics of cfg with reg (nil: no metrics, a nil
// *Metrics). A service started again on a new connection (after the
// server closed the last one) counts on in the collectors already
// registered.
func NewMetrics(reg prometheus.Registerer, cfg MetricsConfig) (*Metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: cfg.Prefix + "_requests_total", Help: cfg.RequestsHelp, ConstLabels: cfg.ConstLabels,
		}, []string{cfg.Label, "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: cfg.Prefix + "_request_seconds", Help: cfg.SecondsHelp, ConstLabels: cfg.ConstLabels,
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{cfg.Label, "code"}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, fmt.Errorf("register %s metrics: %w", cfg.Prefix, err)
	}
	if m.seconds, err = register(reg, m.seconds); err != nil {
		return nil, fmt.Errorf("register %s metrics: %w", cfg.Prefix, err)
	}
	return m, nil
}

// register registers c, or returns the collector of the same description
// already registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// Touch makes the OK series of key exist, at 0.
func (m *Metrics) Touch(key string) {
	if m != nil {
		m.requests.WithLabelValues(key, "OK")
	}
}

// Observe records one answer of key with code that took took.
func (m *Metrics) Observe(key, code string, took time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(key, code).Inc()
	m.seconds.WithLabelValues(key, code).Observe(took.Seconds())
}
