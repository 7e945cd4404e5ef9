package toolservice

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tools"
)

// WithRegisterer registers the service's call metrics with reg:
// dshq_tools_requests_total and dshq_tools_request_seconds, labelled by tool
// and code ("OK" for a success, else the tool error's code). Every tool's
// OK series exists from the start, at 0.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(c *config) { c.registerer = reg }
}

// metrics counts and times tool calls; nil when no registerer is set.
type metrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dshq_tools_requests_total", Help: "Model-facing tool calls answered by dsh-tools, by tool and code.",
		}, []string{"tool", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dshq_tools_request_seconds", Help: "Model-facing tool call latency in dsh-tools, by tool and code.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"tool", "code"}),
	}
	// A service started again on a new connection (cmd/query after the
	// server closed the last one) counts on in the registered collectors.
	if err := reg.Register(m.requests); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register tools metrics: %w", err)
		}
		m.requests = are.ExistingCollector.(*prometheus.CounterVec)
	}
	if err := reg.Register(m.seconds); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register tools metrics: %w", err)
		}
		m.seconds = are.ExistingCollector.(*prometheus.HistogramVec)
	}
	for _, d := range tools.Definitions() {
		m.requests.WithLabelValues(d.Name, "OK")
	}
	return m, nil
}

// observe records one tool call that began at start.
func (m *metrics) observe(tool string, start time.Time, res tools.Result, err error) {
	if m == nil {
		return
	}
	code := "OK"
	switch {
	case err != nil:
		code = string(dshq.CodeAborted)
	case res.IsError:
		code = string(res.Code)
	}
	m.requests.WithLabelValues(tool, code).Inc()
	m.seconds.WithLabelValues(tool, code).Observe(time.Since(start).Seconds())
}
