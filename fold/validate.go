package fold

import (
	"fmt"
	"slices"

	"github.com/dshq/dshq"
)

// envelopeKeys is the closed key set of an event record
// (docs/events-and-surfaces.md#the-event-envelope).
var envelopeKeys = map[string]bool{
	"type": true, "seq": true, "time": true, "data": true,
	"surfaceOp": true, "sourceEventSeqs": true, "ignorable": true,
}

// checkEnvelope applies the envelope rules both levels share: the record's
// key set (when its raw bytes are known), a type, seq = next index, a safe
// integer time, data present, ignorable absent or true.
func (s *State) checkEnvelope(e dshq.Event) *ValidationError {
	if len(e.Raw) > 0 {
		if err := checkRawEnvelope(e); err != nil {
			return err
		}
	}
	if e.Type == "" {
		return invalid(e.Seq, RuleEnvelope, "session event at seq %d has no type", e.Seq)
	}
	if e.Seq != s.next {
		return invalid(e.Seq, RuleSeq, "session event seq %d is not contiguous; expected %d", e.Seq, s.next)
	}
	if e.Time > maxSafeInt || e.Time < -maxSafeInt {
		return invalid(e.Seq, RuleEnvelope, "session event %d: time %d is not a safe integer", e.Seq, e.Time)
	}
	if len(e.Data) == 0 {
		return invalid(e.Seq, RuleEnvelope, "session event %d (%s) has no data", e.Seq, e.Type)
	}
	return nil
}

func checkRawEnvelope(e dshq.Event) *ValidationError {
	var extra []string
	var have [4]bool
	ignorable := []byte(nil)
	ok := scanObject(e.Raw, func(key string, val []byte) {
		switch key {
		case "type":
			have[0] = true
		case "seq":
			have[1] = true
		case "time":
			have[2] = true
		case "data":
			have[3] = true
		case "ignorable":
			ignorable = val
		default:
			if !envelopeKeys[key] {
				extra = append(extra, key)
			}
		}
	})
	if !ok {
		return invalid(e.Seq, RuleEnvelope, "session event at seq %d is not a JSON object", e.Seq)
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return invalid(e.Seq, RuleEnvelope, "session event %d has unexpected envelope key %q", e.Seq, extra[0])
	}
	for i, k := range []string{"type", "seq", "time", "data"} {
		if !have[i] {
			return invalid(e.Seq, RuleEnvelope, "session event %d has no %s", e.Seq, k)
		}
	}
	if ignorable != nil && string(ignorable) != "true" {
		return invalid(e.Seq, RuleEnvelope, "session event %d: ignorable must be absent or true", e.Seq)
	}
	return nil
}

// checkStrict applies what the original harness checks on every append and seed
// (docs/events-and-surfaces.md#strict-and-lenient-validation) beyond the
// envelope: lossless JSON, the refused legacy request-header vocabulary, the
// request header's provider/model, reasoningEffort and adapterDefaults, and the
// identified-message shapes, with upstream's messages.
func (s *State) checkStrict(e dshq.Event, data any) *ValidationError {
	raw := []byte(e.Raw)
	if len(raw) == 0 {
		raw = e.Data
	}
	if err := checkLossless(raw); err != nil {
		return invalid(e.Seq, RuleLossless, "session event at seq %d is not losslessly JSON-serializable: %v", e.Seq, err)
	}
	d := obj(data)
	switch e.Type {
	case "request/header-delta":
		return invalid(e.Seq, RuleRequestHeader, "session event at seq %d uses unsupported legacy request/header-delta format", e.Seq)
	case "request/header":
		return checkRequestHeader(e, d)
	case dshq.TypeUserMessage, dshq.TypeAssistantMessage, dshq.TypeToolResult:
		if msg := checkMessageShape(e.Type, data); msg != "" {
			return invalid(e.Seq, RuleMessageShape, "%s at seq %d %s", e.Type, e.Seq, msg)
		}
	}
	return nil
}

// checkRequestHeader refuses the legacy reason "fallback", a config
// without provider and model, an empty or non-string reasoningEffort, and
// adapterDefaults other than true markers for reasoningEffort/maxTokens
// keys present in the config.
func checkRequestHeader(e dshq.Event, d map[string]any) *ValidationError {
	bad := func(detail string) *ValidationError {
		return invalid(e.Seq, RuleRequestHeader, "request/header at seq %d %s", e.Seq, detail)
	}
	if d["reason"] == "fallback" {
		return bad(`uses unsupported legacy request/header reason "fallback"`)
	}
	header := obj(d["header"])
	cfg := obj(header["config"])
	if cfg == nil || !nonEmptyString(cfg["provider"]) || !nonEmptyString(cfg["model"]) {
		return bad("lacks provider/model")
	}
	if effort, ok := cfg["reasoningEffort"]; ok && !nonEmptyString(effort) {
		return bad("has an invalid reasoningEffort")
	}
	defaults, ok := header["adapterDefaults"]
	if !ok {
		return nil
	}
	markers := obj(defaults)
	if markers == nil {
		return bad("has invalid adapterDefaults")
	}
	for k, v := range markers {
		_, inConfig := cfg[k]
		if (k != "reasoningEffort" && k != "maxTokens") || v != true || !inConfig {
			return bad("has invalid adapterDefaults")
		}
	}
	return nil
}

// checkMessageShape returns what is wrong with a surface event's identified
// message ("" when nothing): a non-empty id, the role, a source with a
// non-empty kind, array content; an assistant source of kind model with
// provider and model; a tool source with a callId and exactly one
// tool-result block (with array content) answering it.
func checkMessageShape(typ string, data any) string {
	message := obj(data)
	if typ != dshq.TypeUserMessage {
		message = obj(message["message"])
	}
	if message == nil || !nonEmptyString(message["id"]) {
		return "lacks an identified message"
	}
	role := "user"
	if typ == dshq.TypeAssistantMessage {
		role = "assistant"
	}
	if message["role"] != role {
		return fmt.Sprintf("message must have role %q", role)
	}
	source := obj(message["source"])
	if source == nil || !nonEmptyString(source["kind"]) {
		return "message has invalid source"
	}
	content, ok := arr(message["content"])
	if !ok {
		return "message has invalid content"
	}
	switch typ {
	case dshq.TypeAssistantMessage:
		if source["kind"] != "model" || !nonEmptyString(source["provider"]) || !nonEmptyString(source["model"]) {
			return "message must have model source"
		}
	case dshq.TypeToolResult:
		callID, _ := str(source["callId"])
		if source["kind"] != "tool" || callID == "" {
			return "message must have tool source"
		}
		var block map[string]any
		if len(content) == 1 {
			block = obj(content[0])
		}
		if _, ok := arr(block["content"]); !ok || block["type"] != "tool-result" {
			return "message must contain one tool-result block"
		}
		if block["toolCallId"] != callID {
			return "message has mismatched tool call ids"
		}
	}
	return ""
}
