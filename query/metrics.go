package query

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
)

// WithRegisterer registers the service's request metrics with reg:
// dshq_query_requests_total and dshq_query_request_seconds, labelled by
// service, endpoint and code ("OK" for a success).
func WithRegisterer(reg prometheus.Registerer) ServiceOption {
	return func(c *serviceConfig) { c.registerer = reg }
}

// metrics counts and times requests; nil when no registerer is set.
type metrics struct{ m *microhost.Metrics }

func newMetrics(reg prometheus.Registerer, service string) (*metrics, error) {
	m, err := microhost.NewMetrics(reg, microhost.MetricsConfig{
		Prefix: "dshq_query", Label: "endpoint",
		RequestsHelp: "Query API requests answered, by endpoint and code.",
		SecondsHelp:  "Query API request latency, by endpoint and code.",
		ConstLabels:  prometheus.Labels{"service": service},
	})
	if err != nil || m == nil {
		return nil, err
	}
	return &metrics{m}, nil
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
	m.m.Observe(endpoint, code, took)
}
