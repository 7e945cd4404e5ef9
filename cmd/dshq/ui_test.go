package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq/web"
)

// checkUI fails unless url serves the web UI's session list.
func checkUI(t *testing.T, url string) {
	t.Helper()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("UI URL %q", url)
	}
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Security-Policy") != web.ContentSecurityPolicy || !bytes.Contains(body, []byte("<h1>Sessions</h1>")) {
		t.Fatalf("GET %s: %d\n%s", url, res.StatusCode, body)
	}
}

// checkUIMetrics scrapes the metrics endpoint at url after checkUI: it
// counts the UI's answer of its first page, and refuses a request that
// names another host (421, as the UI does).
func checkUIMetrics(t *testing.T, url string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`dshq_web_requests_total{code="200",route="GET /{$}"} 1`, `dshq_web_request_seconds_count{code="200",route="GET /{$}"} 1`} {
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d, no %s in\n%s", url, res.StatusCode, want, body)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Host = "rebound.example:80"
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET %s with Host %s: %d", url, req.Host, res.StatusCode)
	}
}

func TestUI(t *testing.T) {
	t.Run("ui serves the UI of a running dshq and stops when its context ends", func(t *testing.T) {
		p := startPipeline(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &lineWatch{want: "\n", seen: make(chan struct{})}
		var stderr bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- runContext(ctx, []string{"ui", "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--json", "--log-level", "warn"},
				func(k string) string { return p.env[k] }, nil, out, &stderr)
		}()
		select {
		case <-out.seen:
		case code := <-done:
			t.Fatalf("ui exited %d: %s", code, stderr.String())
		case <-time.After(60 * time.Second):
			t.Fatal("ui did not become ready")
		}
		var ready struct{ UIURL, MetricsURL string }
		if err := json.Unmarshal([]byte(out.String()), &ready); err != nil {
			t.Fatalf("ready line %q: %v", out.String(), err)
		}
		checkUI(t, ready.UIURL)
		checkUIMetrics(t, ready.MetricsURL)
		cancel()
		if code := <-done; code != 0 || stderr.Len() != 0 {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
	})
	t.Run("a non-loopback address without a token is refused with one line", func(t *testing.T) {
		p := startPipeline(t)
		for _, args := range [][]string{{"ui", "--http", "0.0.0.0:0"}, {"serve", "--http", "0.0.0.0:0", "--listen", "127.0.0.1:0", "--home", t.TempDir()}} {
			r := runCLI(t, p.env, "", args...)
			last := strings.TrimSpace(r.stderr)
			last = last[strings.LastIndex(last, "\n")+1:]
			if r.code != 1 || !strings.HasPrefix(last, "dshq: web UI: a non-loopback address needs a token") {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
	})
	t.Run("a token lets the UI listen off loopback", func(t *testing.T) {
		p := startPipeline(t)
		env := map[string]string{"DSH_NATS_URL": p.url, "DSH_HTTP_TOKEN": "t0ken"}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &lineWatch{want: "\n", seen: make(chan struct{})}
		done := make(chan int, 1)
		go func() {
			done <- runContext(ctx, []string{"ui", "--http", "0.0.0.0:0", "--json"}, func(k string) string { return env[k] }, nil, out, io.Discard)
		}()
		select {
		case <-out.seen:
		case code := <-done:
			t.Fatalf("ui exited %d", code)
		case <-time.After(60 * time.Second):
			t.Fatal("ui did not become ready")
		}
		var ready struct {
			UIURL  string
			UIURLs []string
		}
		if err := json.Unmarshal([]byte(out.String()), &ready); err != nil {
			t.Fatal(err)
		}
		// The URL to open, not the unspecified address it is bound to.
		url := ready.UIURL
		if !strings.HasPrefix(url, "http://localhost:") || len(ready.UIURLs) == 0 || ready.UIURLs[0] != url {
			t.Errorf("an open bind prints %q (%q)", url, ready.UIURLs)
		}
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("without the token: %d", res.StatusCode)
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer t0ken")
		res, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("with the token: %d", res.StatusCode)
		}
		cancel()
		<-done
	})
}
