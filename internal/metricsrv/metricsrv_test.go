package metricsrv

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServe(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	url, stop, err := Serve("127.0.0.1:0", NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/metrics") {
		t.Fatalf("url %q", url)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "go_goroutines") || !strings.Contains(string(body), "process_") {
		t.Fatalf("status %d, body:\n%s", resp.StatusCode, body)
	}
	http.DefaultClient.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := http.Get(url); err == nil {
		t.Fatal("still serving after stop")
	}
	if _, _, err := Serve("nonsense", NewRegistry(), log); err == nil || !strings.Contains(err.Error(), "metrics listener") {
		t.Fatalf("bad address: %v", err)
	}
}

func TestHandlerAnswersOnlyLoopbackHostsOnALoopbackBind(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") })
	for _, c := range []struct {
		name string
		bind string
		host string
		want int
	}{
		{"a loopback bind answers localhost", "127.0.0.1", "localhost:9464", http.StatusOK},
		{"a loopback bind answers its address", "127.0.0.1", "127.0.0.1:9464", http.StatusOK},
		{"a loopback bind answers IPv6 loopback", "::1", "[::1]:9464", http.StatusOK},
		{"a loopback bind refuses another host (DNS rebinding)", "127.0.0.1", "rebound.example:9464", http.StatusMisdirectedRequest},
		{"a loopback bind refuses another address", "127.0.0.1", "10.1.2.3:9464", http.StatusMisdirectedRequest},
		{"an open bind is for scrapers elsewhere: any host", "0.0.0.0", "metrics.internal:9464", http.StatusOK},
		{"an interface's bind answers any host", "10.1.2.3", "node-1:9464", http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := Handler(&net.TCPAddr{IP: net.ParseIP(c.bind), Port: 9464}, ok)
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Host = c.host
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Errorf("Host %s: %d, want %d", c.host, rec.Code, c.want)
			}
		})
	}
}
