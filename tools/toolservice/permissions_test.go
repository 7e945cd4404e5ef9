package toolservice_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/tenanttest"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/tenancy"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
	"github.com/dshq/dshq/tools/toolstest"
)

// tenantCorpus holds, all in one cwd, sessions of teamA, of teamB and of no
// tenant, each with the same phrase, and a large event of teamA's: the
// tools' service over the real pipeline (a server of its own).
func tenantCorpus(t *testing.T) tools.Service {
	t.Helper()
	var logs []toolstest.Log
	add := func(tenant, id, text string) {
		logs = append(logs, toolstest.Log{Tenant: tenant, JSONL: []byte(fmt.Sprintf(`{"type":"session","version":2,"id":%q,"createdAt":1,"cwd":"/shared","isSeeded":false}`, id) + "\n" +
			`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n" +
			fmt.Sprintf(`{"type":"user/message","seq":1,"time":2,"data":{"id":"m","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":%q}]},"surfaceOp":"append"}`, text) + "\n" +
			`{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}` + "\n")})
	}
	add("teamA", "a-me", "vermilion secret of team A")
	add("teamA", "a-big", strings.Repeat("vermilion ", 4000))
	add("teamB", "b-me", "vermilion secret of team B")
	add("", "plain-me", "vermilion secret of nobody")
	return tools.FromQueryClient(toolstest.StartPipeline(t, logs).Client)
}

// tenantService runs dsh-tools as the trusted user over tenantCorpus, on a
// server whose tenants have their generated permissions.
func tenantService(t *testing.T, opts ...toolservice.Option) *testnats.Server {
	t.Helper()
	e := tenanttest.Start(t, "teamA", "teamB")
	tl, err := tools.New(tenantCorpus(t))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := toolservice.Serve(context.Background(), tenanttest.ConnectTrusted(t, e), tl, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return e
}

func callAt(t *testing.T, nc *nats.Conn, subject, caller, body string) string {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = []byte(body)
	if caller != "" {
		msg.Header.Set(toolservice.CallerHeader, caller)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return string(reply.Data)
}

// TestATenantCallsAsItsOwnSessionsOnly: on a tenant's tool subjects the
// caller is bound to the tenant — another tenant's session (or one of no
// tenant) named as Dsh-Caller-Session answers exactly as a caller that was
// never stored —
// and the tools see only the tenant's sessions, although every session has
// the same cwd and the same text.
func TestATenantCallsAsItsOwnSessionsOnly(t *testing.T) {
	e := tenantService(t)
	a, _ := tenanttest.ConnectTenant(t, e, "teamA")
	at := func(tool string) string { return tenancy.ToolSubject("teamA", tool) }
	missing := callAt(t, a, at(tools.NameSessionTrace), "never-stored", `{}`)
	if !strings.Contains(missing, `"SESSION_QUERY_TOOL_MISSING_AGENT"`) {
		t.Fatalf("a caller never stored: %s", missing)
	}
	for _, caller := range []string{"b-me", "plain-me", "nobody"} {
		if got := callAt(t, a, at(tools.NameSessionTrace), caller, `{}`); got != missing {
			t.Errorf("caller %s on teamA's subject: %s, want the never-stored caller's %s", caller, got, missing)
		}
	}
	if got := callAt(t, a, at(tools.NameSessionTrace), "a-me", `{}`); !strings.Contains(got, `"isError":false`) {
		t.Fatalf("teamA's own session: %s", got)
	}
	hidden := callAt(t, a, at(tools.NameSessionEventRead), "a-me", `{"session_id":"b-me","seq":1}`)
	gone := callAt(t, a, at(tools.NameSessionEventRead), "a-me", `{"session_id":"no-such","seq":1}`)
	if hidden != gone || !strings.Contains(hidden, "SESSION_QUERY_TOOL_UNAUTHORIZED") {
		t.Errorf("another tenant's target in the same cwd: %s\nmissing target: %s", hidden, gone)
	}
	var r toolservice.Reply
	if err := json.Unmarshal([]byte(callAt(t, a, at(tools.NameSessionSearch), "a-me", `{"query":"vermilion"}`)), &r); err != nil {
		t.Fatal(err)
	}
	if r.IsError || !strings.Contains(r.Text, "a-big") || strings.Contains(r.Text, "b-me") || strings.Contains(r.Text, "plain-me") {
		t.Errorf("teamA's search: %s", r.Text)
	}
	c := toolservice.NewClient(a, "a-me").InTenant("teamA")
	if l, err := c.List(context.Background()); err != nil || len(l.Tools) != 5 {
		t.Errorf("list on teamA's subject: %+v, %v", l, err)
	}
	if r, err := c.Call(context.Background(), tools.NameSessionEventRead, json.RawMessage(`{"session_id":"a-big","seq":1}`)); err != nil || r.IsError {
		t.Errorf("the client in tenant mode: %+v, %v", r, err)
	}
}

// TestATenantsSpillIsItsOwn: a tenant's spilled result is read back on its
// own subjects by the caller that produced it, and by nobody else: not by
// another tenant naming the same caller, nor on the trusted subjects.
func TestATenantsSpillIsItsOwn(t *testing.T) {
	e := tenantService(t, toolservice.WithMaxPayload(8192))
	a, _ := tenanttest.ConnectTenant(t, e, "teamA")
	b, _ := tenanttest.ConnectTenant(t, e, "teamB")
	args := json.RawMessage(`{"session_id":"a-big","seq":1}`)
	r, err := toolservice.NewClient(a, "a-me").InTenant("teamA").Call(context.Background(), tools.NameSessionEventRead, args)
	if err != nil || r.Spill == nil {
		t.Fatalf("a spill: %+v, %v", r, err)
	}
	if want := "read it with " + tenancy.ToolSubject("teamA", toolservice.EndpointSpillRead) + " id=" + r.Spill.ID; !strings.Contains(r.Text, want) {
		t.Fatalf("the locator does not name teamA's subject: %.200s", r.Text[len(r.Text)-200:])
	}
	full, err := toolservice.NewClient(a, "a-me").InTenant("teamA").ReadSpill(context.Background(), r.Spill.ID)
	if err != nil || len(full) != r.Spill.Bytes {
		t.Fatalf("teamA reads its spill: %d bytes, %v", len(full), err)
	}
	body := fmt.Sprintf(`{"id":%q}`, r.Spill.ID)
	notFound := callAt(t, b, tenancy.ToolSubject("teamB", toolservice.EndpointSpillRead), "a-me", `{"id":"no-such-spill"}`)
	if got := callAt(t, b, tenancy.ToolSubject("teamB", toolservice.EndpointSpillRead), "a-me", body); got != notFound {
		t.Errorf("teamB reads teamA's spill as a-me: %s", got)
	}
	trusted := tenanttest.ConnectTrusted(t, e)
	if got := callAt(t, trusted, dshq.ToolsSubjectPrefix+"."+toolservice.EndpointSpillRead, "a-me", body); got != notFound {
		t.Errorf("teamA's spill on the trusted subject: %s", got)
	}
}

// TestATenantReachesNothingElse: a tenant's requests to another tenant's
// tool subjects, to the trusted tool subjects and to the trusted query API
// are refused by the server (permissions violations), never answered.
func TestATenantReachesNothingElse(t *testing.T) {
	e := tenantService(t)
	a, v := tenanttest.ConnectTenant(t, e, "teamA")
	for _, subject := range []string{
		tenancy.ToolSubject("teamB", tools.NameSessionTrace),
		dshq.ToolsSubjectPrefix + "." + tools.NameSessionTrace,
		"dsh.query.v1.sessions.list",
	} {
		t.Run(subject, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			msg := nats.NewMsg(subject)
			msg.Header.Set(toolservice.CallerHeader, "a-me")
			if m, err := a.RequestMsgWithContext(ctx, msg); err == nil {
				t.Fatalf("answered: %s", m.Data)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				errs := v.Take()
				if len(errs) == 1 && errors.Is(errs[0], nats.ErrPermissionViolation) && strings.Contains(errs[0].Error(), subject) {
					return
				}
				if len(errs) > 0 || time.Now().After(deadline) {
					t.Fatalf("async errors %v, want one permissions violation", errs)
				}
				time.Sleep(5 * time.Millisecond) // poll interval
			}
		})
	}
}

// TestToolSubjectsAreTheServicesSubjects checks package tenancy's tool
// subjects against the service's endpoints.
func TestToolSubjectsAreTheServicesSubjects(t *testing.T) {
	tenant, endpoint, tenanted, ok := tenancy.ParseToolSubject(tenancy.ToolSubject("teamA", toolservice.EndpointSpillRead))
	if !ok || !tenanted || tenant != "teamA" || endpoint != toolservice.EndpointSpillRead {
		t.Fatalf("parse: %q %q %v %v", tenant, endpoint, tenanted, ok)
	}
	for _, s := range []string{"dsh.tools.v1.tenant.*.list", "dsh.tools.v1.tenant.team~A.list", "dsh.tools.v1.tenant.teamA", "dsh.tools.v1.", "dsh.query.v1.x"} {
		if _, _, _, ok := tenancy.ParseToolSubject(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
	if _, endpoint, tenanted, ok := tenancy.ParseToolSubject("dsh.tools.v1.spill.read"); !ok || tenanted || endpoint != "spill.read" {
		t.Errorf("a trusted subject: %q %v %v", endpoint, tenanted, ok)
	}
}
