package fold

import (
	"encoding/json"
	"slices"

	"github.com/dshq/dshq"
)

// envelopeKeys is the closed key set of an event record (UPSTREAM §2.1).
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

// checkStrict applies what the harness SDK checks on every append (UPSTREAM
// §1.4) beyond the envelope: lossless JSON, message shapes, the request
// header and the refused historical types.
func (s *State) checkStrict(e dshq.Event, data any) *ValidationError {
	raw := []byte(e.Raw)
	if len(raw) == 0 {
		raw = e.Data
	}
	if err := checkLossless(raw); err != nil {
		return invalid(e.Seq, RuleLossless, "session event %d is not lossless JSON: %v", e.Seq, err)
	}
	d := obj(data)
	switch e.Type {
	case "request/header-delta":
		return invalid(e.Seq, RuleRequestHeader, "session event %d: request/header-delta is no longer supported; log a full request/header", e.Seq)
	case "request/header":
		return s.checkRequestHeader(e, d)
	case dshq.TypeUserMessage:
		return checkMessage(e, d, "user", nil)
	case dshq.TypeAssistantMessage:
		return checkMessage(e, obj(d["message"]), "assistant", checkModelSource)
	case dshq.TypeToolResult:
		return checkMessage(e, obj(d["message"]), "user", checkToolSource)
	}
	return nil
}

// checkMessage checks an identified message: a non-empty id, the expected
// role, a source with a non-empty kind, array content, then the per-type
// source rule.
func checkMessage(e dshq.Event, m map[string]any, role string, check func(e dshq.Event, m map[string]any) *ValidationError) *ValidationError {
	bad := func(format string, args ...any) *ValidationError {
		return invalid(e.Seq, RuleMessageShape, "%s event %d: "+format, append([]any{e.Type, e.Seq}, args...)...)
	}
	switch {
	case m == nil && e.Type == dshq.TypeUserMessage:
		return bad("data must be a message object")
	case m == nil:
		return bad("data.message must be a message object")
	case !nonEmptyString(m["id"]):
		return bad("message id must be a non-empty string")
	case m["role"] != role:
		return bad("message role must be %q", role)
	case !nonEmptyString(obj(m["source"])["kind"]):
		return bad("message source.kind must be a non-empty string")
	}
	if _, ok := arr(m["content"]); !ok {
		return bad("message content must be an array")
	}
	if check != nil {
		return check(e, m)
	}
	return nil
}

func checkModelSource(e dshq.Event, m map[string]any) *ValidationError {
	src := obj(m["source"])
	if src["kind"] != "model" || !nonEmptyString(src["provider"]) || !nonEmptyString(src["model"]) {
		return invalid(e.Seq, RuleMessageShape, "%s event %d: message source must be {kind:\"model\", provider, model}", e.Type, e.Seq)
	}
	return nil
}

func checkToolSource(e dshq.Event, m map[string]any) *ValidationError {
	src := obj(m["source"])
	callID, _ := str(src["callId"])
	if src["kind"] != "tool" || callID == "" {
		return invalid(e.Seq, RuleMessageShape, "%s event %d: message source must be {kind:\"tool\", callId}", e.Type, e.Seq)
	}
	content, _ := arr(m["content"])
	var results []map[string]any
	for _, b := range content {
		if bo := obj(b); bo["type"] == "tool-result" {
			results = append(results, bo)
		}
	}
	if len(results) != 1 {
		return invalid(e.Seq, RuleMessageShape, "%s event %d: message content must hold exactly one tool-result block; found %d", e.Type, e.Seq, len(results))
	}
	if results[0]["toolCallId"] != callID {
		return invalid(e.Seq, RuleMessageShape, "%s event %d: tool-result toolCallId must equal source.callId %q", e.Type, e.Seq, callID)
	}
	return nil
}

// checkRequestHeader requires header.config.provider/model and a known
// reason; "fallback" was removed upstream and is refused with its own
// message.
func (s *State) checkRequestHeader(e dshq.Event, d map[string]any) *ValidationError {
	cfg := obj(obj(d["header"])["config"])
	if !nonEmptyString(cfg["provider"]) || !nonEmptyString(cfg["model"]) {
		return invalid(e.Seq, RuleRequestHeader, "request/header event %d must carry header.config.provider and header.config.model", e.Seq)
	}
	reason, _ := str(d["reason"])
	switch {
	case reason == "initial", reason == "resume", reason == "change":
		return nil
	case reason == "series" && !s.g0():
		return nil
	case reason == "fallback":
		return invalid(e.Seq, RuleRequestHeader, "request/header event %d: reason \"fallback\" is no longer supported", e.Seq)
	}
	return invalid(e.Seq, RuleRequestHeader, "request/header event %d has an invalid reason %s", e.Seq, describe(d["reason"]))
}

// describe renders a decoded JSON value for an error message.
func describe(v any) string {
	if v == nil {
		return "(absent or null)"
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) > 64 {
		return "(value)"
	}
	return string(b)
}
