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

// secretsOfB are every id, title and text of workspace B (and of sessions
// pruned with a hidden subtree) that a caller in workspace A must never see.
var secretsOfB = []string{
	"b-secret", "s-b77c", "b-caller", "n-nocwd", "n-caller",
	"SECRET", "/home/u/other",
}

// probe is one way a workspace-A caller can reach for workspace B.
type probe struct {
	name, tool, args string
	// twin, when set, is the same probe aimed at a nonexistent session: the
	// two answers must be byte-identical.
	twin string
	// pruned are further strings this probe must not show (sessions of the
	// caller's workspace that sit under a hidden subtree).
	pruned []string
}

var probesOfB = []probe{
	{"trace a foreign root", tools.NameSessionTrace, `{"session_id":"b-secret"}`, `{"session_id":"zz-missing"}`, nil},
	{"trace a foreign child", tools.NameSessionTrace, `{"session_id":"s-b77c"}`, `{"session_id":"zz-missing"}`, nil},
	{"trace a foreign caller", tools.NameSessionTrace, `{"session_id":"b-caller"}`, `{"session_id":"zz-missing"}`, nil},
	{"trace a cwd-less session", tools.NameSessionTrace, `{"session_id":"n-nocwd"}`, `{"session_id":"zz-missing"}`, nil},
	{"trace an A session pruned under a foreign child", tools.NameSessionTrace, `{"session_id":"s-a-grand"}`, "", nil},
	{"read a foreign event", tools.NameSessionEventRead, `{"session_id":"b-secret","seq":1,"before":1,"after":5}`, `{"session_id":"zz-missing","seq":1,"before":1,"after":5}`, nil},
	{"read a foreign event past its end", tools.NameSessionEventRead, `{"session_id":"b-secret","seq":999}`, `{"session_id":"zz-missing","seq":999}`, nil},
	{"trace a foreign event", tools.NameSessionEventTrace, `{"session_id":"s-b77c","seq":1}`, `{"session_id":"zz-missing","seq":1}`, nil},
	{"search a foreign session's events", tools.NameSessionEventSearch, `{"session_id":"b-secret","query":"retry budget"}`, `{"session_id":"zz-missing","query":"retry budget"}`, nil},
	{"search for a foreign text", tools.NameSessionSearch, `{"query":"SECRET-B-ROOT-TEXT"}`, `{"query":"no-such-text-anywhere"}`, nil},
	{"search a shared phrase", tools.NameSessionSearch, `{"query":"retry budget"}`, "", nil},
	{"search every surface of a shared phrase", tools.NameSessionSearch, `{"query":"retry budget","event_surfaces":["current","shadowed","log-only"],"availability":["live","persisted"]}`, "", nil},
	{"search a foreign id directly", tools.NameSessionSearch, `{"query":"retry budget","session_ids":["b-secret","s-b77c","n-nocwd"]}`, `{"query":"retry budget","session_ids":["zz-missing"]}`, nil},
	{"guess a foreign parent", tools.NameSessionSearch, `{"query":"retry budget","parent_session_ids":["b-secret"]}`, `{"query":"retry budget","parent_session_ids":["zz-missing"]}`, nil},
	{"guess a foreign parent of a foreign child", tools.NameSessionSearch, `{"query":"retry budget","parent_session_ids":["s-9a01"]}`, "", nil},
	{"search roots", tools.NameSessionSearch, `{"query":"retry budget","include_root_sessions":true}`, "", nil},
	{"trace lineage crossing out upward", tools.NameSessionTrace, `{"session_id":"a-orphan"}`, "", nil},
	{"trace lineage crossing out downward", tools.NameSessionTrace, `{"session_id":"s-9a01"}`, "", []string{"s-a-grand"}},
	{"trace lineage from the root", tools.NameSessionTrace, `{"session_id":"s-7f3c"}`, "", []string{"s-a-grand"}},
	{"trace lineage from the caller", tools.NameSessionTrace, `{}`, "", []string{"s-a-grand"}},
	{"search its own events for foreign text", tools.NameSessionEventSearch, `{"query":"SECRET"}`, "", nil},
	{"read the own parent guess of a sibling", tools.NameSessionEventRead, `{"session_id":"a-orphan","seq":1,"before":50,"after":50}`, "", nil},
}

// TestWorkspaceBoundary is the adversarial suite: a caller in workspace A
// probes workspace B every way the arguments allow, against the real
// pipeline (embedded NATS, projector, Bleve, query service).
func TestWorkspaceBoundary(t *testing.T) {
	tl := newTools(t, newService(t, fullCorpus))
	for _, p := range probesOfB {
		t.Run(p.name+" reveals nothing of B", func(t *testing.T) {
			r := call(t, tl, "s-caller", p.tool, p.args)
			noneOf(t, r.Text, secretsOfB...)
			noneOf(t, r.Text, p.pruned...)
			if p.twin == "" {
				return
			}
			twin := call(t, tl, "s-caller", p.tool, p.twin)
			if r != twin {
				t.Fatalf("hidden and missing differ:\n%+v\n%+v", r, twin)
			}
		})
	}
	t.Run("a B caller sees none of A either", func(t *testing.T) {
		for _, args := range []string{`{"query":"retry budget"}`, `{"query":"Find where the retry budget"}`} {
			r := call(t, tl, "b-caller", tools.NameSessionSearch, args)
			noneOf(t, r.Text, "s-7f3c", "s-9a01", "a-orphan", "s-caller", "/home/u/proj")
		}
		r := call(t, tl, "b-caller", tools.NameSessionTrace, `{"session_id":"s-b77c"}`)
		noneOf(t, r.Text, "s-9a01", "s-a-grand", "s-7f3c")
		if !strings.Contains(r.Text, "- [outside workspace boundary]") || !strings.Contains(r.Text, "- [outside workspace subtree]") {
			t.Fatalf("markers missing:\n%s", r.Text)
		}
	})
	t.Run("a cwd-less caller sees only itself", func(t *testing.T) {
		for _, p := range []struct{ tool, args string }{
			{tools.NameSessionTrace, `{"session_id":"n-nocwd"}`},
			{tools.NameSessionEventRead, `{"session_id":"n-nocwd","seq":1}`},
			{tools.NameSessionSearch, `{"query":"retry budget"}`},
		} {
			r := call(t, tl, "n-caller", p.tool, p.args)
			if !r.IsError {
				t.Fatalf("%s %s succeeded:\n%s", p.tool, p.args, r.Text)
			}
			noneOf(t, r.Text, "SECRET-NOCWD", "n-nocwd")
		}
	})
}

// Every filter the tools send is accepted by the service, and narrows as
// documented.
func TestFilters(t *testing.T) {
	tl := newTools(t, newService(t, fullCorpus))
	for _, tc := range []struct {
		name, caller, tool, args string
		want                     []string // substrings of the text
	}{
		{"all session and event filters together", "s-caller", tools.NameSessionSearch,
			`{"query":"retry budget","session_ids":["s-7f3c","a-orphan"],"created_at_from":"2026-08-29T10:40:00Z","created_at_to":"2026-08-29T12:40:00+01:00","availability":["persisted"],"event_seq_from":0,"event_seq_to":20,"event_time_from":"2026-08-29T10:40:00.000Z","event_time_to":"2026-08-29T10:50:00.002Z","event_types":["user/message","todo/write"],"event_surfaces":["current","log-only","shadowed"]}`,
			[]string{"Session search results (2):", "Session a-orphan", "Session s-7f3c"}},
		{"a creation range excludes older sessions", "s-caller", tools.NameSessionSearch,
			`{"query":"retry budget","created_at_from":"2026-08-29T10:45:00Z"}`,
			[]string{"Session search results (1):", "Session a-orphan"}},
		{"a shadowed surface filter picks the shadowed original", "s-caller", tools.NameSessionSearch,
			`{"query":"retry budget","event_surfaces":["shadowed"]}`,
			[]string{"Best match: seq 1 | user/message | shadowed | 2026-08-29T10:40:00.101Z"}},
		{"live availability keeps live sessions only", "s-caller", tools.NameSessionSearch,
			`{"query":"retry budget","availability":["live"]}`,
			[]string{"Session search results (1):", "Session s-7f3c"}},
		{"a visible parent narrows to its children", "s-caller", tools.NameSessionSearch,
			`{"query":"fork work","parent_session_ids":["s-7f3c"]}`,
			[]string{"Session search results (1):", "Session s-9a01", "Parent: s-7f3c"}},
		{"roots only", "s-caller", tools.NameSessionSearch,
			`{"query":"retry budget","include_root_sessions":true}`,
			[]string{"Session search results (1):", "Session s-7f3c"}},
		{"event filters of an event search", "s-caller", tools.NameSessionEventSearch,
			`{"session_id":"s-7f3c","query":"retry budget","seq_from":1,"seq_to":16,"time_from":"2026-08-29T10:40:00.101Z","time_to":"2026-08-29T10:40:12.001Z","event_types":["user/message"],"surfaces":["current"]}`,
			[]string{"Event search results (1):", "1. seq 15 | user/message | current"}},
		{"the current-session search clamps below the step", "s-caller", tools.NameSessionEventSearch,
			`{"query":"retry budget","seq_to":99}`,
			[]string{"Event search results (1):", "1. seq 1 | user/message"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, tl, tc.caller, tc.tool, tc.args)
			if r.IsError {
				t.Fatalf("error: %s", r.Text)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Text, w) {
					t.Fatalf("missing %q in:\n%s", w, r.Text)
				}
			}
		})
	}
}

// A hidden two-node cycle above a visible target
// (docs/tools.md#lineage-pruning) fails the trace with the safe lineage
// message, naming no session.
func TestHiddenLineageCycle(t *testing.T) {
	header := func(id, cwd, parent string) string {
		return `{"type":"session","version":2,"id":"` + id + `","createdAt":1788000000000,"cwd":"` + cwd + `","parentSession":"` + parent + `","isSeeded":false,"delegationDepth":1}` + "\n"
	}
	logs := []toolstest.Log{
		{JSONL: []byte(header("cyc-visible", "/home/u/proj", "cyc-hidden-1"))},
		{JSONL: []byte(header("cyc-hidden-1", "/home/u/other", "cyc-hidden-2"))},
		{JSONL: []byte(header("cyc-hidden-2", "/home/u/other", "cyc-hidden-1"))},
		{JSONL: corpusFile(t, "s-caller"), Live: true},
	}
	tl := newTools(t, tools.FromQueryClient(toolstest.StartPipeline(t, logs).Client))
	r := call(t, tl, "s-caller", tools.NameSessionTrace, `{"session_id":"cyc-visible"}`)
	wantError(t, r, dshq.CodeInvalidLineage, "Error: session lineage is invalid")
	noneOf(t, r.Text, "cyc-")
}

// A session whose log breaks the fold
// (docs/events-and-surfaces.md#surface-operations): the surface tools fail with
// the safe message, raw reads still work.
func TestInvalidSurfaceSession(t *testing.T) {
	bad := `{"type":"session","version":2,"id":"s-bad","createdAt":1788000000000,"cwd":"/home/u/proj","isSeeded":false,"delegationDepth":0}
{"type":"user/message","seq":0,"time":1788000000001,"data":{"id":"m","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"retry budget before the break"}]},"surfaceOp":"append"}
{"type":"turn/start","seq":1,"time":1788000000002,"data":{"turn":1},"surfaceOp":"append"}
`
	logs := []toolstest.Log{{JSONL: []byte(bad)}, {JSONL: corpusFile(t, "s-caller"), Live: true}}
	tl := newTools(t, tools.FromQueryClient(toolstest.StartPipeline(t, logs).Client))
	for _, c := range []struct{ tool, args string }{
		{tools.NameSessionEventSearch, `{"session_id":"s-bad","query":"retry budget"}`},
		{tools.NameSessionEventTrace, `{"session_id":"s-bad","seq":0}`},
	} {
		wantError(t, call(t, tl, "s-caller", c.tool, c.args), dshq.CodeInvalidSurface, "Error: session event history is invalid")
	}
	r := call(t, tl, "s-caller", tools.NameSessionEventRead, `{"session_id":"s-bad","seq":1,"before":1}`)
	if r.IsError || !strings.Contains(r.Text, `"surfaceOp": "append"`) || !strings.Contains(r.Text, "retry budget before the break") {
		t.Fatalf("raw read failed:\n%s", r.Text)
	}
}

// freshLog is a new session of the caller's workspace, inside its first step.
func freshLog(id, words string) []byte {
	return []byte(`{"type":"session","version":2,"id":"` + id + `","createdAt":1788003000000,"cwd":"/home/u/proj","isSeeded":false,"delegationDepth":0}
{"type":"turn/start","seq":0,"time":1788003000001,"data":{"turn":1}}
{"type":"user/message","seq":1,"time":1788003000002,"data":{"id":"m1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"` + words + `"}]},"surfaceOp":"append"}
{"type":"step/start","seq":2,"time":1788003000003,"data":{"turn":1,"step":1}}
`)
}

// A harness that calls a tool right after appending reads its own writes
// when it passes the generation of its last append.
func TestReadYourWrites(t *testing.T) {
	p := newPipeline(t, exampleCorpus)
	rec := newSpy(tools.FromQueryClient(p.Client))
	tl := newTools(t, rec)
	for i := range 5 {
		id := fmt.Sprintf("fresh-%d", i)
		gen := p.Publish(t, freshLog(id, "freshly written words"))
		ctx := context.Background()
		r, err := tl.Call(ctx, tools.AsSession(id).AtGeneration(gen), tools.NameSessionEventSearch, []byte(`{"query":"freshly written"}`))
		if err != nil || r.IsError || !strings.Contains(r.Text, "Event search results (1):\n1. seq 1 | user/message") {
			t.Fatalf("%s: err %v, result %+v", id, err, r)
		}
		r, err = tl.Call(ctx, tools.AsSession("s-caller").AtGeneration(gen), tools.NameSessionSearch, []byte(`{"query":"freshly written","session_ids":["`+id+`"]}`))
		if err != nil || r.IsError || !strings.Contains(r.Text, "1. Session "+id+" — untitled") {
			t.Fatalf("%s: err %v, result %+v", id, err, r)
		}
		if calls := rec.Calls(); len(calls) == 0 || calls[0].Op != "at generation" || calls[0].Request != gen || countOp(rec, "sessions.search") != 1 {
			t.Fatalf("%s: the tools did not ask at generation %d: %v", id, gen, opsOf(rec))
		}
		rec.reset()
	}
}
