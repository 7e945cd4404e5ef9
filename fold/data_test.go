package fold

import (
	"slices"
	"testing"

	"github.com/dshq/dshq"
)

func TestDataMessage(t *testing.T) {
	tests := []struct {
		name, typ, data string
		want            []string // the types of the message's blocks
	}{
		{"a user/message is its data", dshq.TypeUserMessage, `{"content":[{"type":"text","text":"x"}]}`, []string{"text"}},
		{"a user/message's own message member is not read", dshq.TypeUserMessage, `{"message":{"content":[{"type":"image"}]}}`, []string{}},
		{"an assistant/message is its data.message", dshq.TypeAssistantMessage, `{"message":{"content":[{"type":"reasoning"},{"type":"tool-call"}]}}`, []string{"reasoning", "tool-call"}},
		{"the older shape without data.message is its data", dshq.TypeToolResult, `{"callId":"c","content":[{"type":"text"}]}`, []string{"text"}},
		{"a data.message that is not an object reads as the older shape", dshq.TypeAssistantMessage, `{"message":"x","content":[{"type":"text"}]}`, []string{"text"}},
		{"blocks that are not objects are passed over", dshq.TypeUserMessage, `{"content":[1,"x",null,{"type":"text"}]}`, []string{"text"}},
		{"other types have no message", "tool/call", `{"content":[{"type":"text"}]}`, []string{}},
		{"data that is not JSON has none", dshq.TypeUserMessage, `{"content":[`, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []string{}
			for _, b := range DecodeData([]byte(tt.data)).Message(tt.typ).Blocks("content") {
				got = append(got, b.Type)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("blocks %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDataGivesZeroForAMemberOfAnotherType(t *testing.T) {
	d := DecodeData([]byte(`{"s":5,"b":"true","o":[],"l":{},"n":1.5,"seqs":[1,"2",3.5,4]}`))
	if d.String("s") != "" || d.Bool("b") || d.Object("o").IsObject() || d.Int("n") != 0 {
		t.Error("a member of another type did not read as its zero value")
	}
	if _, ok := d.List("l"); ok {
		t.Error("an object read as a list")
	}
	if got, _ := d.Seqs("seqs"); !slices.Equal(got, []int64{1, 0, 0, 4}) {
		t.Errorf("Seqs = %v", got)
	}
	b := DecodeData([]byte(`{"content":[{"type":"tool-result","toolCallId":"c","isError":true,"content":[{"type":"text","text":"out"}]}]}`)).Blocks("content")
	if len(b) != 1 || b[0].ToolCallID != "c" || !b[0].IsError || len(b[0].Content) != 1 || b[0].Content[0].Text != "out" {
		t.Errorf("tool-result block = %+v", b)
	}
}

func TestModelHistoryReadsTheMessageDataMessageReads(t *testing.T) {
	e := handEvent(dshq.TypeToolResult, 0, `{"message":"x","content":[]}`, "", "")
	if got := string(messageJSON(e)); got != string(e.Data) {
		t.Errorf("messageJSON = %s, want the data", got)
	}
	e.Data = []byte(`{"message": {"id": "m"}}`)
	if got := string(messageJSON(e)); got != `{"id":"m"}` {
		t.Errorf("messageJSON = %s", got)
	}
}
