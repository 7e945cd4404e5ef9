package engine_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

func TestRequestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := newPipe(t, func(c *pipeConfig) { c.serviceOpts = append(c.serviceOpts, query.WithRegisterer(reg)) })
	ctx := ctxT(t)
	if _, err := p.client.ListSessions(ctx, dshq.SessionListRequest{}); err != nil {
		t.Fatal(err)
	}
	_, _ = p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "nope"})
	want := map[[2]string]float64{
		{wire.EndpointSessionsList, "OK"}:                              1,
		{wire.EndpointSessionsTrace, string(dshq.CodeSessionNotFound)}: 1,
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[[2]string]float64{}
	histograms := 0
	for _, f := range families {
		if f.GetName() == "dshq_query_request_seconds" {
			histograms += len(f.GetMetric())
		}
		if f.GetName() != "dshq_query_requests_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			var ep, code string
			for _, l := range mt.GetLabel() {
				switch l.GetName() {
				case "endpoint":
					ep = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			got[[2]string{ep, code}] += mt.GetCounter().GetValue()
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("requests_total%v = %v; want %v (all: %v)", k, got[k], v, got)
		}
	}
	if histograms != 2 {
		t.Fatalf("%d latency series; want 2", histograms)
	}
}
