package engine_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
	"github.com/dshq/dshq/query/wire"
)

// microStats asks the micro STATS verb of service and returns each
// endpoint's standard entry and data by endpoint name.
func microStats(t *testing.T, p *pipe, service string) (map[string]*micro.EndpointStats, map[string]microhost.EndpointData) {
	t.Helper()
	subj, err := micro.ControlSubject(micro.StatsVerb, service, "")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := p.nc.Request(subj, nil, 10*time.Second)
	if err != nil {
		t.Fatalf("stats of %s: %v", service, err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatalf("stats of %s: %v\n%s", service, err, msg.Data)
	}
	std, data := map[string]*micro.EndpointStats{}, map[string]microhost.EndpointData{}
	for _, e := range st.Endpoints {
		var d microhost.EndpointData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("data of %s: %v\n%s", e.Name, err, e.Data)
		}
		std[e.Name], data[e.Name] = e, d
	}
	return std, data
}

func TestMicroStatsCountFailures(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("s", hdr{createdAt: 1})
	p.sync()
	if _, err := p.client.ListSessions(ctx, dshq.SessionListRequest{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "nope"})
		wantErr(t, err, dshq.CodeSessionNotFound, `session "nope" was not found`)
	}
	_, err := p.client.Raw(ctx, wire.EndpointSessionsTrace, []byte(`{"sessionId":"s","extra":1}`))
	wantErr(t, err, dshq.CodeInvalidRequest, "")

	for _, svc := range []string{dshq.QueryService, dshq.ShardService} {
		t.Run(svc+" counts each endpoint's failures by code", func(t *testing.T) {
			std, st := microStats(t, p, svc)
			trace := st["sessions_trace"]
			wantTrace := 3
			byCode := map[string]int{string(dshq.CodeSessionNotFound): 2, string(dshq.CodeInvalidRequest): 1}
			if svc == dshq.ShardService {
				// The query service refuses the malformed request itself.
				wantTrace = 2
				delete(byCode, string(dshq.CodeInvalidRequest))
			}
			if trace.Answered != wantTrace || trace.Errors != wantTrace || len(trace.ErrorsByCode) != len(byCode) {
				t.Fatalf("sessions_trace data %+v; want %d answered, all failed", trace, wantTrace)
			}
			for code, n := range byCode {
				if trace.ErrorsByCode[code] != n {
					t.Fatalf("sessions_trace errors by code %v; want %v", trace.ErrorsByCode, byCode)
				}
			}
			if trace.LastError == "" || trace.ProcessingTime <= 0 || trace.AverageProcessingTime <= 0 {
				t.Fatalf("sessions_trace data %+v: want a last error and processing times", trace)
			}
			list := st["sessions_list"]
			if list.Answered != 1 || list.Errors != 0 || list.LastError != "" {
				t.Fatalf("sessions_list data %+v; want one success", list)
			}
			// The standard fields (nats micro info's Requests, Errors and
			// Processing Time) say the same.
			if s := std["sessions_trace"]; s.NumRequests != wantTrace || s.NumErrors != wantTrace || s.ProcessingTime != trace.ProcessingTime ||
				s.AverageProcessingTime != trace.AverageProcessingTime || s.LastError == "" {
				t.Fatalf("sessions_trace standard stats %+v; data %+v", s, trace)
			}
			if s := std["sessions_list"]; s.NumRequests != 1 || s.NumErrors != 0 {
				t.Fatalf("sessions_list standard stats %+v", s)
			}
		})
	}
}
