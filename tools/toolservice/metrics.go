package toolservice

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
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
type metrics struct{ m *microhost.Metrics }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m, err := microhost.NewMetrics(reg, microhost.MetricsConfig{
		Prefix: "dshq_tools", Label: "tool",
		RequestsHelp: "Model-facing tool calls answered by dsh-tools, by tool and code.",
		SecondsHelp:  "Model-facing tool call latency in dsh-tools, by tool and code.",
	})
	if err != nil || m == nil {
		return nil, err
	}
	for _, d := range tools.Definitions() {
		m.Touch(d.Name)
	}
	return &metrics{m}, nil
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
	m.m.Observe(tool, code, time.Since(start))
}
