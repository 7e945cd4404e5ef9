package metricsrv

import (
	"io"
	"log/slog"
	"net/http"
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
