package main

import (
	"strings"
	"testing"

	"github.com/dshq/dshq"
)

func TestPreviewSaysWhatAnEventWithoutTextCarries(t *testing.T) {
	tests := []struct {
		name, typ, data, want string
	}{
		{"a failed tool result says so", dshq.TypeToolResult,
			`{"message":{"source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","isError":true,"content":[{"type":"text","text":"boom"}]}]}}`, "error: boom"},
		{"a failed tool result in the older shape says so", dshq.TypeToolResult,
			`{"callId":"c","content":[{"type":"tool-result","toolCallId":"c","isError":true,"content":[{"type":"text","text":"boom"}]}]}`, "error: boom"},
		{"a plugin's message names the plugin", dshq.TypeUserMessage,
			`{"source":{"kind":"plugin","plugin":"compact"},"content":[{"type":"text","text":"summary"}]}`, "[compact] summary"},
		{"a model's thinking is shown as thinking", dshq.TypeAssistantMessage,
			`{"message":{"content":[{"type":"reasoning","text":"hmm"}]}}`, "thinking: hmm"},
		{"a message of blank text is blank", dshq.TypeAssistantMessage, `{"message":{"content":[{"type":"text","text":"  "}]}}`, "(blank)"},
		{"a chunk shows its delta", "assistant/chunk", `{"chunk":{"type":"text-delta","text":"a\nb"}}`, `text-delta "a\nb"`},
		{"a chunk shows the block it ends", "assistant/chunk", `{"chunk":{"type":"block-end","block":{"type":"tool-call","name":"bash"}}}`, "block-end tool-call bash"},
		{"a title is its text", "session/title", `{"title":"Fix it"}`, "Fix it"},
		{"a harness record its subtype, route and copy", dshq.HarnessCodex + "/event_msg", `{"subtype":"agent_message","routedTo":"s2","copyOf":9}`, "agent_message → s2 (copy of 9)"},
		{"other types nothing", "turn/start", `{"turn":1}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := preview(dshq.Event{Type: tt.typ, Data: []byte(tt.data)}); got != tt.want {
				t.Errorf("preview = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrintEventNamesTheToolOfAResult(t *testing.T) {
	calls := map[string]string{}
	var b strings.Builder
	printEvent(&b, dshq.Event{Seq: 1, Type: "tool/call", Data: []byte(`{"callId":"c1","name":"bash","arguments":"{}"}`)}, false, calls)
	for _, data := range []string{
		`{"message":{"source":{"kind":"tool","callId":"c1"},"content":[{"type":"text","text":"ok"}]}}`,
		`{"callId":"c1","content":[{"type":"text","text":"ok"}]}`, // the older shape
	} {
		b.Reset()
		printEvent(&b, dshq.Event{Seq: 2, Type: dshq.TypeToolResult, Data: []byte(data)}, false, calls)
		if !strings.Contains(b.String(), "bash → ok") {
			t.Errorf("row %q does not name the tool", b.String())
		}
	}
}
