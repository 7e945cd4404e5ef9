package toolservice_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := start(t, toolservice.WithRegisterer(reg))
	count := func(tool, code string) float64 { return counterValue(t, reg, "dshq_tools_requests_total", tool, code) }
	if n := series(t, reg, "dshq_tools_requests_total"); n != len(tools.Definitions()) || count(tools.NameSessionSearch, "OK") != 0 {
		t.Fatalf("before any call: %d series, want one OK series per tool at 0", n)
	}
	e.request(t, tools.NameSessionTrace, "", `{}`)
	e.request(t, tools.NameSessionTrace, "me", `{}`)
	if n := count(tools.NameSessionTrace, string(dshq.CodeToolMissingAgent)); n != 1 {
		t.Errorf("missing-agent calls: %v", n)
	}
	if n := count(tools.NameSessionTrace, "OK"); n != 1 {
		t.Errorf("answered calls: %v", n)
	}
	if n := series(t, reg, "dshq_tools_request_seconds"); n != 2 {
		t.Errorf("latency series: %d", n)
	}
}

// counterValue returns the value of counter name with labels tool and code
// (-1 when there is no such series).
func counterValue(t *testing.T, reg *prometheus.Registry, name, tool, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["tool"] == tool && l["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}

// series counts the series of metric name.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

// A service started again on the same registry (cmd/query serves again on
// a new connection after the server closed the last one) counts on in the
// collectors the first one registered.
func TestMetricsCountOnAfterARestart(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := start(t, toolservice.WithRegisterer(reg))
	e.request(t, tools.NameSessionTrace, "me", `{}`)
	stop, err := toolservice.Serve(context.Background(), e.nc, e.tools, toolservice.WithRegisterer(reg), toolservice.WithSpillBucket("DSH_SPILL_AGAIN"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	for range 20 { // both instances answer in the queue group: either counts in reg
		e.request(t, tools.NameSessionTrace, "me", `{}`)
	}
	if n := counterValue(t, reg, "dshq_tools_requests_total", tools.NameSessionTrace, "OK"); n != 21 {
		t.Fatalf("OK calls counted %v, want 21 (the restarted service's calls lost)", n)
	}
}
