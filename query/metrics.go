package query

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
)

// WithRegisterer registers the service's request metrics with reg:
// dshq_query_requests_total and dshq_query_request_seconds, labelled by
// service, endpoint and code ("OK" for a success).
func WithRegisterer(reg prometheus.Registerer) ServiceOption {
	return func(c *serviceConfig) { c.registerer = reg }
}

// metrics counts and times requests; nil when no registerer is set.
type metrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer, service string) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	labels := prometheus.Labels{"service": service}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dshq_query_requests_total", Help: "Query API requests answered, by endpoint and code.", ConstLabels: labels,
		}, []string{"endpoint", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dshq_query_request_seconds", Help: "Query API request latency, by endpoint and code.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"endpoint", "code"}),
	}
	// A service started again on a new connection (cmd/query after the
	// server closed the last one) counts on in the registered collectors.
	if err := reg.Register(m.requests); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register query metrics: %w", err)
		}
		m.requests = are.ExistingCollector.(*prometheus.CounterVec)
	}
	if err := reg.Register(m.seconds); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register query metrics: %w", err)
		}
		m.seconds = are.ExistingCollector.(*prometheus.HistogramVec)
	}
	return m, nil
}

// observe records one answered request (a microhost Observe hook; nil
// when no registerer is set).
func (m *metrics) observe(endpoint string, took time.Duration, failure *dshq.Error) {
	if m == nil {
		return
	}
	code := "OK"
	if failure != nil {
		code = string(failure.Code)
	}
	m.requests.WithLabelValues(endpoint, code).Inc()
	m.seconds.WithLabelValues(endpoint, code).Observe(took.Seconds())
}
