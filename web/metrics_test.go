package web

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The UI counts and times its requests per route and status, in the
// format of the query service's request metrics.
func TestRequestMetricsCountEachRouteAndStatus(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newStack(t, WithMetrics(reg))
	s.waitGeneration(t, s.importFile(t, "sample.jsonl"))
	s.page(t, "/")
	s.page(t, "/")
	s.page(t, "/s/s-7f3c")
	if code, _, _ := s.get(t, "/no/such/page"); code != http.StatusNotFound {
		t.Fatalf("a missing page: %d", code)
	}
	// A live stream flows through the counting writer (its flushes reach
	// the connection), and is counted once it ends.
	res, err := http.Get(s.srv.URL + "/live?after=0")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() && sc.Text() != "event: status" {
	}
	if sc.Text() != "event: status" {
		t.Fatalf("the live stream sent no status: %v", sc.Err())
	}
	res.Body.Close()
	// A foreign Host is refused before routing, and counted under its route.
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Host = "rebound.example"
	s.ui.ServeHTTP(httptest.NewRecorder(), req)
	// A page gone before its answer is a 499, not a 200 or a 5xx.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req = httptest.NewRequest(http.MethodGet, "/live?after=0", nil).WithContext(ctx)
	req.Host = "127.0.0.1"
	s.ui.ServeHTTP(httptest.NewRecorder(), req)

	// The stream's end is counted and timed when its handler returns,
	// after the client went: wait for both.
	var got map[[2]string]float64
	var timed map[[2]string]uint64
	for {
		requests, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got, timed = requestSeries(requests)
		if live := [2]string{"GET /live", "200"}; got[live] > 0 && timed[live] > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	want := map[[2]string]float64{
		{"GET /{$}", "200"}:    2,
		{"GET /s/{id}", "200"}: 1,
		{"/", "404"}:           1,
		{"GET /{$}", "421"}:    1,
		{"GET /live", "499"}:   1,
		{"GET /live", "200"}:   1,
	}
	for k, n := range want {
		if got[k] != n || timed[k] != uint64(n) {
			t.Errorf("route %q code %s: counted %v, timed %d, want %v", k[0], k[1], got[k], timed[k], n)
		}
	}
	if n := len(got); n != len(want) {
		t.Errorf("%d series, want %d: %v", n, len(want), got)
	}
}

// requestSeries returns the UI's request counts and timed samples by
// [route, code]. The two are separate metrics, recorded one after the
// other (microhost.Metrics.Observe), so a gather between the two records
// has the count without the time: a loaded no-../shared make test saw it.
func requestSeries(mfs []*dto.MetricFamily) (counted map[[2]string]float64, timed map[[2]string]uint64) {
	counted, timed = map[[2]string]float64{}, map[[2]string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var key [2]string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					key[0] = l.GetValue()
				case "code":
					key[1] = l.GetValue()
				}
			}
			switch mf.GetName() {
			case "dshq_web_requests_total":
				counted[key] = m.GetCounter().GetValue()
			case "dshq_web_request_seconds":
				timed[key] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return counted, timed
}
