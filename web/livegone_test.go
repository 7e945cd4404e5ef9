package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dshq/dshq/internal/testenv"
)

// A page closed while its live stream is being set up (the issue: a WARN
// with status 502) is a client gone, not a failure of the server: nothing
// is logged at WARN and no 5xx is answered.
func TestAPageClosedDuringTheLiveHandshakeIsNoServerError(t *testing.T) {
	var logs testenv.Buffer
	s := newStack(t, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	s.waitGeneration(t, s.importFile(t, "sample.jsonl"))
	for _, path := range []string{"/s/s-7f3c/live?after=0", "/live?after=0"} {
		t.Run(path, func(t *testing.T) {
			// The page is gone before the stream's subscriptions answer.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
			req.Host = "127.0.0.1"
			rec := httptest.NewRecorder()
			before := len(logs.String())
			s.ui.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Errorf("answered %d", rec.Code)
			}
			if l := logs.String()[before:]; strings.Contains(l, "level=WARN") {
				t.Errorf("logged:\n%s", l)
			}
		})
	}
}
