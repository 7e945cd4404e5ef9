package tools_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dshq/dshq/tools"
)

// upstreamExamples are the original's rendering examples
// (docs/tools.md#renderings).
var upstreamExamples = []struct {
	name, tool, args, want string
}{
	{
		"session_search finds the log-only todo as the best match",
		tools.NameSessionSearch, `{"query":"retry budget"}`,
		"Session search results (1):\n\n" +
			"1. Session s-7f3c — Find where the retry budget\n" +
			"   Created: 2026-08-29T10:40:00.000Z\n" +
			"   Parent: root\n" +
			"   Availability: live, persisted\n" +
			"   Best match: seq 17 | todo/write | log-only | 2026-08-29T10:40:13.000Z\n" +
			"   Snippet: pending Document the retry budget",
	},
	{
		"session_event_trace shows a shadowed user message",
		tools.NameSessionEventTrace, `{"session_id":"s-7f3c","seq":1}`,
		"Session s-7f3c — Find where the retry budget\n" +
			"Target: seq 1 | user/message | shadowed | 2026-08-29T10:40:00.101Z\n" +
			"Replaced by: 15\n" +
			"Replacement chain: 15\n" +
			"Events replaced by target: none\n" +
			"Events cited directly as sources: none\n" +
			"Direct derived events: 15",
	},
	{
		"session_event_search ranks by matches, length, time and seq",
		tools.NameSessionEventSearch, `{"session_id":"s-7f3c","query":"retry budget"}`,
		"Session s-7f3c — Find where the retry budget\n\n" +
			"Event search results (4):\n" +
			"1. seq 17 | todo/write | log-only | 2026-08-29T10:40:13.000Z\n" +
			"   Snippet: pending Document the retry budget\n" +
			"2. seq 1 | user/message | shadowed | 2026-08-29T10:40:00.101Z\n" +
			"   Snippet: Find where the retry budget is configured\n" +
			"3. seq 10 | assistant/message | current | 2026-08-29T10:40:01.500Z\n" +
			"   Snippet: The retry budget is set in src/config.ts line 42 (default 3).\n" +
			"4. seq 15 | user/message | current | 2026-08-29T10:40:12.001Z\n" +
			"   Snippet: <checkpoint preamble> <summary> User asked where the retry budget lives; grep found src/config.ts:42. </summary>",
	},
	{
		"session_trace prunes a child's foreign subtree",
		tools.NameSessionTrace, `{"session_id":"s-7f3c"}`,
		"Session s-7f3c — Find where the retry budget\n" +
			"Created: 2026-08-29T10:40:00.000Z\n" +
			"Availability: live, persisted\n\n" +
			"Ancestors (nearest first):\n" +
			"- none (target is a root session)\n\n" +
			"Descendants:\n" +
			"- s-9a01 — untitled | 2026-08-29T11:00:00.000Z | persisted\n" +
			"  - [outside workspace subtree]",
	},
}

// The rendering examples (docs/tools.md#renderings), reproduced byte for byte
// on the real pipeline.
func TestUpstreamExamplesByteForByte(t *testing.T) {
	upstreamExamplesOn(t, newTools(t, newService(t, exampleCorpus)))
}

func upstreamExamplesOn(t *testing.T, tl *tools.Tools) {
	for _, tc := range upstreamExamples {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, tl, "s-caller", tc.tool, tc.args)
			if r.IsError || r.Text != tc.want {
				t.Fatalf("got (isError=%v %s)\n%s\n--- want ---\n%s", r.IsError, r.Code, r.Text, tc.want)
			}
		})
	}
	t.Run("session_event_read shows the full target and neighbour summaries", func(t *testing.T) {
		r := call(t, tl, "s-caller", tools.NameSessionEventRead, `{"session_id":"s-7f3c","seq":7,"before":1,"after":1}`)
		wantHead := "Session s-7f3c — Find where the retry budget\nTarget event seq 7:\n```json\n{\n  \"type\": \"tool/result\",\n  \"seq\": 7,\n"
		wantTail := "```\n\nBefore:\n- seq 6 | tool/call | 2026-08-29T10:40:00.901Z\n  grep\n  {\"pattern\":\"retryBudget\"}\n\n" +
			"After:\n- seq 8 | step/end | 2026-08-29T10:40:00.951Z | (no semantic text)"
		if r.IsError || !strings.HasPrefix(r.Text, wantHead) || !strings.HasSuffix(r.Text, wantTail) {
			t.Fatalf("got:\n%s", r.Text)
		}
		if !strings.Contains(r.Text, `"text": "src/config.ts:42: retryBudget: 3"`) || !strings.Contains(r.Text, `"sourceEventSeqs": [`) {
			t.Fatalf("target event is not complete:\n%s", r.Text)
		}
	})
	t.Run("a read window over the maximum is the sanitized window error", func(t *testing.T) {
		r := call(t, tl, "s-caller", tools.NameSessionEventRead, `{"session_id":"s-7f3c","seq":7,"before":80}`)
		wantError(t, r, "SESSION_QUERY_INVALID_WINDOW", "Error: session event window is invalid")
	})
}

// goldenCases are the renderings kept under testdata/golden.
var goldenCases = []struct {
	name, caller, tool, args string
}{
	{"session_search_example", "s-caller", tools.NameSessionSearch, `{"query":"retry budget"}`},
	{"session_search_empty", "s-caller", tools.NameSessionSearch, `{"query":"nothing like this"}`},
	{"session_search_full_corpus", "s-caller", tools.NameSessionSearch, `{"query":"retry budget"}`},
	{"session_search_capped", "s-caller", tools.NameSessionSearch, `{"query":"retry budget","event_surfaces":["current","shadowed","log-only"]}`},
	{"session_event_search_example", "s-caller", tools.NameSessionEventSearch, `{"session_id":"s-7f3c","query":"retry budget"}`},
	{"session_event_search_current_session", "s-caller", tools.NameSessionEventSearch, `{"query":"retry budget"}`},
	{"session_event_search_empty", "s-caller", tools.NameSessionEventSearch, `{"session_id":"s-7f3c","query":"absent words"}`},
	{"session_event_search_capped", "s-caller", tools.NameSessionEventSearch, `{"session_id":"s-7f3c","query":"retry budget"}`},
	{"session_trace_example", "s-caller", tools.NameSessionTrace, `{"session_id":"s-7f3c"}`},
	{"session_trace_child", "s-caller", tools.NameSessionTrace, `{"session_id":"s-9a01"}`},
	{"session_trace_orphan", "s-caller", tools.NameSessionTrace, `{"session_id":"a-orphan"}`},
	{"session_trace_self", "s-caller", tools.NameSessionTrace, `{}`},
	{"session_event_trace_example", "s-caller", tools.NameSessionEventTrace, `{"session_id":"s-7f3c","seq":1}`},
	{"session_event_trace_replacement", "s-caller", tools.NameSessionEventTrace, `{"session_id":"s-7f3c","seq":15}`},
	{"session_event_trace_source", "s-caller", tools.NameSessionEventTrace, `{"session_id":"s-7f3c","seq":6}`},
	{"session_event_read_example", "s-caller", tools.NameSessionEventRead, `{"session_id":"s-7f3c","seq":7,"before":1,"after":1}`},
	{"session_event_read_edges", "s-caller", tools.NameSessionEventRead, `{"session_id":"s-7f3c","seq":0,"before":5,"after":2}`},
	{"session_event_read_alone", "s-caller", tools.NameSessionEventRead, `{"seq":1}`},
	{"error_unauthorized", "s-caller", tools.NameSessionTrace, `{"session_id":"b-secret"}`},
	{"error_invalid_args", "s-caller", tools.NameSessionSearch, `{"query":1,"availability":["archived"],"cwd":"/"}`},
}

// TestGoldenRenderings renders every golden case on the real pipeline: one
// of the example corpus, one of the full corpus.
func TestGoldenRenderings(t *testing.T) {
	example, full := newService(t, exampleCorpus), newService(t, fullCorpus)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			svc := example
			var opts []tools.Option
			switch {
			case strings.Contains(tc.name, "full_corpus") || strings.Contains(tc.name, "orphan"):
				svc = full
			case strings.HasSuffix(tc.name, "_capped"):
				svc = full
				opts = append(opts, tools.WithMaxSearchResults(1))
			}
			tl := newTools(t, svc, opts...)
			goldenText(t, tc.name, resultText(call(t, tl, tc.caller, tc.tool, tc.args)))
		})
	}
}

// The tool list (names, descriptions, JSON Schemas) and the prompt section
// are what a model reads first; they are kept as a golden file.
func TestToolListGolden(t *testing.T) {
	b, err := json.MarshalIndent(struct {
		Tools  []tools.Definition `json:"tools"`
		Prompt string             `json:"prompt"`
	}{tools.Definitions(), tools.Prompt}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	goldenText(t, "tool_list", string(b)+"\n")
	for _, d := range tools.Definitions() {
		var schema map[string]any
		if err := json.Unmarshal(d.InputSchema, &schema); err != nil || schema["type"] != "object" {
			t.Fatalf("%s: schema %s", d.Name, d.InputSchema)
		}
	}
}
