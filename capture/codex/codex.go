// Package codex converts OpenAI Codex CLI rollouts into dshq session
// logs, as docs/harnesses.md maps them: a rollout
// (sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl, archived_sessions/…)
// becomes session codex-<id>, a spawned or forked thread the child of its
// parent thread's session. Both the current envelope ({timestamp, type,
// payload} lines) and the bare legacy form (an {id, timestamp} line, then
// bare response items) are read. Prompts become turns and user messages
// (the event_msg copy of a prompt kept log-only), model output assistant
// messages (reasoning kept, never searchable), function, custom, shell and
// web-search calls tool calls, their outputs tool results citing them; a
// compacted line replaces the whole surface; task_complete and
// turn_aborted end the turn; every other line is kept as a log-only
// codex/<type> event, and a line that is not a JSON object as
// codex/invalid-line.
//
// Every event carries its source line (package capture), so the file can
// be written back byte for byte (capture.Source). The converter is pure
// and prefix-stable: see capture.Converter.
package codex

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/internal/build"
)

// Prefix starts every session id this package writes.
const Prefix = "codex-"

// Event types of the lines with no dshq meaning.
const (
	// TypeInvalidLine is the event of a line that is not a JSON object.
	TypeInvalidLine = dshq.HarnessCodex + "/invalid-line"
	// TypeUntyped is the event of a JSON object that is neither an
	// envelope, a legacy header nor a bare response item.
	TypeUntyped = dshq.HarnessCodex + "/untyped"
	// TypeLegacyHeader is the event of the {id, timestamp} first line of a
	// legacy rollout.
	TypeLegacyHeader = dshq.HarnessCodex + "/legacy-header"
	// TypeResponseItem and TypeEventMsg are the events of the response
	// items and event messages kept as they are (and of the second copy of
	// a prompt, reply or reasoning that Codex writes twice).
	TypeResponseItem = dshq.HarnessCodex + "/response_item"
	TypeEventMsg     = dshq.HarnessCodex + "/event_msg"
)

// defaultProvider is the provider of assistant messages when the rollout's
// session_meta names none.
const defaultProvider = "openai"

// copyKind names a mapped line a copy on the next line would repeat.
type copyKind int

const (
	none copyKind = iota
	itemUser
	itemAssistant
	itemReasoning
	eventUser
	eventAgent
	eventReasoning
)

// copies maps each kind to the kind whose next-line copy it is.
var copies = map[copyKind]copyKind{
	itemUser: eventUser, eventUser: itemUser,
	itemAssistant: eventAgent, eventAgent: itemAssistant,
	itemReasoning: eventReasoning, eventReasoning: itemReasoning,
}

// Converter converts one Codex rollout (capture.Converter).
type Converter struct {
	file *build.File
}

// Feed converts the next line (capture.Converter).
func (c *Converter) Feed(l capture.Line) ([]capture.Update, error) { return c.file.Feed(l) }

// Finish decides a header still waiting (capture.Converter).
func (c *Converter) Finish() []capture.Update { return c.file.Finish() }

// Stats returns the counts so far (capture.Converter).
func (c *Converter) Stats() capture.Stats { return c.file.Stats() }

// rollout is what converting a rollout knows of Codex (build.Format);
// build.File does the rest.
type rollout struct {
	// Before the header is decided.
	facts facts
	// After.
	s        *build.Session
	provider string
	model    string
	// metaSeen is set by the first session_meta line, whose model_provider
	// names the assistant messages' provider.
	metaSeen bool
	// prev is what the line before (number prevLine) mapped to, and prevSeq
	// its event: a line repeating it is a copy.
	prev     copyKind
	prevLine int64
	prevSeq  int64
}

// facts are what the lines have stated for the header so far.
type facts struct {
	id               string
	createdAt        int64
	haveTime         bool
	cwd              string
	cwdStated        bool
	parent           string
	depth            int64
	meta, legacy     bool
	contextCwd       string
	contextCwdStated bool
}

var uuidSuffix = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// New returns a converter for the rollout at cfg.Path.
func New(cfg capture.Config) *Converter {
	c := &rollout{provider: defaultProvider}
	_, base := build.FileName(cfg.Path)
	fromName := build.Stem(base)
	if m := uuidSuffix.FindString(fromName); m != "" {
		fromName = m
	}
	return &Converter{file: build.NewFile(cfg, dshq.HarnessCodex, fromName, c)}
}

// Learn gathers the header facts a line states (build.Format): the first
// timestamp, and the session_meta (or the legacy first line) that decides
// the header.
func (c *rollout) Learn(l capture.Line, r build.Record) bool {
	if r == nil {
		return false
	}
	f := &c.facts
	if ts, ok := r.Str("timestamp"); ok && !f.haveTime {
		f.createdAt, f.haveTime = build.Millis(ts)
	}
	typ, _ := r.Str("type")
	p, isObj := r.Obj("payload")
	switch {
	case typ == "session_meta" && isObj:
		f.meta = true
		f.id, _ = p.NonEmpty("id")
		f.cwd, f.cwdStated = p.Str("cwd")
		f.parent, f.depth = parentOf(p)
	case typ == "turn_context" && isObj && !f.contextCwdStated:
		f.contextCwd, f.contextCwdStated = p.Str("cwd")
	case l.No == 1 && !r.Has("type") && !r.Has("payload"):
		if id, ok := r.NonEmpty("id"); ok {
			f.legacy, f.id = true, id
		}
	}
	return f.meta || f.legacy
}

// parentOf returns the parent thread of a spawned or forked thread and its
// delegation depth (0 when the meta gives none).
func parentOf(meta build.Record) (string, int64) {
	src, _ := meta.Obj("source")
	sub, _ := src.Obj("subagent")
	spawn, _ := sub.Obj("thread_spawn")
	depth, _ := build.Int(spawn.Raw("depth"))
	for _, p := range []struct {
		r build.Record
		k string
	}{{spawn, "parent_thread_id"}, {meta, "parent_thread_id"}, {meta, "forked_from_id"}} {
		if id, ok := p.r.NonEmpty(p.k); ok {
			return id, depth
		}
	}
	return "", 0
}

// learnModel follows the model turn_context lines name.
func (c *rollout) learnModel(r build.Record) {
	if typ, _ := r.Str("type"); typ != "turn_context" {
		return
	}
	p, _ := r.Obj("payload")
	if m, ok := p.NonEmpty("model"); ok {
		c.model = m
	}
}

// Header fixes the header from the facts (build.Format).
func (c *rollout) Header(name string) build.HeaderFacts {
	f := c.facts
	id := f.id
	if id == "" {
		id = name
	}
	hf := build.HeaderFacts{ID: build.SessionID(Prefix, id), Harness: dshq.HarnessCodex, CreatedAt: f.createdAt,
		Cwd: f.cwd, CwdStated: f.cwdStated}
	if !f.meta && !f.legacy {
		hf.Cwd, hf.CwdStated = f.contextCwd, f.contextCwdStated
	}
	if f.parent != "" {
		hf.Parent, hf.Depth = build.SessionID(Prefix, f.parent), f.depth
	}
	return hf
}

// Start takes the rollout's session (build.Format).
func (c *rollout) Start(s *build.Session) { c.s = s }

// Convert converts one line (build.Format).
func (c *rollout) Convert(src *build.Src, r build.Record) string {
	c.learnModel(r)
	prev := none
	if c.prevLine == src.Line.No-1 {
		prev = c.prev
	}
	typ, isStr := r.Str("type")
	p, isObj := r.Obj("payload")
	if typ == "session_meta" && isObj && !c.metaSeen {
		c.metaSeen = true
		if prov, ok := p.NonEmpty("model_provider"); ok && len(prov) <= 200 {
			c.provider = prov
		}
	}
	switch {
	case isStr && r.Has("payload"):
		c.envelope(src, typ, p, isObj, prev)
	case src.Line.No == 1 && !r.Has("type") && r.Has("id"):
		c.s.LogOnly(src, TypeLegacyHeader, nil)
	case isStr && legacyItem[typ]:
		c.item(src, r, prev)
	default:
		lt := TypeUntyped
		if rt, ok := r.Str("record_type"); ok && build.Token(rt) {
			lt = dshq.HarnessCodex + "/" + rt
		} else if isStr && build.Token(typ) {
			lt = dshq.HarnessCodex + "/" + typ
		}
		c.s.LogOnly(src, lt, nil)
	}
	return TypeUntyped
}

// legacyItem is the response-item types a legacy rollout writes bare.
var legacyItem = map[string]bool{
	"message": true, "reasoning": true, "function_call": true, "function_call_output": true,
	"custom_tool_call": true, "custom_tool_call_output": true, "local_shell_call": true,
	"local_shell_call_output": true, "web_search_call": true,
}

// envelope converts a current-format line.
func (c *rollout) envelope(src *build.Src, typ string, p build.Record, isObj bool, prev copyKind) {
	lt := TypeUntyped
	if build.Token(typ) {
		lt = dshq.HarnessCodex + "/" + typ
	}
	if !isObj {
		c.s.LogOnly(src, lt, nil)
		return
	}
	switch typ {
	case "response_item":
		c.item(src, p, prev)
	case "event_msg":
		c.event(src, p, prev)
	case "compacted":
		c.compacted(src, p)
	default:
		c.s.LogOnly(src, lt, subtype(p))
	}
}

func subtype(p build.Record) build.Obj {
	if s, ok := p.Str("type"); ok && build.Token(s) {
		return build.O("subtype", s)
	}
	return nil
}

// isCopy reports whether a line of kind k repeats the previous line, and
// otherwise records that this line is of kind k (at the seq its mapped
// event will have).
func (c *rollout) isCopy(src *build.Src, k, prev copyKind) bool {
	if copies[k] == prev && prev != none {
		return true
	}
	c.prev, c.prevLine = k, src.Line.No
	return false
}

// copyEvent keeps a copy log-only, naming the event it repeats.
func (c *rollout) copyEvent(src *build.Src, typ string, p build.Record) {
	c.s.LogOnly(src, typ, append(subtype(p), build.Field{K: "copyOf", V: c.prevSeq}))
}

// item converts a response item.
func (c *rollout) item(src *build.Src, p build.Record, prev copyKind) {
	it, _ := p.Str("type")
	switch it {
	case "message":
		c.message(src, p, prev)
	case "reasoning":
		if c.isCopy(src, itemReasoning, prev) {
			c.copyEvent(src, TypeResponseItem, p)
			return
		}
		c.prevSeq = c.assistant(src, p, reasoningBlocks(p))
	case "function_call":
		args, ok := p.Str("arguments")
		if !ok {
			args = build.Compact(p.Raw("arguments"))
		}
		name, _ := p.Str("name")
		c.call(src, p, name, args)
	case "custom_tool_call":
		input, ok := p.Str("input")
		if !ok {
			input = build.Compact(p.Raw("input"))
		}
		name, _ := p.Str("name")
		c.call(src, p, name, input)
	case "local_shell_call":
		c.call(src, p, "local_shell", build.Compact(p.Raw("action")))
	case "web_search_call":
		// Answered inside the model's reply: a tool/call with no result
		// awaited, so no tool-call block either.
		id := src.ID(p, "", "id")
		c.s.Call(src, id, "web_search", build.Compact(p.Raw("action")))
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		c.output(src, p)
	default:
		c.s.LogOnly(src, TypeResponseItem, subtype(p))
	}
}

// message converts a message item: a user message is a prompt (unless it
// repeats the event_msg on the line before), an assistant message model
// output; developer and system messages are kept log-only.
func (c *rollout) message(src *build.Src, p build.Record, prev copyKind) {
	switch role, _ := p.Str("role"); role {
	case "user":
		if c.isCopy(src, itemUser, prev) {
			c.copyEvent(src, TypeResponseItem, p)
			return
		}
		c.prevSeq = c.prompt(src, p, contentBlocks(p.Raw("content")))
	case "assistant":
		if c.isCopy(src, itemAssistant, prev) {
			c.copyEvent(src, TypeResponseItem, p)
			return
		}
		c.prevSeq = c.assistant(src, p, contentBlocks(p.Raw("content")))
	default:
		c.s.LogOnly(src, TypeResponseItem, append(subtype(p), roleField(p)...))
	}
}

func roleField(p build.Record) build.Obj {
	if r, ok := p.Str("role"); ok && build.Token(r) {
		return build.O("role", r)
	}
	return nil
}

// event converts an event message.
func (c *rollout) event(src *build.Src, p build.Record, prev copyKind) {
	et, _ := p.Str("type")
	switch et {
	case "user_message":
		if c.isCopy(src, eventUser, prev) {
			c.copyEvent(src, TypeEventMsg, p)
			return
		}
		msg, _ := p.Str("message")
		c.prevSeq = c.prompt(src, p, build.Arr{build.Text(msg)})
	case "agent_message":
		if c.isCopy(src, eventAgent, prev) {
			c.copyEvent(src, TypeEventMsg, p)
			return
		}
		msg, _ := p.Str("message")
		c.prevSeq = c.assistant(src, p, build.Arr{build.Text(msg)})
	case "agent_reasoning":
		if c.isCopy(src, eventReasoning, prev) {
			c.copyEvent(src, TypeEventMsg, p)
			return
		}
		text, _ := p.Str("text")
		c.prevSeq = c.assistant(src, p, build.Arr{build.Reasoning(text)})
	case "task_started":
		c.s.LogOnly(src, TypeEventMsg, subtype(p))
		c.s.StartTurn(src)
	case "task_complete":
		c.s.LogOnly(src, TypeEventMsg, subtype(p))
		c.s.EndTurn(src, build.Completed())
	case "turn_aborted":
		c.s.LogOnly(src, TypeEventMsg, subtype(p))
		c.s.EndTurn(src, build.Aborted("user"))
	default:
		c.s.LogOnly(src, TypeEventMsg, subtype(p))
	}
}

// messageID returns the id of the next message derived from a line: the
// item's own id when it has one.
func messageID(src *build.Src, p build.Record) string { return src.MessageIDOf(p, "id") }

// prompt converts a human prompt: its turn, then the user message.
func (c *rollout) prompt(src *build.Src, p build.Record, content build.Arr) int64 {
	c.s.Prompt(src)
	return c.s.Append(src, dshq.TypeUserMessage, build.Message(messageID(src, p), "user", build.UserSource(), content), nil)
}

// assistant writes model output.
func (c *rollout) assistant(src *build.Src, p build.Record, content build.Arr) int64 {
	m := build.Message(messageID(src, p), "assistant", build.ModelSource(c.provider, c.model), content)
	seq := c.s.Append(src, dshq.TypeAssistantMessage, c.s.WithTurn(build.O("message", m)), nil)
	c.s.Output()
	return seq
}

// call writes a tool call: the assistant message asking for it, then the
// tool/call.
func (c *rollout) call(src *build.Src, p build.Record, name, args string) {
	id := src.ID(p, "", "call_id", "id")
	c.assistant(src, p, build.Arr{build.ToolCall(id, name, args)})
	c.s.Call(src, id, name, args)
}

// output writes a tool result citing its call.
func (c *rollout) output(src *build.Src, p build.Record) {
	id := src.ID(p, "", "call_id")
	content, isError := outputBlocks(p.Raw("output"))
	m := build.ToolResultMessage(messageID(src, p), id, isError, content)
	c.s.ToolResult(src, id, c.s.WithTurn(build.O("message", m)))
}

// compacted converts a compaction: a user message holding the summary and
// the replacement history's text, which replaces the whole surface.
func (c *rollout) compacted(src *build.Src, p build.Record) {
	content := build.Arr{}
	if msg, ok := p.NonEmpty("message"); ok {
		content = append(content, build.Text(msg))
	}
	history, _ := build.Array(p.Raw("replacement_history"))
	for _, h := range history {
		item, _ := build.Object(h)
		if t, _ := item.Str("type"); t == "message" {
			for _, b := range contentBlocks(item.Raw("content")) {
				if o := b.(build.Obj); o.Get("type") == "text" {
					content = append(content, o)
				}
			}
		}
	}
	id := fmt.Sprintf("line-%d", src.Line.No)
	c.s.ReplaceAll(src, build.Message(src.MessageID(id), "user", build.CompactSource(id), content))
}

// contentBlocks returns the blocks of a message's content: input and
// output text as text, reasoning blocks as reasoning; images and unknown
// blocks are left to the source line.
func contentBlocks(raw json.RawMessage) build.Arr {
	if s, ok := build.String(raw); ok {
		return build.Arr{build.Text(s)}
	}
	return build.AppendBlocks(build.Arr{}, raw, nil, func(o build.Record) build.Obj {
		bt, _ := o.Str("type")
		switch bt {
		case "input_text", "output_text", "text":
			s, _ := o.Str("text")
			return build.Text(s)
		case "refusal":
			s, _ := o.Str("refusal")
			return build.Text(s)
		case "reasoning", "reasoning_text", "summary_text":
			s, _ := o.Str("text")
			return build.Reasoning(s)
		}
		return nil
	})
}

// reasoningBlocks returns a reasoning item's summary and content as
// reasoning blocks (its encrypted content stays in the source line).
func reasoningBlocks(p build.Record) build.Arr {
	out := build.AppendBlocks(build.Arr{}, p.Raw("summary"), build.Reasoning, build.ReasoningMember)
	return build.AppendBlocks(out, p.Raw("content"), build.Reasoning, build.ReasoningMember)
}

// outputBlocks returns a tool output as text blocks: a string, an array of
// text blocks, or an object's content string (another object as its JSON
// text); and whether the object says the call failed.
func outputBlocks(raw json.RawMessage) (build.Arr, bool) {
	if s, ok := build.String(raw); ok {
		return build.Arr{build.Text(s)}, false
	}
	if o, ok := build.Object(raw); ok {
		failed := string(o.Raw("success")) == "false"
		if s, ok := o.Str("content"); ok {
			return build.Arr{build.Text(s)}, failed
		}
		return build.Arr{build.Text(build.Compact(raw))}, failed
	}
	return build.AppendBlocks(build.Arr{}, raw, build.Text, build.TextMember), false
}
