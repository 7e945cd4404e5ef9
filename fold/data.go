package fold

import (
	"encoding/json"
	"math"

	"github.com/dshq/dshq"
)

// Data is an event's data as JSON.parse reads it: the one reading of event
// data that the fold, the CLI's previews and the web UI share. Every
// accessor gives the zero value for a member that is missing or of another
// type, so a presenter shows what a well-formed event says and nothing of
// what a malformed one garbles; Data of anything but a JSON object has no
// members.
type Data struct {
	m map[string]any
}

// DecodeData reads an event's data (see Data); data that is not JSON reads
// as no members.
func DecodeData(raw []byte) Data {
	v, err := decodeAny(raw)
	if err != nil {
		return Data{}
	}
	return dataOf(v)
}

// dataOf is the Data of a value in Go's generic JSON form.
func dataOf(v any) Data { return Data{m: obj(v)} }

// IsObject reports whether the data is a JSON object.
func (d Data) IsObject() bool { return d.m != nil }

// Value returns member key in Go's generic JSON form (map[string]any, []any,
// string, float64, bool), nil when it is missing or null.
func (d Data) Value(key string) any { return d.m[key] }

// String returns member key when it is a string.
func (d Data) String(key string) string {
	s, _ := str(d.m[key])
	return s
}

// Bool returns member key when it is a boolean.
func (d Data) Bool(key string) bool {
	b, _ := d.m[key].(bool)
	return b
}

// Object returns member key as Data (IsObject is false when it is not an
// object).
func (d Data) Object(key string) Data { return dataOf(d.m[key]) }

// List returns the elements of member key as Data, and false when it is not
// an array.
func (d Data) List(key string) ([]Data, bool) { return mapList(d.m[key], dataOf) }

// Int returns member key when it is an integer.
func (d Data) Int(key string) int64 { return intOf(d.m[key]) }

// Seqs returns member key as a list of integers (an element that is not an
// integer reads as 0), and false when it is not an array.
func (d Data) Seqs(key string) ([]int64, bool) { return mapList(d.m[key], intOf) }

// mapList maps the elements of v by f, and reports false when v is not an
// array.
func mapList[T any](v any, f func(any) T) ([]T, bool) {
	a, ok := arr(v)
	if !ok {
		return nil, false
	}
	out := make([]T, len(a))
	for i, e := range a {
		out[i] = f(e)
	}
	return out, true
}

// intOf is v when it is an integer, else 0.
func intOf(v any) int64 {
	if f, ok := v.(float64); ok && f == math.Trunc(f) && math.Abs(f) <= maxSafeInt {
		return int64(f)
	}
	return 0
}

// Message returns the message of a message event's data
// (docs/events-and-surfaces.md#model-history): a user/message's data itself,
// the data.message of an assistant/message or tool/result, or their data
// itself in the older shape without data.message. Other types have none.
func (d Data) Message(eventType string) Data {
	switch eventType {
	case dshq.TypeUserMessage:
		return d
	case dshq.TypeAssistantMessage, dshq.TypeToolResult:
		return Data{m: messageOf(d.m)}
	}
	return Data{}
}

// messageJSON is the JSON of e's message as it is written: the member that
// Data.Message reads.
func messageJSON(e dshq.Event) json.RawMessage {
	if e.Type != dshq.TypeUserMessage {
		if m := rawMember(e.Data, "message"); jsonKind(m) == '{' {
			return m
		}
	}
	return json.RawMessage(e.Data)
}

// Source returns the data's source (a message's: who or what wrote it).
func (d Data) Source() Data { return d.Object("source") }

// Blocks returns the content blocks of member key (a message's "content", a
// compaction summary's "summary"): the objects of that list, in order.
func (d Data) Blocks(key string) []Block { return blocksOf(d.m[key]) }

// ResultCallID returns the call a tool/result answers: message.source.callId,
// or data.callId in the older shape.
func (d Data) ResultCallID() string { return resultCallID(d.m) }

// Block is one content block of a message
// (docs/events-and-surfaces.md#messages-and-content-blocks).
type Block struct {
	// Type is text, reasoning, tool-call, tool-result, image or another.
	Type string
	// Text is a text or reasoning block's text.
	Text string
	// ID, Name and Arguments are a tool-call's.
	ID, Name, Arguments string
	// ToolCallID, IsError and Content are a tool-result's: the call it
	// answers, whether it failed, and its own blocks.
	ToolCallID string
	IsError    bool
	Content    []Block
	content    any // the list Content is read from
}

// blocksOf reads a content list: its objects, as blocks.
func blocksOf(list any) []Block {
	a, _ := arr(list)
	out := make([]Block, 0, len(a))
	eachBlock(list, func(b Block) {
		b.Content = blocksOf(b.content)
		out = append(out, b)
	})
	return out
}

// eachBlock calls fn with each block of a content list (its objects), in
// order, without reading a tool-result's own blocks (b.content holds them):
// the fold's walk, which allocates nothing.
func eachBlock(list any, fn func(Block)) {
	a, _ := arr(list)
	for _, v := range a {
		m := obj(v)
		if m == nil {
			continue
		}
		d := Data{m: m}
		fn(Block{
			Type: d.String("type"), Text: d.String("text"),
			ID: d.String("id"), Name: d.String("name"), Arguments: d.String("arguments"),
			ToolCallID: d.String("toolCallId"), IsError: d.Bool("isError"), content: m["content"],
		})
	}
}

// Member returns the JSON of member key of the object raw without
// insignificant whitespace, as it is written (not re-encoded); nil when raw
// is not an object or has no such member.
func Member(raw json.RawMessage, key string) json.RawMessage { return rawMember(raw, key) }
