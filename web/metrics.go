package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq/internal/microhost"
)

// WithMetrics counts and times the UI's requests on reg, in the format of
// the query and tools services' request metrics:
// dshq_web_requests_total{route,code} and dshq_web_request_seconds{route,code},
// route being the page's pattern ("GET /s/{id}") and code the HTTP status
// (499 for a page that left before an answer). A live stream's time is
// how long it was followed.
func WithMetrics(reg prometheus.Registerer) Option { return func(s *Server) { s.reg = reg } }

// webMetrics names the UI's request metrics.
var webMetrics = microhost.MetricsConfig{
	Prefix:       "dshq_web",
	Label:        "route",
	RequestsHelp: "Web UI requests answered, by route and HTTP status.",
	SecondsHelp:  "Time to answer a web UI request (a live stream: how long it was followed), by route and HTTP status.",
}

// statusWriter remembers the status of its answer. Unwrap keeps
// http.ResponseController (the live streams' flushes and deadlines) working.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// clientClosedRequest is the status recorded for a request whose client
// went away before anything was answered (nginx's 499).
const clientClosedRequest = 499

// observe records one request that began at start.
func (s *Server) observe(w *statusWriter, r *http.Request, start time.Time) {
	route := r.Pattern
	if route == "" { // refused before routing (authorize)
		_, route = s.mux.Handler(r)
	}
	code := w.status
	if code == 0 {
		code = http.StatusOK
		if r.Context().Err() != nil {
			code = clientClosedRequest
		}
	}
	s.metrics.Observe(route, strconv.Itoa(code), time.Since(start))
}
