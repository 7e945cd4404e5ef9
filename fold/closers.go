package fold

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/dshq/dshq"
)

// Crash-closer error codes and the fixed model-facing texts of their synthetic
// tool results
// (docs/events-and-surfaces.md#crash-closers-and-the-balanced-view).
const (
	// ToolOutcomeUnknown marks a call whose tool/call was logged but whose
	// result never was: it may or may not have run.
	ToolOutcomeUnknown = "TOOL_OUTCOME_UNKNOWN"
	// ToolNotStarted marks a call the model asked for that never reached a
	// logged tool/call.
	ToolNotStarted = "TOOL_NOT_STARTED"

	// OutcomeUnknownText is the result text of a TOOL_OUTCOME_UNKNOWN closer.
	OutcomeUnknownText = "The session was interrupted while this tool call was running: the call was recorded as started, but no result was recorded, so its outcome is unknown. It may or may not have taken effect. Before retrying, check whether it did; retry directly only if the operation is read-only or idempotent."
	// NotStartedText is the result text of a TOOL_NOT_STARTED closer.
	NotStartedText = "The session was interrupted before this tool call started, so it never ran. Call it again if it is still needed."
)

// Closers returns the synthetic events that balance a log whose last turn never
// ended (docs/events-and-surfaces.md#crash-closers-and-the-balanced-view), in
// order: one tool/result per unanswered tool call of the open step
// (TOOL_OUTCOME_UNKNOWN citing its tool/call seq when the tool/call was logged,
// TOOL_NOT_STARTED otherwise), a step/end if a step is open, then turn/end
// {reason:{kind:"interrupted"}}. Their seqs continue the log and their time
// repeats the last event's time. A balanced log gets none. The closers are
// never written; they apply cleanly to the state under Strict, in order. The
// state itself is not changed.
func (s *State) Closers() []dshq.Event {
	t := s.turn
	if !t.open {
		return nil
	}
	var out []dshq.Event
	seq := s.next
	for _, c := range t.pending {
		out = append(out, s.closerResult(seq, c))
		seq++
	}
	if t.stepOpen {
		out = append(out, s.closer("step/end", seq, jsonObject("turn", t.turn, "step", t.step), nil, nil))
		seq++
	}
	reason := json.RawMessage(`{"kind":"interrupted"}`)
	out = append(out, s.closer("turn/end", seq, jsonObject("turn", t.turn, "reason", reason), nil, nil))
	return out
}

// StoredClosers returns closers, the State.Closers of session id, as stored
// events are read: a closer tool/result is a surface append (current), the
// step/end and turn/end closers are log-only; each carries its semantic text
// and its envelope's sourceEventSeqs. StreamSeq is 0: closers are never
// stored.
func StoredClosers(id string, closers []dshq.Event) []dshq.StoredEvent {
	if len(closers) == 0 {
		return nil
	}
	out := make([]dshq.StoredEvent, len(closers))
	for i, ev := range closers {
		surface := dshq.SurfaceLogOnly
		if dshq.IsSurfaceType(ev.Type) {
			surface = dshq.SurfaceCurrent
		}
		var sources []int64
		if len(ev.SourceEventSeqs) > 0 {
			_ = json.Unmarshal(ev.SourceEventSeqs, &sources) // closers cite well-formed seqs
		}
		out[i] = dshq.StoredEvent{
			Record:  dshq.EventRecord{SessionID: id, Seq: ev.Seq, Type: ev.Type, Time: ev.Time, Surface: surface},
			Raw:     ev.Raw,
			Text:    Text(ev),
			Sources: sources,
		}
	}
	return out
}

func (s *State) closerResult(seq int64, c pendingCall) dshq.Event {
	code, name, text := ToolNotStarted, "ToolNotStartedError", NotStartedText
	var sources json.RawMessage
	if c.callSeq >= 0 {
		code, name, text = ToolOutcomeUnknown, "ToolOutcomeUnknownError", OutcomeUnknownText
		sources = json.RawMessage("[" + strconv.FormatInt(c.callSeq, 10) + "]")
	}
	callID := jsonString(c.id)
	block := jsonObject(
		"type", jsonString("tool-result"),
		"toolCallId", callID,
		"content", json.RawMessage("["+string(jsonObject("type", jsonString("text"), "text", jsonString(text)))+"]"),
		"isError", json.RawMessage("true"),
	)
	message := jsonObject(
		"id", jsonString("interrupted-tool-result-"+c.id+"-"+strconv.FormatInt(seq, 10)),
		"role", jsonString("user"),
		"source", jsonObject("kind", jsonString("tool"), "callId", callID),
		"content", json.RawMessage("["+string(block)+"]"),
	)
	data := jsonObject(
		"turn", s.turn.turn,
		"step", c.step,
		"message", message,
		"error", jsonObject("name", jsonString(name), "code", jsonString(code)),
	)
	return s.closer(dshq.TypeToolResult, seq, data, json.RawMessage(`"append"`), sources)
}

// closer builds one synthetic event with its raw record.
func (s *State) closer(typ string, seq int64, data, surfaceOp, sources json.RawMessage) dshq.Event {
	raw := jsonObject(
		"type", jsonString(typ),
		"seq", json.RawMessage(strconv.FormatInt(seq, 10)),
		"time", json.RawMessage(strconv.FormatInt(s.lastTime, 10)),
		"data", data,
		"surfaceOp", surfaceOp,
		"sourceEventSeqs", sources,
	)
	return dshq.Event{Type: typ, Seq: seq, Time: s.lastTime, Data: data, SurfaceOp: surfaceOp, SourceEventSeqs: sources, Raw: raw}
}

// jsonObject writes a JSON object from key/value pairs in order; a nil
// value omits its key.
func jsonObject(kv ...any) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for i := 0; i+1 < len(kv); i += 2 {
		v, _ := kv[i+1].(json.RawMessage)
		if v == nil {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(jsonString(kv[i].(string)))
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// jsonString encodes s as a JSON string without HTML escaping.
func jsonString(s string) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimRight(b.Bytes(), "\n")
}
