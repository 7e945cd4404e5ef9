package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/mcpserver"
	"github.com/dshq/dshq/tools/toolservice"
	"github.com/dshq/dshq/tools/toolstest"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

var corpus = map[string]bool{"s-7f3c": true, "s-9a01": false, "s-b77c": false, "s-a-grand": false, "b-secret": false, "s-caller": true}

func startPipeline(t *testing.T) *toolstest.Pipeline {
	t.Helper()
	var logs []toolstest.Log
	for id, live := range corpus {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", id+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, toolstest.Log{JSONL: b, Live: live})
	}
	return toolstest.StartPipeline(t, logs)
}

// connect runs the MCP server on in-process pipes and returns an SDK client
// session connected to it. The server goroutine ends when the client closes.
func connect(t *testing.T, cfg mcpserver.Config) *mcp.ClientSession {
	t.Helper()
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Run(context.Background(), serverIn, serverOut, cfg)
		serverOut.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = clientOut.Close()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return cs
}

// calls are one call of each tool.
var calls = []struct{ tool, args string }{
	{tools.NameSessionSearch, `{"query":"retry budget"}`},
	{tools.NameSessionEventSearch, `{"session_id":"s-7f3c","query":"retry budget"}`},
	{tools.NameSessionTrace, `{"session_id":"s-7f3c"}`},
	{tools.NameSessionEventTrace, `{"session_id":"s-7f3c","seq":1}`},
	{tools.NameSessionEventRead, `{"session_id":"s-7f3c","seq":7,"before":1,"after":1}`},
}

func callTool(t *testing.T, cs *mcp.ClientSession, tool, args string) *mcp.CallToolResult {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: a})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content = %+v", res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T", res.Content[0])
	}
	return tc.Text
}

func TestMCPEndToEnd(t *testing.T) {
	p := startPipeline(t)
	direct, err := tools.New(tools.FromQueryClient(p.Client))
	if err != nil {
		t.Fatal(err)
	}
	stopTools, err := toolservice.Serve(context.Background(), p.Conn, direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopTools() })

	for _, mode := range []struct {
		name string
		via  bool
	}{{"over the query API", false}, {"through dsh-tools", true}} {
		t.Run(mode.name, func(t *testing.T) {
			cs := connect(t, mcpserver.Config{Conn: p.Conn, SessionID: "s-caller", ViaToolService: mode.via})
			t.Run("the client lists the five tools with their schemas", func(t *testing.T) {
				lt, err := cs.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				defs := map[string]tools.Definition{}
				for _, d := range tools.Definitions() {
					defs[d.Name] = d
				}
				if len(lt.Tools) != len(defs) {
					t.Fatalf("tools = %d", len(lt.Tools))
				}
				for _, tool := range lt.Tools {
					i := tool.Name
					got, _ := json.Marshal(tool.InputSchema)
					var want, have any
					_ = json.Unmarshal(defs[i].InputSchema, &want)
					_ = json.Unmarshal(got, &have)
					wb, _ := json.Marshal(want)
					hb, _ := json.Marshal(have)
					if _, ok := defs[i]; !ok || tool.Description != defs[i].Description || string(wb) != string(hb) {
						t.Fatalf("tool %s: %s", tool.Name, got)
					}
				}
			})
			for _, c := range calls {
				t.Run("calling "+c.tool+" returns its full rendering", func(t *testing.T) {
					res := callTool(t, cs, c.tool, c.args)
					want, err := direct.Call(context.Background(), tools.AsSession("s-caller"), c.tool, []byte(c.args))
					if err != nil {
						t.Fatal(err)
					}
					if res.IsError || text(t, res) != want.Text {
						t.Fatalf("got (isError=%v):\n%s\nwant:\n%s", res.IsError, text(t, res), want.Text)
					}
				})
			}
			t.Run("a failing call is a tool error with the safe text and code", func(t *testing.T) {
				res := callTool(t, cs, tools.NameSessionTrace, `{"session_id":"b-secret"}`)
				if !res.IsError || text(t, res) != "Error: session target is outside the caller workspace" {
					t.Fatalf("got %+v", res)
				}
				sc, _ := json.Marshal(res.StructuredContent)
				if !strings.Contains(string(sc), "SESSION_QUERY_TOOL_UNAUTHORIZED") {
					t.Fatalf("structured content %s", sc)
				}
			})
		})
	}
	t.Run("with a tenant the calls go to its tool subjects, bound to it", func(t *testing.T) {
		// s-caller is of no tenant: on teamA's subjects it is no caller, and
		// the answer is an unknown id's.
		cs := connect(t, mcpserver.Config{Conn: p.Conn, SessionID: "s-caller", Tenant: "teamA"})
		for _, c := range calls {
			res := callTool(t, cs, c.tool, c.args)
			if !res.IsError || text(t, res) != "Error: session query tools require an agent-bound caller: DSH_SESSION_ID names no stored session (or one not projected yet)" {
				t.Fatalf("%s: got %+v", c.tool, res)
			}
		}
	})
	t.Run("without DSH_SESSION_ID every call fails with the missing-agent code", func(t *testing.T) {
		cfg := mcpserver.ConfigFromEnv(func(string) string { return "" }, "")
		cfg.Conn = p.Conn
		cs := connect(t, cfg)
		for _, c := range calls {
			res := callTool(t, cs, c.tool, c.args)
			if !res.IsError || text(t, res) != "Error: session query tools require an agent-bound caller: DSH_SESSION_ID is not set in the environment of dshq mcp" {
				t.Fatalf("%s: got %+v", c.tool, res)
			}
		}
	})
	t.Run("a DSH_SESSION_ID that names no stored session says so, to the model and on the log", func(t *testing.T) {
		cfg := mcpserver.ConfigFromEnv(func(string) string { return "ghost" }, "")
		cfg.Conn = p.Conn
		logged := &testenv.Buffer{}
		cfg.Logger = slog.New(slog.NewTextHandler(logged, nil))
		cs := connect(t, cfg)
		res := callTool(t, cs, calls[0].tool, calls[0].args)
		if !res.IsError || text(t, res) != "Error: session query tools require an agent-bound caller: DSH_SESSION_ID names no stored session (or one not projected yet)" {
			t.Fatalf("got %+v", res)
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if !strings.Contains(string(sc), "SESSION_QUERY_TOOL_MISSING_AGENT") {
			t.Fatalf("structured content %s", sc)
		}
		if l := logged.String(); !strings.Contains(l, "the caller session is not stored") || !strings.Contains(l, "session=ghost") {
			t.Errorf("log:\n%s", l)
		}
	})
}

func TestConfigFromEnv(t *testing.T) {
	cfg := mcpserver.ConfigFromEnv(func(k string) string {
		if k == mcpserver.EnvSessionID {
			return " s-1 "
		}
		return "ignored"
	}, "nats://x:4222")
	if cfg.SessionID != "s-1" || cfg.NATSURL != "nats://x:4222" {
		t.Fatalf("cfg = %+v", cfg)
	}
}

func TestRunFailsWithoutNATS(t *testing.T) {
	err := mcpserver.Run(context.Background(), strings.NewReader(""), io.Discard,
		mcpserver.Config{NATSURL: "nats://127.0.0.1:1", SessionID: "s"})
	if err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("err = %v", err)
	}
}

func TestRunStopsWhenItsContextEnds(t *testing.T) {
	p := startPipeline(t)
	in, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Run(ctx, in, io.Discard, mcpserver.Config{Conn: p.Conn, SessionID: "s-caller"})
	}()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestRunAnswersWhatItReadBeforeItsInputEnded(t *testing.T) {
	p := startPipeline(t)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"echo","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"three","method":"tools/call","params":{"name":"session_trace","arguments":{}}}`,
	}, "\n") // the last request without its newline, as echo -n sends it
	for name, r := range map[string]func() io.Reader{
		"an input ending after its last bytes": func() io.Reader { return strings.NewReader(in) },
		"an input ending with its last bytes":  func() io.Reader { return iotest.DataErrReader(strings.NewReader(in)) },
		"an input read one byte at a time":     func() io.Reader { return iotest.OneByteReader(strings.NewReader(in)) },
	} {
		t.Run(name, func(t *testing.T) {
			var out testenv.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := mcpserver.Run(ctx, r(), &out, mcpserver.Config{Conn: p.Conn, SessionID: "s-7f3c"}); err != nil {
				t.Fatalf("Run: %v", err)
			}
			results := map[string]map[string]json.RawMessage{}
			for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var m struct {
					ID     json.RawMessage            `json:"id"`
					Result map[string]json.RawMessage `json:"result"`
				}
				if err := json.Unmarshal([]byte(line), &m); err != nil || m.Result == nil {
					t.Fatalf("not a result: %q (%v)", line, err)
				}
				results[string(m.ID)] = m.Result
			}
			if results["1"] == nil || results["2"] == nil || results[`"three"`] == nil || len(results) != 3 {
				t.Fatalf("answered %d of 1, 2 and \"three\":\n%s", len(results), out.String())
			}
			list := results["2"]
			if list["tools"] == nil || list["ttlMs"] != nil || list["cacheScope"] != nil {
				t.Errorf("tools/list of a 2025-06-18 session holds members outside that revision: %v", keys(list))
			}
		})
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
