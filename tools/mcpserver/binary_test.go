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
	serve := exec.Command(bin, "serve", "--home", home, "--listen", addr, "--relaxed-sync", "--log-level", "info")
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
