package microhost

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requests returns the exported requests_total series of reg: code of key
// → count.
func requests(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "dshq_test_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				if l.GetName() != "service" {
					key += l.GetValue() + " "
				}
			}
			out[key] = m.GetCounter().GetValue()
		}
	}
	return out
}

// A service started again on a new connection registers its metrics again:
// the second registration counts on in the first's collectors, which the
// registry exports.
func TestMetricsOfARestartedServiceCountOn(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := MetricsConfig{Prefix: "dshq_test", Label: "endpoint", RequestsHelp: "r", SecondsHelp: "s",
		ConstLabels: prometheus.Labels{"service": "x"}}
	first, err := NewMetrics(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	first.Observe("a", "OK", time.Millisecond)
	again, err := NewMetrics(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	again.Observe("a", "OK", time.Millisecond)
	again.Touch("b")
	if got := requests(t, reg); len(got) != 2 || got["OK a "] != 2 || got["OK b "] != 0 {
		t.Fatalf("exported %v; want a's 2 requests and b's OK series at 0", got)
	}
	var none *Metrics
	none.Observe("a", "OK", time.Millisecond) // no registerer: records nothing
}
