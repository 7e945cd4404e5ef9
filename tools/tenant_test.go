package tools_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolstest"
)

// tenantService holds, all in cwd /w: teamA's root and its child, a child
// of that root written by teamB, a child of no tenant, and teamB's own root;
// every user message says "amber tenancy".
func tenantService(t *testing.T) tools.Service {
	t.Helper()
	var logs []toolstest.Log
	add := func(tenant, id, parent string) {
		p := ""
		if parent != "" {
			p = fmt.Sprintf(`,"parentSession":%q`, parent)
		}
		logs = append(logs, toolstest.Log{Tenant: tenant, JSONL: []byte(fmt.Sprintf(`{"type":"session","version":2,"id":%q,"createdAt":1,"cwd":"/w","isSeeded":false%s}`, id, p) + "\n" +
			`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n" +
			`{"type":"user/message","seq":1,"time":2,"data":{"id":"m","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"amber tenancy ` + id + `"}]},"surfaceOp":"append"}` + "\n")})
	}
	add("teamA", "a-root", "")
	add("teamA", "a-child", "a-root")
	add("teamB", "b-child", "a-root")
	add("", "plain-child", "a-root")
	add("teamB", "b-root", "")
	return tools.FromQueryClient(toolstest.StartPipeline(t, logs).Client)
}

func callIn(t *testing.T, tl *tools.Tools, tenant, caller, name, args string) tools.Result {
	t.Helper()
	r, err := tl.Call(context.Background(), tools.AsSession(caller).InTenant(tenant), name, []byte(args))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestToolsInATenantSeeOnlyItsSessions: a call bound to teamA sees teamA's
// sessions only, in an equal cwd; its lineage is pruned at the tenant
// boundary; another tenant's caller is no caller; and the trusted Call of a
// tenant's caller applies the same tenant scope.
func TestToolsInATenantSeeOnlyItsSessions(t *testing.T) {
	tl := newTools(t, tenantService(t))
	search := callIn(t, tl, "teamA", "a-child", tools.NameSessionSearch, `{"query":"amber tenancy"}`)
	if search.IsError || !strings.Contains(search.Text, "Session a-root — ") || strings.Contains(search.Text, "b-") || strings.Contains(search.Text, "plain") {
		t.Errorf("teamA's search:\n%s", search.Text)
	}
	trace := callIn(t, tl, "teamA", "a-child", tools.NameSessionTrace, `{"session_id":"a-root"}`)
	if trace.IsError || !strings.Contains(trace.Text, "- a-child — ") || strings.Count(trace.Text, "[outside workspace subtree]") != 2 ||
		strings.Contains(trace.Text, "b-child") || strings.Contains(trace.Text, "plain-child") {
		t.Errorf("teamA's trace:\n%s", trace.Text)
	}
	hidden := callIn(t, tl, "teamA", "a-child", tools.NameSessionEventRead, `{"session_id":"b-root","seq":1}`)
	missing := callIn(t, tl, "teamA", "a-child", tools.NameSessionEventRead, `{"session_id":"nope","seq":1}`)
	if hidden != missing || hidden.Code != dshq.CodeToolUnauthorized {
		t.Errorf("another tenant's target: %+v, a missing one: %+v", hidden, missing)
	}
	unknown := callIn(t, tl, "teamA", "nope", tools.NameSessionTrace, `{}`)
	for _, caller := range []string{"b-root", "plain-child", "nope"} {
		// Another tenant's session reads exactly as an unknown id.
		if r := callIn(t, tl, "teamA", caller, tools.NameSessionTrace, `{}`); r.Code != dshq.CodeToolMissingAgent || r != unknown {
			t.Errorf("caller %s bound to teamA: %+v, an unknown one: %+v", caller, r, unknown)
		}
	}
	if r := callIn(t, tl, "", "a-child", tools.NameSessionTrace, `{}`); r.Code != dshq.CodeToolMissingAgent {
		t.Errorf("a call bound to no tenant name: %+v", r)
	}
	trusted := call(t, tl, "b-child", tools.NameSessionSearch, `{"query":"amber tenancy"}`)
	if trusted.IsError || !strings.Contains(trusted.Text, "Session b-root — ") || strings.Contains(trusted.Text, "a-") || strings.Contains(trusted.Text, "plain") {
		t.Errorf("teamB's caller on the trusted path:\n%s", trusted.Text)
	}
	plain := call(t, tl, "plain-child", tools.NameSessionSearch, `{"query":"amber tenancy"}`)
	if plain.Text != "No prior session matches found." {
		t.Errorf("a caller of no tenant:\n%s", plain.Text)
	}
}
