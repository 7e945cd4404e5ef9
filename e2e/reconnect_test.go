package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
)

// reconnectConf is a nats-server configuration with a system account (for
// the server's client kick) and the account dshq's processes use, whose
// user's password the test changes.
const reconnectConf = `listen: 127.0.0.1:-1
jetstream { store_dir: %q }
accounts {
  SYS { users: [ { user: sys, password: sys } ] }
  APP { jetstream: enabled, users: [ { user: trusted, password: %q } ] }
}
system_account: SYS
`

// reconnectNATS is a nats-server whose users the test can change.
type reconnectNATS struct {
	url  string
	srv  *proc
	conf string
	dir  string
	sys  *nats.Conn // the system account: the server's client kick
}

// startReconnectNATS runs a nats-server with reconnectConf, the trusted
// user's password "first".
func startReconnectNATS(t *testing.T) *reconnectNATS {
	t.Helper()
	r := &reconnectNATS{dir: t.TempDir()}
	r.conf = filepath.Join(r.dir, "nats.conf")
	r.setPassword(t, "first")
	r.url, r.srv = runNATS(t, []string{"-c", r.conf}, nil)
	sys, err := nats.Connect(r.url, nats.UserInfo("sys", "sys"), nats.Name("e2e-sys"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	r.sys = sys
	return r
}

// setPassword writes the configuration with the trusted user's password.
func (r *reconnectNATS) setPassword(t *testing.T, password string) {
	t.Helper()
	if err := os.WriteFile(r.conf, fmt.Appendf(nil, reconnectConf, filepath.Join(r.dir, "js"), password), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reload has the server read its configuration again (SIGHUP).
func (r *reconnectNATS) reload(t *testing.T) {
	t.Helper()
	if err := r.srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// trusted connects as the trusted user; the connection ignores the
// violation it gets once the password changes.
func (r *reconnectNATS) trusted(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(r.url, nats.UserInfo("trusted", "first"), nats.Name("e2e-client"), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// refuseAndExpectExits changes the trusted password and reloads the
// server, which closes the connections of procs and refuses them from then
// on: each must exit non-zero, saying why, without printing the password.
func (r *reconnectNATS) refuseAndExpectExits(t *testing.T, procs ...*proc) {
	t.Helper()
	r.setPassword(t, "second")
	r.reload(t)
	for _, p := range procs {
		if err := p.wait(t, time.Minute); err == nil {
			t.Errorf("%s exited 0 after its credentials were refused", p.name)
		}
		if !p.out.contains("nats connection closed") || !p.out.contains("authorization violation") {
			t.Errorf("%s does not say why it exited:\n%s", p.name, p.out.tail(20))
		}
		if p.out.contains("trusted:first@") {
			t.Errorf("%s printed its password:\n%s", p.name, p.out.tail(20))
		}
	}
}

// TestProcessesWhoseConnectionTheServerClosesReconnectOrExit runs
// cmd/projector, cmd/query and `dshq mcp` against a nats-server, has the
// server kick each one's connection (they reconnect and serve), then
// changes their user's password and reloads the server, which closes their
// connections and refuses them from then on: each exits non-zero, saying
// so, instead of staying alive serving nothing.
func TestProcessesWhoseConnectionTheServerClosesReconnectOrExit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 3*time.Minute)
	r := startReconnectNATS(t)
	cred := strings.Replace(r.url, "nats://", "nats://trusted:first@", 1)
	projector := startProc(t, "projector", bins.projector, []string{"--nats-url", r.url, "--user", "trusted", "--password", "first", "--data", filepath.Join(r.dir, "p")}, nil)
	projector.waitLine(t, startTimeout, `"projector running"`, func(l string) bool { return strings.Contains(l, `"projector running"`) })
	qp := startQuery(t, "query", "--nats-url", cred)
	mcp := startMCP(t, r.url)

	nc := r.trusted(t)
	q := query.NewClient(nc)
	publishSession(t, ctx, nc, "s-kick-0") // the MCP caller, not among its results
	publishSession(t, ctx, nc, "s-kick-1")
	waitSessions(t, ctx, q, 2)
	mcp.search(t, "retry budget", "Session search results (1)")

	t.Run("a kicked connection reconnects and serves", func(t *testing.T) {
		for _, name := range []string{"dshq-projector", dshq.QueryService, "dshq-cli"} {
			kick(t, r.sys, name)
		}
		publishSession(t, ctx, nc, "s-kick-2")
		waitSessions(t, ctx, q, 3) // the projector applies it, bin/query answers
		mcp.search(t, "retry budget", "Session search results (2)")
	})
	t.Run("a connection closed for good exits non-zero with the reason", func(t *testing.T) {
		r.refuseAndExpectExits(t, projector, qp, mcp.proc)
	})
}

// TestServeWhoseConnectionTheServerClosesReconnectsOrExits is the same for
// `dshq serve --nats-url` (projector, query and tools in one process).
func TestServeWhoseConnectionTheServerClosesReconnectsOrExits(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 3*time.Minute)
	r := startReconnectNATS(t)
	serve := startProc(t, "dshq serve", bins.dshq, []string{"serve", "--nats-url", r.url, "--user", "trusted", "--home", filepath.Join(r.dir, "home"), "--http", "127.0.0.1:0"},
		[]string{"DSH_NATS_PASSWORD=first"})
	serve.waitLine(t, startTimeout, `"dshq ready"`, func(l string) bool { return strings.Contains(l, `"dshq ready"`) })
	nc := r.trusted(t)
	q := query.NewClient(nc)
	publishSession(t, ctx, nc, "s-kick-1")
	waitSessions(t, ctx, q, 1)

	t.Run("a kicked connection reconnects and serves", func(t *testing.T) {
		kick(t, r.sys, "dshq")
		publishSession(t, ctx, nc, "s-kick-2")
		waitSessions(t, ctx, q, 2)
	})
	t.Run("a connection closed for good exits non-zero with the reason", func(t *testing.T) {
		r.refuseAndExpectExits(t, serve)
	})
}

// publishSession publishes the sample session as id.
func publishSession(t *testing.T, ctx context.Context, nc *nats.Conn, id string) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("../testdata/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.Replace(sc.Text(), `"id":"s-7f3c"`, `"id":"`+id+`"`, 1)
		if _, err := js.Publish(ctx, "dsh.log."+id, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
}

// waitSessions waits until the query service lists n sessions.
func waitSessions(t *testing.T, ctx context.Context, q *query.Client, n int) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("%d sessions", n), func() (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		page, err := q.ListSessions(cctx, dshq.SessionListRequest{})
		if err != nil {
			return false, nil // reconnecting
		}
		return len(page.Items) == n, nil
	})
}

// kick has the server close the connection named name (its client kick,
// through the system account).
func kick(t *testing.T, sys *nats.Conn, name string) {
	t.Helper()
	reply, err := sys.Request("$SYS.REQ.SERVER.PING.CONNZ", []byte(`{"limit":1024}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var connz struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
		Data struct {
			Conns []struct {
				CID  uint64 `json:"cid"`
				Name string `json:"name"`
			} `json:"connections"`
		} `json:"data"`
	}
	if err := json.Unmarshal(reply.Data, &connz); err != nil {
		t.Fatalf("connz: %v: %s", err, reply.Data)
	}
	kicked := 0
	for _, c := range connz.Data.Conns {
		if c.Name != name {
			continue
		}
		r, err := sys.Request("$SYS.REQ.SERVER."+connz.Server.ID+".KICK", fmt.Appendf(nil, `{"cid":%d}`, c.CID), 5*time.Second)
		if err != nil || strings.Contains(string(r.Data), `"error"`) {
			t.Fatalf("kick %s (%d): %v %s", name, c.CID, err, r.Data)
		}
		kicked++
	}
	if kicked == 0 {
		t.Fatalf("no connection named %q to kick", name)
	}
}

// mcpProc is a `dshq mcp` process spoken to over its stdin and stdout.
type mcpProc struct {
	*proc
	next int
}

// startMCP starts `dshq mcp` as session s-kick-0 and initializes it.
func startMCP(t *testing.T, url string) *mcpProc {
	t.Helper()
	p := startProc(t, "dshq mcp", bins.dshq, []string{"mcp", "--nats-url", url, "--user", "trusted"},
		[]string{"DSH_NATS_PASSWORD=first", "DSH_SESSION_ID=s-kick-0"})
	m := &mcpProc{proc: p, next: 2}
	m.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	p.waitLine(t, startTimeout, "the initialize reply", func(l string) bool { return strings.Contains(l, `"id":1`) })
	m.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

func (m *mcpProc) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(m.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// search calls session_search until its answer contains want (the
// process may be reconnecting).
func (m *mcpProc) search(t *testing.T, q, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		id := m.next
		m.next++
		m.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"session_search","arguments":{"query":%q}}}`, id, q))
		line := m.waitLine(t, time.Minute, "a tool answer", func(l string) bool { return strings.Contains(l, fmt.Sprintf(`"id":%d`, id)) })
		if strings.Contains(line, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session_search %q: %s, want %q", q, line, want)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
}

// contains reports whether a line holds s, ignoring case.
func (l *lineLog) contains(s string) bool {
	lines, _ := l.since(0)
	for _, line := range lines {
		if strings.Contains(strings.ToLower(line), strings.ToLower(s)) {
			return true
		}
	}
	return false
}
