package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// natscliVersion is the nats CLI the interop test builds (never a module of
// ours: it is installed outside the module).
const natscliVersion = "github.com/nats-io/natscli/nats@v0.5.0"

// natscliEnv names a prebuilt nats CLI to use instead of building one.
const natscliEnv = "DSHQ_TEST_NATS_CLI"

// buildNatsCLI returns the nats CLI of natscliVersion. It is built once per
// machine into the user cache directory (dshq-test/natscli@<version>/nats)
// with the shared module and build caches, so later runs reuse it without
// invoking the go command; $DSHQ_TEST_NATS_CLI names a prebuilt binary
// instead. With -short the test is skipped; otherwise a failed build (no
// go command, module proxy unreachable) fails the test, so CI never skips
// it silently.
func buildNatsCLI(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the nats CLI; skipped with -short")
	}
	if bin := os.Getenv(natscliEnv); bin != "" {
		return bin
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "dshq-test", "natscli@"+natscliVersion[strings.LastIndex(natscliVersion, "@")+1:])
	bin := filepath.Join(dir, "nats")
	if exec.Command(bin, "--version").Run() == nil {
		return bin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build %s (set %s to a prebuilt nats CLI, or run with -short): %v", natscliVersion, natscliEnv, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Install into a private directory and rename, so concurrent test
	// processes never see a half-written binary.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, goBin, "install", natscliVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cannot build %s (is the module proxy reachable? set %s to a prebuilt nats CLI, or run with -short): %v\n%s",
			natscliVersion, natscliEnv, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "nats"), bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %v", natscliVersion, time.Since(start).Round(time.Millisecond))
	return bin
}

func TestNatsCLIInterop(t *testing.T) {
	cli := buildNatsCLI(t)
	p := newPipe(t, func(c *pipeConfig) { c.listen = true })
	p.session("cli-session", hdr{createdAt: 42, cwd: "/w"})
	p.sync()
	url := p.env.URL()
	nats := func(t *testing.T, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, cli, append([]string{"--server", url, "--timeout", "10s"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "NATS_CONTEXT=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nats %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	t.Run("nats micro ls lists the query service", func(t *testing.T) {
		out := nats(t, "micro", "ls", "--json")
		var infos []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		}
		if err := json.Unmarshal([]byte(out), &infos); err != nil {
			t.Fatalf("micro ls output: %v\n%s", err, out)
		}
		found := map[string]bool{}
		for _, i := range infos {
			found[i.Name] = true
			if i.Version != dshq.ServiceVersion {
				t.Fatalf("%s announces version %q", i.Name, i.Version)
			}
		}
		if !found[dshq.QueryService] || !found[dshq.ShardService] {
			t.Fatalf("services %+v; want %s and %s", infos, dshq.QueryService, dshq.ShardService)
		}
	})
	t.Run("nats micro info shows every endpoint subject", func(t *testing.T) {
		out := nats(t, "micro", "info", dshq.QueryService, "--json")
		for _, ep := range wire.Endpoints {
			if !strings.Contains(out, `"`+dshq.QuerySubjectPrefix+"."+ep+`"`) {
				t.Fatalf("endpoint %s missing from:\n%s", ep, out)
			}
		}
	})
	t.Run("nats request gets a session list", func(t *testing.T) {
		out := nats(t, "request", "--raw", dshq.QuerySubjectPrefix+"."+wire.EndpointSessionsList, `{"limit":5}`)
		var page dshq.SessionPage
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &page); err != nil {
			t.Fatalf("reply: %v\n%s", err, out)
		}
		if len(page.Items) != 1 || page.Items[0].Header.ID != "cli-session" || page.Generation == 0 {
			t.Fatalf("page %+v", page)
		}
	})
	t.Run("nats request shows the error headers of a failure", func(t *testing.T) {
		out := nats(t, "request", dshq.QuerySubjectPrefix+"."+wire.EndpointSessionsTrace, `{"sessionId":"nope"}`)
		if !strings.Contains(out, "Nats-Service-Error-Code: SESSION_QUERY_SESSION_NOT_FOUND") ||
			!strings.Contains(out, `{"error":{"code":"SESSION_QUERY_SESSION_NOT_FOUND","message":"session \"nope\" was not found"}}`) {
			t.Fatalf("output:\n%s", out)
		}
	})
	t.Run("nats micro info counts the failure in the endpoint's statistics", func(t *testing.T) {
		const title = "sessions_trace Endpoint Statistics"
		out := nats(t, "micro", "info", dshq.QueryService)
		i := strings.Index(out, title)
		if i < 0 {
			t.Fatalf("no sessions_trace statistics in:\n%s", out)
		}
		section := out[i+len(title):]
		if j := strings.Index(section, " Endpoint Statistics"); j >= 0 {
			section = section[:j]
		}
		if !strings.Contains(section, "Errors: 1\n") || !strings.Contains(section, "Requests: 1 ") {
			t.Fatalf("sessions_trace standard statistics do not count the failure:\n%s", section)
		}
		if !strings.Contains(section, "Endpoint Specific Statistics") || !strings.Contains(section, `"num_errors": 1`) ||
			!strings.Contains(section, `"SESSION_QUERY_SESSION_NOT_FOUND": 1`) {
			t.Fatalf("sessions_trace statistics do not count the failure:\n%s", section)
		}
	})
}
