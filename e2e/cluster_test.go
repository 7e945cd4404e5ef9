package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/query"
)

// The deployment example's credentials, as the tests set them: the trusted
// user and the tenants teamA and teamB.
const (
	trustedPassword = "trusted-secret"
	tenantPassword  = "tenant-secret"
)

// tenants are the deployment example's tenants.
var tenants = []string{"teamA", "teamB"}

// tenantOf is the tenant of the i-th simulated harness: they alternate.
func tenantOf(i int) string { return tenants[i%len(tenants)] }

// simAuth are harnesssim's arguments to write as the tenant of sim i.
func simAuth(url string, i int) []string {
	return []string{"--nats-url", url, "--user", tenantOf(i), "--password", tenantPassword, "--tenant", tenantOf(i)}
}

// deployConfig is the deployment example the tests run.
var deployConfig = filepath.Join("..", "deploy", "nats-server.conf")

// startTimeout bounds the start of a process (a cold start of dshq opens
// bbolt and Bleve and provisions the streams).
const startTimeout = 60 * time.Second

var listenRe = regexp.MustCompile(`Listening for client connections on (\S+:\d+)`)

var storeDirRe = regexp.MustCompile(`(?m)^(\s*store_dir:\s*).*$`)

// startNATS runs nats-server with the deployment example's configuration
// (only its store_dir moved to a temp dir) on a random port, and returns its
// URL.
func startNATS(t testing.TB) (string, *proc) {
	t.Helper()
	conf, err := os.ReadFile(deployConfig)
	if err != nil {
		t.Fatal(err)
	}
	if !storeDirRe.Match(conf) {
		t.Fatalf("%s has no store_dir line", deployConfig)
	}
	dir := t.TempDir()
	conf = storeDirRe.ReplaceAll(conf, []byte(fmt.Sprintf("${1}%q", filepath.Join(dir, "jetstream"))))
	path := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	return runNATS(t, []string{"-c", path, "-p", "-1"},
		[]string{"DSH_TRUSTED_PASSWORD=" + trustedPassword, "DSH_TEAMA_PASSWORD=" + tenantPassword, "DSH_TEAMB_PASSWORD=" + tenantPassword})
}

// startPlainNATS runs nats-server with JetStream and no authorization on a
// random loopback port, and returns its URL.
func startPlainNATS(t testing.TB) (string, *proc) {
	t.Helper()
	return runNATS(t, []string{"-js", "-sd", t.TempDir(), "-a", "127.0.0.1", "-p", "-1"}, nil)
}

func runNATS(t testing.TB, args, env []string) (string, *proc) {
	t.Helper()
	p := startProc(t, "nats-server", bins.natsServer, args, env)
	line := p.waitLine(t, startTimeout, "the client listener", listenRe.MatchString)
	addr := listenRe.FindStringSubmatch(line)[1]
	p.waitLine(t, startTimeout, "readiness", func(l string) bool { return strings.Contains(l, "Server is ready") })
	return "nats://" + addr, p
}

// serveArgs are the arguments of `dshq serve` joining the deployment at url
// as the trusted user (its password comes from DSH_NATS_PASSWORD, see
// startServe).
func serveArgs(url, home string) []string {
	return []string{"serve", "--nats-url", url, "--user", "trusted", "--home", home, "--http", "127.0.0.1:0", "--log-level", "info"}
}

// startServe runs the dshq binary with args (and the trusted password in
// DSH_NATS_PASSWORD) and waits for "dshq ready"; it returns the process and
// the ready line's fields.
func startServe(t testing.TB, name string, args []string) (*proc, map[string]any) {
	t.Helper()
	if !slices.Contains(args, "--http") {
		// Without it serve binds the web UI's default port, which a
		// running `make run` or another test holds: tests bind free ports.
		t.Fatalf("%s: dshq serve without --http binds the UI's default port", name)
	}
	p := startProc(t, name, bins.dshq, args, []string{"DSH_NATS_PASSWORD=" + trustedPassword})
	line := p.waitLine(t, startTimeout, `"dshq ready"`, func(l string) bool { return strings.Contains(l, `"dshq ready"`) })
	var fields map[string]any
	if err := json.Unmarshal([]byte(line), &fields); err != nil {
		t.Fatalf("ready line %q: %v", line, err)
	}
	return p, fields
}

// connectTrusted connects as the trusted user.
func connectTrusted(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.UserInfo("trusted", trustedPassword), nats.Name("e2e-trusted"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// connectTenant connects as a tenant's user with its private inbox; every
// asynchronous error the server reports goes to errs (never blocking).
func connectTenant(t testing.TB, url, tenant string, errs chan<- error) *nats.Conn {
	t.Helper()
	opts := []nats.Option{nats.UserInfo(tenant, tenantPassword), nats.CustomInboxPrefix(bus.TenantInboxPrefix(tenant)),
		nats.Name("e2e-" + tenant)}
	if errs != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// streamLastSeq returns the last sequence of the session log stream: the
// generation a projection has reached once it has applied everything.
func streamLastSeq(t testing.TB, nc *nats.Conn) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, dshq.SessionStream)
	if err != nil {
		t.Fatalf("stream %s: %v", dshq.SessionStream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// waitCaughtUp waits until the projection answering q has applied gen.
func waitCaughtUp(t testing.TB, q *query.Client, gen uint64) {
	t.Helper()
	waitFor(t, 90*time.Second, fmt.Sprintf("the projection to reach generation %d", gen), func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, err := q.ListSessions(ctx, dshqListAll, query.WithMinGeneration(gen), query.WithTimeoutMs(10000))
		return err == nil, err
	})
}

// dshqListAll asks for every session in one page.
var dshqListAll = dshq.SessionListRequest{Limit: dshq.MaxListLimit}

// dshqSearch asks sessions.search for phrase, up to the maximum page.
func dshqSearch(phrase string) dshq.SessionSearchRequest {
	return dshq.SessionSearchRequest{Query: phrase, Limit: dshq.MaxSearchLimit}
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
