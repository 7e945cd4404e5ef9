package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/dshq/dshq"
)

// The five tool names (docs/tools.md#the-five-tools).
const (
	NameSessionSearch      = "session_search"
	NameSessionEventSearch = "session_event_search"
	NameSessionTrace       = "session_trace"
	NameSessionEventTrace  = "session_event_trace"
	NameSessionEventRead   = "session_event_read"
)

// Prompt is the tools' prompt section "tool:session-query"
// (docs/tools.md#the-prompt-section), written from the original's paraphrase.
const Prompt = "Use `session_search` to find relevant work in prior sessions, or " +
	"`session_event_search` to search the earlier events of one session. Both " +
	"return every match at once (there is no cursor to follow) and only ever " +
	"cover sessions of your own workspace. When a hit looks useful, follow it " +
	"with `session_trace` for the session's lineage, `session_event_trace` for " +
	"how an event was replaced or derived, or `session_event_read` for the " +
	"exact event data and its neighbours."

// PromptSection is the name of the prompt section Prompt fills.
const PromptSection = "tool:session-query"

// Definition is one tool as a model sees it.
type Definition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

type kind int

const (
	kString kind = iota
	kInteger
	kBoolean
	kStringArray
	kEnumArray
)

// param is one argument of a tool.
type param struct {
	name     string
	kind     kind
	enum     []string
	required bool
	desc     string
}

// spec is one tool: its definition and the parameters stage 1 checks.
type spec struct {
	name   string
	desc   string
	params []param
}

var (
	availabilityEnum = []string{"live", "persisted"}
	surfaceEnum      = []string{"current", "shadowed", "log-only"}
)

const timestampDesc = "ISO 8601 timestamp with a time zone (Z or ±HH:MM), e.g. 2026-08-29T10:40:00Z."

var specs = []spec{
	{
		name: NameSessionSearch,
		desc: "Search prior sessions in your workspace for a literal phrase and return the strongest matching event of each session, best matches first. Results are complete (no paging) up to a fixed cap and never include your own current session.",
		params: []param{
			{name: "query", kind: kString, required: true, desc: "Text to find, matched as one literal phrase (case- and accent-insensitive; not a search syntax)."},
			{name: "session_ids", kind: kStringArray, desc: "Only search these sessions."},
			{name: "created_at_from", kind: kString, desc: "Only sessions created at or after this time. " + timestampDesc},
			{name: "created_at_to", kind: kString, desc: "Only sessions created at or before this time. " + timestampDesc},
			{name: "parent_session_ids", kind: kStringArray, desc: "Only sessions forked or spawned from one of these sessions."},
			{name: "include_root_sessions", kind: kBoolean, desc: "Also include sessions without a parent (with parent_session_ids: either)."},
			{name: "availability", kind: kEnumArray, enum: availabilityEnum, desc: "live: a harness currently holds the session; persisted: the session is stored."},
			{name: "event_seq_from", kind: kInteger, desc: "Only events with seq at or above this."},
			{name: "event_seq_to", kind: kInteger, desc: "Only events with seq at or below this."},
			{name: "event_time_from", kind: kString, desc: "Only events at or after this time. " + timestampDesc},
			{name: "event_time_to", kind: kString, desc: "Only events at or before this time. " + timestampDesc},
			{name: "event_types", kind: kStringArray, desc: "Only events of these types, e.g. user/message, assistant/message, tool/call, tool/result, todo/write, turn/end."},
			{name: "event_surfaces", kind: kEnumArray, enum: surfaceEnum, desc: "current: in the model-visible history; shadowed: replaced by a compaction or pruning; log-only: never part of the history."},
		},
	},
	{
		name: NameSessionEventSearch,
		desc: "Search the prior events of one session in your workspace for a literal phrase. Without session_id it searches your current session, excluding the step that is making this call. Results are complete (no paging) up to a fixed cap.",
		params: []param{
			{name: "session_id", kind: kString, desc: "The session to search; omit for your current session."},
			{name: "query", kind: kString, required: true, desc: "Text to find, matched as one literal phrase (case- and accent-insensitive; not a search syntax)."},
			{name: "seq_from", kind: kInteger, desc: "Only events with seq at or above this."},
			{name: "seq_to", kind: kInteger, desc: "Only events with seq at or below this."},
			{name: "time_from", kind: kString, desc: "Only events at or after this time. " + timestampDesc},
			{name: "time_to", kind: kString, desc: "Only events at or before this time. " + timestampDesc},
			{name: "event_types", kind: kStringArray, desc: "Only events of these types."},
			{name: "surfaces", kind: kEnumArray, enum: surfaceEnum, desc: "current, shadowed (replaced) or log-only events."},
		},
	},
	{
		name: NameSessionTrace,
		desc: "Show the lineage of one session in your workspace: its ancestors (nearest first) and its descendants, with titles, creation times and availability. Sessions outside your workspace appear only as boundary markers.",
		params: []param{
			{name: "session_id", kind: kString, desc: "The session to trace; omit for your current session."},
		},
	},
	{
		name: NameSessionEventTrace,
		desc: "Show how one event relates to others in its session: what replaced it, what it replaced, the events it cites as sources and the events derived from it.",
		params: []param{
			{name: "session_id", kind: kString, desc: "The event's session; omit for your current session."},
			{name: "seq", kind: kInteger, required: true, desc: "The event's seq."},
		},
	},
	{
		name: NameSessionEventRead,
		desc: "Read one event in full (its complete JSON) plus optional summaries of its neighbours in the same session.",
		params: []param{
			{name: "session_id", kind: kString, desc: "The event's session; omit for your current session."},
			{name: "seq", kind: kInteger, required: true, desc: "The event's seq."},
			{name: "before", kind: kInteger, desc: "How many earlier events to summarize (default 0)."},
			{name: "after", kind: kInteger, desc: "How many later events to summarize (default 0)."},
		},
	},
}

func specByName(name string) (*spec, bool) {
	for i := range specs {
		if specs[i].name == name {
			return &specs[i], true
		}
	}
	return nil, false
}

// Definitions returns the five tools with their descriptions and JSON Schemas.
func Definitions() []Definition {
	out := make([]Definition, len(specs))
	for i, s := range specs {
		out[i] = Definition{Name: s.name, Description: s.desc, InputSchema: s.schema()}
	}
	return out
}

// schema renders the spec's JSON Schema with properties in declared order.
func (s spec) schema() json.RawMessage {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	var required []string
	for i, p := range s.params {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(p.name)
		b.Write(name)
		b.WriteByte(':')
		prop := map[string]any{"description": p.desc}
		switch p.kind {
		case kString:
			prop["type"] = "string"
		case kInteger:
			prop["type"] = "integer"
		case kBoolean:
			prop["type"] = "boolean"
		case kStringArray:
			prop["type"] = "array"
			prop["items"] = map[string]any{"type": "string"}
		case kEnumArray:
			prop["type"] = "array"
			prop["items"] = map[string]any{"type": "string", "enum": p.enum}
		}
		pb, _ := json.Marshal(prop)
		b.Write(pb)
		if p.required {
			required = append(required, p.name)
		}
	}
	b.WriteString(`},"required":`)
	if required == nil {
		required = []string{}
	}
	rb, _ := json.Marshal(required)
	b.Write(rb)
	b.WriteString(`,"additionalProperties":false}`)
	return b.Bytes()
}

// args are arguments that passed stage 1: every present value has its
// schema type.
type args map[string]json.RawMessage

// checkSchema is stage 1 (docs/tools.md#argument-validation): the generic JSON
// Schema check of type, enum, required and integer-ness. It fails with
// INVALID_ARGS "invalid arguments: <violations>".
func (s spec) checkSchema(raw json.RawMessage) (args, error) {
	var a args
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&a); err != nil || a == nil || dec.More() {
		return nil, invalidArgs([]string{"arguments must be a JSON object"})
	}
	var violations []string
	known := map[string]bool{}
	for _, p := range s.params {
		known[p.name] = true
		v, ok := a[p.name]
		if !ok {
			if p.required {
				violations = append(violations, p.name+": is required")
			}
			continue
		}
		if msg := p.check(v); msg != "" {
			violations = append(violations, p.name+": "+msg)
		}
	}
	var unknown []string
	for k := range a {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for i, k := range unknown {
		if i == maxUnknownListed {
			violations = append(violations, fmt.Sprintf("and %d more arguments that are not parameters of %s", len(unknown)-i, s.name))
			break
		}
		violations = append(violations, fmt.Sprintf("%s: is not a parameter of %s", dshq.Quote(k), s.name))
	}
	if len(violations) > 0 {
		return nil, invalidArgs(violations)
	}
	return a, nil
}

// maxUnknownListed bounds the unknown arguments a refusal names, so that
// its message stays short whatever the arguments hold.
const maxUnknownListed = 8

func invalidArgs(violations []string) error {
	return dshq.Errorf(dshq.CodeInvalidArgs, "invalid arguments: %s", strings.Join(violations, "; "))
}

// check returns "" when v has the parameter's type, else what is wrong.
func (p param) check(v json.RawMessage) string {
	switch p.kind {
	case kString:
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "must be a string"
		}
	case kBoolean:
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return "must be a boolean"
		}
	case kInteger:
		if _, ok := jsonInteger(v); !ok {
			return "must be an integer"
		}
	case kStringArray, kEnumArray:
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return "must be an array of strings"
		}
		for i, it := range items {
			var s string
			if json.Unmarshal(it, &s) != nil {
				return fmt.Sprintf("item %d must be a string", i)
			}
			if p.kind == kEnumArray && !contains(p.enum, s) {
				return fmt.Sprintf("item %d (%s) must be one of %s", i, dshq.Quote(s), strings.Join(p.enum, ", "))
			}
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// jsonInteger parses a JSON number with an integral value (1, 1.0 and 1e3
// are integers, as in JSON Schema) exactly, with decimal arithmetic. A value
// too large for any safe integer is returned as 10^20 (its sign kept).
func jsonInteger(v json.RawMessage) (*big.Int, bool) {
	var n json.Number
	s := strings.TrimSpace(string(v))
	if s == "" || !(s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) || json.Unmarshal(v, &n) != nil {
		return nil, false
	}
	s = string(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expPart, "+"))
		if err != nil || e > 1000 || e < -1000 {
			// Out of any useful range: zero, a fraction or huge.
			if strings.Trim(strings.ReplaceAll(mant, ".", ""), "0") == "" {
				return new(big.Int), true
			}
			if strings.HasPrefix(expPart, "-") {
				return nil, false
			}
			return huge(neg), true
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return new(big.Int), true
	}
	shift := exp - len(frac)
	trimmed := strings.TrimRight(digits, "0")
	shift += len(digits) - len(trimmed)
	if shift < 0 {
		return nil, false
	}
	if len(trimmed)+shift > 20 {
		return huge(neg), true
	}
	i, _ := new(big.Int).SetString(trimmed+strings.Repeat("0", shift), 10)
	if neg {
		i.Neg(i)
	}
	return i, true
}

func huge(neg bool) *big.Int {
	i := new(big.Int).Exp(big.NewInt(10), big.NewInt(20), nil)
	if neg {
		i.Neg(i)
	}
	return i
}

func (a args) has(name string) bool { _, ok := a[name]; return ok }

func (a args) str(name string) (string, bool) {
	v, ok := a[name]
	if !ok {
		return "", false
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return s, true
}

func (a args) strs(name string) ([]string, bool) {
	v, ok := a[name]
	if !ok {
		return nil, false
	}
	var s []string
	_ = json.Unmarshal(v, &s)
	if s == nil {
		s = []string{}
	}
	return s, true
}

func (a args) boolean(name string) bool {
	var b bool
	if v, ok := a[name]; ok {
		_ = json.Unmarshal(v, &b)
	}
	return b
}

// maxSafe is 2^53-1, the largest safe integer.
const maxSafe = 1<<53 - 1

// seqArg returns a non-negative safe integer argument (stage 2): anything
// else fails with SESSION_QUERY_INVALID_FILTER "<name> must be a
// non-negative safe integer".
func (a args) seqArg(name string) (int64, bool, error) {
	v, ok := a[name]
	if !ok {
		return 0, false, nil
	}
	i, _ := jsonInteger(v)
	if i == nil || i.Sign() < 0 || i.Cmp(big.NewInt(maxSafe)) > 0 {
		return 0, true, dshq.Errorf(dshq.CodeInvalidFilter, "%s must be a non-negative safe integer", name)
	}
	return i.Int64(), true, nil
}
