package build

import "encoding/json"

// The message and content shapes of a dshq log (docs/harnesses.md#events,
// docs/events-and-surfaces.md): what the fold checks at its strict level
// and what semantic text is read from.

// Message returns an identified message.
func Message(id, role string, source Obj, content Arr) Obj {
	if content == nil {
		content = Arr{}
	}
	return Obj{{"id", id}, {"role", role}, {"source", source}, {"content", content}}
}

// UserSource is the source of a human prompt.
func UserSource() Obj { return Obj{{"kind", "user"}} }

// CompactSource is the source of a compaction summary.
func CompactSource(compactionID string) Obj {
	return Obj{{"kind", "plugin"}, {"plugin", "compact"}, {"compactionId", compactionID}}
}

// ModelSource is the source of model output.
func ModelSource(provider, model string) Obj {
	if provider == "" {
		provider = "unknown"
	}
	if model == "" {
		model = "unknown"
	}
	return Obj{{"kind", "model"}, {"provider", provider}, {"model", model}}
}

// Text is a text block.
func Text(s string) Obj { return Obj{{"type", "text"}, {"text", s}} }

// Reasoning is a reasoning block: kept, never searchable.
func Reasoning(s string) Obj { return Obj{{"type", "reasoning"}, {"text", s}} }

// ToolCall is a tool-call block.
func ToolCall(id, name, arguments string) Obj {
	return Obj{{"type", "tool-call"}, {"id", id}, {"name", name}, {"arguments", arguments}}
}

// ToolResultMessage returns the message of a tool/result answering callID.
func ToolResultMessage(id, callID string, isError bool, content Arr) Obj {
	if content == nil {
		content = Arr{}
	}
	block := Obj{{"type", "tool-result"}, {"toolCallId", callID}, {"isError", isError}, {"content", content}}
	return Message(id, "user", Obj{{"kind", "tool"}, {"callId", callID}}, Arr{block})
}

// Completed and Aborted are turn/end reasons.
func Completed() Obj { return Obj{{"kind", "completed"}} }

// Aborted is the reason of a turn the user interrupted.
func Aborted(by string) Obj { return Obj{{"kind", "aborted"}, {"reason", Obj{{"kind", by}}}} }

// AppendBlocks appends the elements of a JSON list to out as content
// blocks: a string mapped by str, an object by obj; an element either leaves
// out (a nil func, or a nil Obj) is left to the source line. Anything but a
// list appends none.
func AppendBlocks(out Arr, list json.RawMessage, str func(string) Obj, obj func(Record) Obj) Arr {
	elems, _ := Array(list)
	for _, e := range elems {
		var b Obj
		if s, ok := String(e); ok {
			if str != nil {
				b = str(s)
			}
		} else if o, ok := Object(e); ok && obj != nil {
			b = obj(o)
		}
		if b != nil {
			out = append(out, b)
		}
	}
	return out
}

// TextMember is the obj of Blocks that maps an object with a string member
// "text" to a text block.
func TextMember(o Record) Obj {
	if s, ok := o.Str("text"); ok {
		return Text(s)
	}
	return nil
}

// ReasoningMember is TextMember for reasoning blocks.
func ReasoningMember(o Record) Obj {
	if s, ok := o.Str("text"); ok {
		return Reasoning(s)
	}
	return nil
}
