package web

import (
	"testing"

	"github.com/dshq/dshq"
)

// TestRenderReadsTheMessageAsTheFoldDoes: the transcript shows what search
// indexes, so a message in the older shape (content in data, no
// data.message, as the DeepSeek harness logs it) shows its blocks.
func TestRenderReadsTheMessageAsTheFoldDoes(t *testing.T) {
	tests := []struct {
		name, typ, data string
		want            string // the kinds of the blocks
		callID          string
	}{
		{"an assistant message in data.message", dshq.TypeAssistantMessage,
			`{"message":{"content":[{"type":"reasoning","text":"r"},{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}]}}`, "reasoning tool-call", ""},
		{"an assistant message in the older shape", dshq.TypeAssistantMessage,
			`{"content":[{"type":"text","text":"hi"}]}`, "text", ""},
		{"a tool result in the older shape", dshq.TypeToolResult,
			`{"callId":"c1","content":[{"type":"text","text":"out"}]}`, "text", "c1"},
		{"a block with a member of another type is still shown", dshq.TypeAssistantMessage,
			`{"message":{"content":[{"type":"tool-call","id":"c1","name":5,"arguments":"{}"}]}}`, "tool-call", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := renderEvent("s", dshq.Event{Type: tt.typ, Data: []byte(tt.data)}, inlineBytes, "")
			got := ""
			for i, b := range v.Blocks {
				if i > 0 {
					got += " "
				}
				got += b.Kind
			}
			if got != tt.want || v.CallID != tt.callID {
				t.Errorf("blocks %q call %q, want %q call %q", got, v.CallID, tt.want, tt.callID)
			}
		})
	}
}

func TestTurnEndShowsOnlyAReasonObject(t *testing.T) {
	v := renderEvent("s", dshq.Event{Type: "turn/end", Data: []byte(`{"turn":7,"reason":{"kind":"rejected","reason":"nope"}}`)}, 0, "")
	if v.Line != "Turn 7 ended: rejected" {
		t.Errorf("line %q", v.Line)
	}
	v = renderEvent("s", dshq.Event{Type: "turn/end", Data: []byte(`{"turn":1200,"reason":{"kind":"blocked","reason":{"kind":"hook","reason":"denied"}}}`)}, 0, "")
	if v.Line != "Turn 1,200 ended: blocked (hook denied)" || v.Class != "turn turn-bad" {
		t.Errorf("line %q class %q", v.Line, v.Class)
	}
}
