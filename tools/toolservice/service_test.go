package toolservice_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/microhost"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
	"github.com/dshq/dshq/tools/toolstest"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

const bigText = "retry budget "

// corpus holds a caller and a same-workspace session with a large event.
func corpus(t *testing.T) *toolstest.Pipeline {
	t.Helper()
	var logs []toolstest.Log
	big := strings.Repeat(bigText, 3000) // ~39 KB
	for _, log := range []string{
		`{"type":"session","version":2,"id":"me","createdAt":1,"cwd":"/w","isSeeded":false}
{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`,
		fmt.Sprintf(`{"type":"session","version":2,"id":"big","createdAt":2,"cwd":"/w","isSeeded":false}
{"type":"user/message","seq":0,"time":5,"data":{"id":"m","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":%q}]},"surfaceOp":"append"}`, big),
		`{"type":"session","version":2,"id":"other","createdAt":3,"cwd":"/elsewhere","isSeeded":false}`,
	} {
		logs = append(logs, toolstest.Log{JSONL: []byte(log)})
	}
	return toolstest.StartPipeline(t, logs)
}

type env struct {
	nc    *nats.Conn
	tools *tools.Tools
}

func start(t *testing.T, opts ...toolservice.Option) *env {
	t.Helper()
	ctx := context.Background()
	p := corpus(t)
	nc := p.Conn
	tl, err := tools.New(tools.FromQueryClient(p.Client))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := toolservice.Serve(ctx, nc, tl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return &env{nc: nc, tools: tl}
}

// request sends body to dsh.tools.v1.<endpoint> as caller ("" = no header).
func (e *env) request(t *testing.T, endpoint, caller, body string) []byte {
	t.Helper()
	msg := nats.NewMsg(dshq.ToolsSubjectPrefix + "." + endpoint)
	msg.Data = []byte(body)
	if caller != "" {
		msg.Header.Set(toolservice.CallerHeader, caller)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := e.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		t.Fatalf("request %s: %v", endpoint, err)
	}
	if reply.Header.Get("Nats-Service-Error-Code") != "" {
		t.Fatalf("service error reply: %v", reply.Header)
	}
	return reply.Data
}

func TestToolEndpoints(t *testing.T) {
	e := start(t)
	t.Run("list names the five tools with schemas and the prompt", func(t *testing.T) {
		var l toolservice.ListReply
		if err := json.Unmarshal(e.request(t, "list", "", `{}`), &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Tools) != 5 || l.Prompt != tools.Prompt {
			t.Fatalf("list = %+v", l)
		}
		for _, d := range l.Tools {
			var s map[string]any
			if json.Unmarshal(d.InputSchema, &s) != nil || s["type"] != "object" || d.Description == "" {
				t.Fatalf("tool %s: schema %s", d.Name, d.InputSchema)
			}
		}
	})
	t.Run("a call answers the tool's text", func(t *testing.T) {
		got := string(e.request(t, tools.NameSessionTrace, "me", `{}`))
		want, _ := e.tools.Call(context.Background(), tools.AsSession("me"), tools.NameSessionTrace, []byte(`{}`))
		wb, _ := json.Marshal(want.Text)
		if got != `{"text":`+string(wb)+`,"isError":false}` {
			t.Fatalf("got %s", got)
		}
	})
	for _, tc := range []struct {
		name, tool, caller, body, want string
	}{
		{"a missing caller header is the missing-agent error", tools.NameSessionTrace, "", `{}`,
			`{"text":"Error: session query tools require an agent-bound caller: no caller session is named","isError":true,"error":{"code":"SESSION_QUERY_TOOL_MISSING_AGENT"}}`},
		{"a foreign target is unauthorized", tools.NameSessionTrace, "me", `{"session_id":"other"}`,
			`{"text":"Error: session target is outside the caller workspace","isError":true,"error":{"code":"SESSION_QUERY_TOOL_UNAUTHORIZED"}}`},
		{"a body that is not an object is invalid arguments", tools.NameSessionEventRead, "me", `not json`,
			`{"text":"Error: invalid arguments: arguments must be a JSON object","isError":true,"error":{"code":"INVALID_ARGS"}}`},
		{"a window over the maximum is the sanitized window error", tools.NameSessionEventRead, "me", `{"session_id":"big","seq":0,"before":80}`,
			`{"text":"Error: session event window is invalid","isError":true,"error":{"code":"SESSION_QUERY_INVALID_WINDOW"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(e.request(t, tc.tool, tc.caller, tc.body)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestSpill(t *testing.T) {
	const limit = 8192
	e := start(t, toolservice.WithMaxPayload(limit))
	full, _ := e.tools.Call(context.Background(), tools.AsSession("me"), tools.NameSessionEventRead, []byte(`{"session_id":"big","seq":0}`))
	if full.IsError || len(full.Text) < 4*limit {
		t.Fatalf("fixture too small: %d bytes", len(full.Text))
	}
	raw := e.request(t, tools.NameSessionEventRead, "me", `{"session_id":"big","seq":0}`)
	var r toolservice.Reply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	t.Run("an oversized rendering becomes a bounded preview and a locator", func(t *testing.T) {
		if len(raw) > limit || r.IsError || r.Spill == nil || r.Spill.Bytes != len(full.Text) {
			t.Fatalf("reply %d bytes, spill %+v", len(raw), r.Spill)
		}
		locator := fmt.Sprintf("\n[full result: %d bytes; read it with dsh.tools.v1.spill.read id=%s]", len(full.Text), r.Spill.ID)
		if !strings.HasSuffix(r.Text, locator) || !strings.HasPrefix(full.Text, strings.TrimSuffix(r.Text, locator)) {
			t.Fatalf("preview is not a prefix plus locator:\n%.300s", r.Text)
		}
	})
	t.Run("spill.read pages the full text for the same caller", func(t *testing.T) {
		var got strings.Builder
		body := fmt.Sprintf(`{"id":%q}`, r.Spill.ID)
		for pages := 0; ; pages++ {
			raw := e.request(t, "spill.read", "me", body)
			if len(raw) > limit {
				t.Fatalf("page of %d bytes", len(raw))
			}
			var p toolservice.SpillPage
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("page %s: %v", raw, err)
			}
			got.WriteString(p.Text)
			if p.NextOffset == nil {
				break
			}
			if pages > 100 {
				t.Fatal("too many pages")
			}
			body = fmt.Sprintf(`{"id":%q,"offset":%d}`, r.Spill.ID, *p.NextOffset)
		}
		if got.String() != full.Text {
			t.Fatalf("paged text differs: %d vs %d bytes", got.Len(), len(full.Text))
		}
	})
	t.Run("another caller and an unknown id get the same not-found answer", func(t *testing.T) {
		foreign := string(e.request(t, "spill.read", "other", fmt.Sprintf(`{"id":%q}`, r.Spill.ID)))
		unknown := string(e.request(t, "spill.read", "other", `{"id":"no-such-spill"}`))
		want := `{"text":"Error: spilled result was not found or has expired","isError":true,"error":{"code":"SESSION_QUERY_TOOL_SPILL_NOT_FOUND"}}`
		if foreign != want || unknown != want {
			t.Fatalf("foreign %s\nunknown %s", foreign, unknown)
		}
	})
	for _, tc := range []struct{ name, caller, body, code string }{
		{"no caller is the missing-agent error", "", `{"id":"x"}`, "SESSION_QUERY_TOOL_MISSING_AGENT"},
		{"a body without id is invalid", "me", `{}`, "INVALID_ARGS"},
		{"an unknown field is invalid", "me", `{"id":"x","extra":1}`, "INVALID_ARGS"},
		{"a negative offset is invalid", "me", `{"id":"ID","offset":-1}`, "INVALID_ARGS"},
		{"an offset past the end is invalid", "me", `{"id":"ID","offset":99999999}`, "INVALID_ARGS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.ReplaceAll(tc.body, "ID", r.Spill.ID)
			var rep toolservice.Reply
			if err := json.Unmarshal(e.request(t, "spill.read", tc.caller, body), &rep); err != nil {
				t.Fatal(err)
			}
			if !rep.IsError || rep.Error == nil || string(rep.Error.Code) != tc.code {
				t.Fatalf("got %+v", rep)
			}
		})
	}
	t.Run("a small rendering is not spilled", func(t *testing.T) {
		var rep toolservice.Reply
		if err := json.Unmarshal(e.request(t, tools.NameSessionTrace, "me", `{}`), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Spill != nil || rep.IsError {
			t.Fatalf("got %+v", rep)
		}
	})
}

func TestServeRefusesAShortSpillTTL(t *testing.T) {
	ctx := context.Background()
	nc := testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed}).Conn(t)
	tl, _ := tools.New(tools.FromQueryClient(query.NewClient(nc)))
	if _, err := toolservice.Serve(ctx, nc, tl, toolservice.WithSpillTTL(time.Minute)); err == nil {
		t.Fatal("a one-minute spill TTL was accepted")
	}
}

func TestClient(t *testing.T) {
	e := start(t, toolservice.WithMaxPayload(8192))
	args := json.RawMessage(`{"session_id":"big","seq":0}`)
	full, _ := e.tools.Call(context.Background(), tools.AsSession("me"), tools.NameSessionEventRead, args)
	c := toolservice.NewClient(e.nc, "me")
	t.Run("CallFull reassembles a spilled result", func(t *testing.T) {
		r, err := c.CallFull(context.Background(), tools.NameSessionEventRead, args)
		if err != nil || r.Text != full.Text || r.Spill != nil {
			t.Fatalf("err %v, %d bytes (want %d)", err, len(r.Text), len(full.Text))
		}
	})
	t.Run("List returns the definitions", func(t *testing.T) {
		l, err := c.List(context.Background())
		if err != nil || len(l.Tools) != 5 {
			t.Fatalf("err %v, %+v", err, l)
		}
	})
	t.Run("a spill of another caller cannot be read", func(t *testing.T) {
		r, err := c.Call(context.Background(), tools.NameSessionEventRead, args)
		if err != nil || r.Spill == nil {
			t.Fatalf("err %v, reply %+v", err, r)
		}
		_, err = toolservice.NewClient(e.nc, "other").ReadSpill(context.Background(), r.Spill.ID)
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestMicroStats checks what `nats micro info dsh-tools` reads: every
// answer counted, error replies (isError, no error headers) as errors with
// their code, and a version.
func TestMicroStats(t *testing.T) {
	e := start(t)
	var failed int
	for _, caller := range []string{"", "me", "ghost"} {
		var r toolservice.Reply
		if err := json.Unmarshal(e.request(t, "session_search", caller, `{"query":"retry budget"}`), &r); err != nil {
			t.Fatal(err)
		}
		if r.IsError {
			failed++
		}
	}
	subj, err := micro.ControlSubject(micro.StatsVerb, dshq.ToolsService, "")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := e.nc.Request(subj, nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Version != dshq.ServiceVersion {
		t.Fatalf("version %q", st.Version)
	}
	for _, ep := range st.Endpoints {
		if ep.Name != "session_search" {
			continue
		}
		var d microhost.EndpointData
		if err := json.Unmarshal(ep.Data, &d); err != nil {
			t.Fatal(err)
		}
		if failed != 2 || ep.NumRequests != 3 || ep.NumErrors != failed || d.ErrorsByCode[string(dshq.CodeToolMissingAgent)] != failed ||
			!strings.HasPrefix(ep.LastError, string(dshq.CodeToolMissingAgent)+":") || ep.AverageProcessingTime <= 0 {
			t.Fatalf("session_search stats %+v, data %+v; %d of 3 answers failed", ep, d, failed)
		}
		return
	}
	t.Fatalf("no session_search endpoint in %+v", st.Endpoints)
}
