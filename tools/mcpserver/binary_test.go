package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools"
)

// TestBinaryEndToEnd builds the dshq binary, runs `dshq serve`, imports the
// example corpus with `dshq import`, and drives `dshq mcp` with the SDK's
// client over the process's stdio. Skipped with -short (it builds the CLI).
func TestBinaryEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the dshq binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "dshq")
	build := exec.Command("go", "build", "-o", bin, "github.com/dshq/dshq/cmd/dshq")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	url := startServe(t, bin, filepath.Join(dir, "home"))

	var files []string
	for id := range corpus {
		files = append(files, filepath.Join("..", "testdata", "corpus", id+".jsonl"))
	}
	imp := exec.Command(bin, append([]string{"--nats-url", url, "--json", "import"}, files...)...)
	var stderr strings.Builder
	imp.Stderr = &stderr
	out, err := imp.Output()
	if err != nil {
		t.Fatalf("import: %v\n%s%s", err, out, stderr.String())
	}
	waitProjected(t, url, string(out))

	cmd := exec.Command(bin, "mcp", "--nats-url", url)
	cmd.Env = append(os.Environ(), "DSH_SESSION_ID=s-caller")
	client := mcp.NewClient(&mcp.Implementation{Name: "binary-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 5 {
		t.Fatalf("list: %v %+v", err, lt)
	}
	for _, c := range calls {
		t.Run("dshq mcp answers "+c.tool, func(t *testing.T) {
			res := callTool(t, cs, c.tool, c.args)
			got := text(t, res)
			if res.IsError || !strings.HasPrefix(got, wantPrefix[c.tool]) {
				t.Fatalf("got:\n%s", got)
			}
		})
	}
	t.Run("dshq mcp hides another workspace", func(t *testing.T) {
		res := callTool(t, cs, tools.NameSessionTrace, `{"session_id":"b-secret"}`)
		if !res.IsError || text(t, res) != "Error: session target is outside the caller workspace" {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("without DSH_SESSION_ID the caller is the workspace: its Claude Code and Codex sessions", func(t *testing.T) {
		workspaceCaller(t, bin, url)
	})
}

// workspaceCaller imports a Claude Code transcript and a Codex rollout
// written in a workspace, and one Claude Code transcript of another, and
// drives dshq mcp without DSH_SESSION_ID, as Claude Code and Codex run it:
// started in the workspace (the default), with --workspace, and through
// dsh-tools (--via-tools). The model sees exactly the workspace's sessions,
// both harnesses', none excluded from search; the single-session tools
// need session_id; another workspace's session is hidden.
func workspaceCaller(t *testing.T, bin, url string) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	q, _ := json.Marshal(ws)
	claude := func(id, cwd, prompt string) string {
		c, _ := json.Marshal(cwd)
		return `{"type":"user","sessionId":"` + id + `","uuid":"u1","parentUuid":null,"cwd":` + string(c) + `,"timestamp":"2026-03-01T10:00:00.000Z","message":{"role":"user","content":"` + prompt + `"}}` + "\n" +
			`{"type":"assistant","sessionId":"` + id + `","uuid":"a1","parentUuid":"u1","cwd":` + string(c) + `,"timestamp":"2026-03-01T10:00:01.000Z","message":{"role":"assistant","model":"claude-test","content":[{"type":"text","text":"The retry budget lives in config/retry.toml"}]}}` + "\n"
	}
	write := func(name, content string) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	paths := []string{
		write("ws-claude-1.jsonl", claude("ws-claude-1", ws, "where is the retry budget configured")),
		write("other-claude-1.jsonl", claude("other-claude-1", "/elsewhere/project", "the retry budget of another team")),
		write("rollout-2026-03-01T11-00-00-ws-codex-1.jsonl",
			`{"timestamp":"2026-03-01T11:00:00.000Z","type":"session_meta","payload":{"id":"ws-codex-1","timestamp":"2026-03-01T11:00:00.000Z","cwd":`+string(q)+`,"originator":"codex_cli_rs","cli_version":"0.1.0"}}`+"\n"+
				`{"timestamp":"2026-03-01T11:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"rename the retry budget flag"}]}}`+"\n"),
	}
	imp := exec.Command(bin, append([]string{"--nats-url", url, "--json", "import"}, paths...)...)
	out, err := imp.Output()
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	waitProjected(t, url, string(out))
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DSH_SESSION_ID=") {
			env = append(env, kv)
		}
	}
	for _, v := range []struct {
		name string
		args []string
		dir  string
	}{
		{"started in the workspace", nil, ws},
		{"--workspace", []string{"--workspace", ws}, files},
		{"--via-tools", []string{"--via-tools"}, ws},
	} {
		t.Run(v.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"mcp", "--nats-url", url}, v.args...)...)
			cmd.Env, cmd.Dir = env, v.dir
			client := mcp.NewClient(&mcp.Implementation{Name: "workspace-test", Version: "1"}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			got := text(t, callTool(t, cs, tools.NameSessionSearch, `{"query":"retry budget"}`))
			if !strings.HasPrefix(got, "Session search results (2):") || !strings.Contains(got, "cc-ws-claude-1") || !strings.Contains(got, "codex-ws-codex-1") || strings.Contains(got, "other-claude-1") {
				t.Errorf("session_search:\n%s", got)
			}
			got = text(t, callTool(t, cs, tools.NameSessionEventSearch, `{"session_id":"codex-ws-codex-1","query":"rename"}`))
			if !strings.Contains(got, "Event search results (1):") || !strings.Contains(got, "user/message") {
				t.Errorf("session_event_search:\n%s", got)
			}
			res := callTool(t, cs, tools.NameSessionTrace, `{}`)
			if got := text(t, res); !res.IsError || got != "Error: invalid arguments: session_id is required: the caller is a workspace, not a session" {
				t.Errorf("session_trace without session_id: %s", got)
			}
			res = callTool(t, cs, tools.NameSessionTrace, `{"session_id":"cc-other-claude-1"}`)
			if got := text(t, res); !res.IsError || got != "Error: session target is outside the caller workspace" {
				t.Errorf("session_trace of another workspace's session: %s", got)
			}
			res = callTool(t, cs, tools.NameSessionEventRead, `{"session_id":"cc-ws-claude-1","seq":1}`)
			if got := text(t, res); res.IsError || !strings.Contains(got, "where is the retry budget configured") {
				t.Errorf("session_event_read:\n%s", got)
			}
		})
	}
}

// wantPrefix is the start of each call's rendering (the imported sessions
// hold no lease, so they are persisted only).
var wantPrefix = map[string]string{
	tools.NameSessionSearch:      "Session search results (1):\n\n1. Session s-7f3c — Find where the retry budget\n   Created: 2026-08-29T10:40:00.000Z\n   Parent: root\n   Availability: persisted\n   Best match: seq 17 | todo/write | log-only",
	tools.NameSessionEventSearch: "Session s-7f3c — Find where the retry budget\n\nEvent search results (4):\n1. seq 17 | todo/write | log-only",
	tools.NameSessionTrace:       "Session s-7f3c — Find where the retry budget\nCreated: 2026-08-29T10:40:00.000Z\nAvailability: persisted\n\nAncestors (nearest first):\n- none (target is a root session)\n\nDescendants:\n- s-9a01 — untitled | 2026-08-29T11:00:00.000Z | persisted\n  - [outside workspace subtree]",
	tools.NameSessionEventTrace:  "Session s-7f3c — Find where the retry budget\nTarget: seq 1 | user/message | shadowed | 2026-08-29T10:40:00.101Z\nReplaced by: 15",
	tools.NameSessionEventRead:   "Session s-7f3c — Find where the retry budget\nTarget event seq 7:\n```json\n{\n  \"type\": \"tool/result\",",
}

// waitProjected waits until the projection has applied the generation the
// import reported in its JSON summary.
func waitProjected(t *testing.T, url, importOut string) {
	t.Helper()
	var sum struct {
		Generation uint64 `json:"generation"`
	}
	if err := json.Unmarshal([]byte(importOut), &sum); err != nil || sum.Generation == 0 {
		t.Fatalf("no generation in the import summary (%v):\n%s", err, importOut)
	}
	gen := sum.Generation
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if _, err := query.NewClient(nc).ListSessions(ctx, dshq.SessionListRequest{},
		query.WithMinGeneration(gen), query.WithTimeoutMs(dshq.MaxTimeoutMs)); err != nil {
		t.Fatalf("projection did not reach generation %d: %v", gen, err)
	}
}

// startServe runs `dshq serve` on a free loopback port until the test ends
// and returns its NATS URL once it reports ready.
func startServe(t *testing.T, bin, home string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	serve := exec.Command(bin, "serve", "--home", home, "--listen", addr, "--http", "127.0.0.1:0", "--relaxed-sync", "--log-level", "info")
	out, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	serve.Stderr = serve.Stdout
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "dshq ready") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
	}()
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		<-drained
		_ = serve.Wait()
	})
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("dshq serve exited before it was ready")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("dshq serve did not become ready")
	}
	return "nats://" + addr
}
