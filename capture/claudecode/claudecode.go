// Package claudecode converts Claude Code transcripts into dshq session
// logs, as docs/harnesses.md maps them: a main transcript
// (<project>/<session>.jsonl) becomes session cc-<sessionId>; a subagent
// transcript (<session>/subagents/agent-<id>.jsonl, or agent-<id>.jsonl
// beside the session file) becomes its child cc-<sessionId>-agent-<id>;
// sidechain records kept inline in a main transcript become such children
// too. Prompts become turns and user messages, model output assistant
// messages (thinking kept as reasoning, never searchable), tool uses tool
// calls, their results tool results citing them; a compaction summary
// replaces the whole surface, a rewind shadows the abandoned branch; every
// other record is kept as a log-only claude-code/<type> event, and a line
// that is not a JSON object as claude-code/invalid-line.
//
// Every event carries its source line (package capture), so the file can
// be written back byte for byte (capture.Source). The converter is pure
// and prefix-stable: see capture.Converter.
package claudecode

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/internal/build"
)

// Prefix starts every session id this package writes.
const Prefix = "cc-"

// provider is the provider of every assistant message.
const provider = "anthropic"

// Event types of the records with no dshq meaning.
const (
	// TypeInvalidLine is the event of a line that is not a JSON object.
	TypeInvalidLine = dshq.HarnessClaudeCode + "/invalid-line"
	// TypeUntyped is the event of a JSON object without a usable type.
	TypeUntyped = dshq.HarnessClaudeCode + "/untyped"
)

// Converter converts one Claude Code transcript (capture.Converter).
type Converter struct {
	file *build.File
}

// Feed converts the next line (capture.Converter).
func (c *Converter) Feed(l capture.Line) ([]capture.Update, error) { return c.file.Feed(l) }

// Finish decides a header still waiting (capture.Converter).
func (c *Converter) Finish() []capture.Update { return c.file.Finish() }

// Stats returns the counts so far (capture.Converter).
func (c *Converter) Stats() capture.Stats { return c.file.Stats() }

// transcript is what converting a transcript knows of Claude Code
// (build.Format); build.File does the rest.
type transcript struct {
	file *build.File
	cfg  capture.Config
	// agentFile is true for a subagent transcript: the file's session is a
	// child, and every record belongs to it.
	agentFile bool
	// agentFromName is the agent id the path gives.
	agentFromName string
	// Before the header is decided: what the lines told.
	facts facts
	// After: the file's own session and the children of its inline
	// sidechains.
	own      *thread
	children map[string]*thread
	// sidechain maps the uuid of an inline sidechain record to its thread.
	sidechain map[string]*thread
}

// facts are what the lines have stated for the file's header so far.
type facts struct {
	sessionID, agentID string
	createdAt          int64
	haveTime           bool
	cwd                string
	cwdStated          bool
	// firstSidechain is whether the first record stating a sessionId is a
	// sidechain (tells a subagent file from a main one without a path).
	firstSidechain, sawSession bool
}

// thread is one session's log and the record tree it follows.
type thread struct {
	s *build.Session
	// known maps the uuid of each record of the thread to its line.
	known map[string]int64
	// leaf is the uuid of the thread's last record with one.
	leaf string
}

func newThread(s *build.Session) *thread { return &thread{s: s, known: map[string]int64{}} }

// New returns a converter for the transcript at cfg.Path.
func New(cfg capture.Config) *Converter {
	c := &transcript{cfg: cfg, children: map[string]*thread{}, sidechain: map[string]*thread{}}
	dir, base := build.FileName(cfg.Path)
	stem := build.Stem(base)
	var sessionFromName string
	if a, ok := strings.CutPrefix(stem, "agent-"); ok && base != "" {
		c.agentFile, c.agentFromName = true, a
		if dir == "subagents" {
			sessionFromName, _ = build.FileName(strings.TrimRight(strings.TrimSuffix(cfg.Path, base), `/\`))
		}
	} else {
		sessionFromName = stem
	}
	if cfg.Own != nil {
		c.agentFile = cfg.Own.Header.ParentSession != nil
	}
	c.file = build.NewFile(cfg, dshq.HarnessClaudeCode, sessionFromName, c)
	return &Converter{file: c.file}
}

// Learn gathers the header facts a record states (build.Format).
func (c *transcript) Learn(_ capture.Line, r build.Record) bool {
	f := &c.facts
	if r != nil {
		if sid, ok := r.NonEmpty("sessionId"); ok && f.sessionID == "" {
			f.sessionID = sid
			f.sawSession, f.firstSidechain = true, r.True("isSidechain")
		}
		if a, ok := r.NonEmpty("agentId"); ok && f.agentID == "" {
			f.agentID = a
		}
		if ts, ok := r.Str("timestamp"); ok && !f.haveTime {
			f.createdAt, f.haveTime = build.Millis(ts)
		}
		if cwd, ok := r.Str("cwd"); ok && !f.cwdStated {
			f.cwd, f.cwdStated = cwd, true
		}
	}
	return f.sessionID != "" && f.cwdStated && f.haveTime
}

// Header fixes the file's header from the facts (build.Format).
func (c *transcript) Header(name string) build.HeaderFacts {
	f := c.facts
	if c.cfg.Path == "" && f.sawSession {
		c.agentFile = f.firstSidechain
	}
	sid := f.sessionID
	if sid == "" {
		sid = name
	}
	hf := build.HeaderFacts{Harness: dshq.HarnessClaudeCode, CreatedAt: f.createdAt, Cwd: f.cwd, CwdStated: f.cwdStated}
	if c.agentFile {
		agent := f.agentID
		if agent == "" {
			agent = c.agentFromName
		}
		hf.Parent = build.SessionID(Prefix, sid)
		hf.ID = build.SessionID(hf.Parent+"-agent-", agent)
		hf.Depth = 1
	} else {
		hf.ID = build.SessionID(Prefix, sid)
	}
	return hf
}

// Start takes the file's own session (build.Format).
func (c *transcript) Start(own *build.Session) { c.own = newThread(own) }

// Convert converts one record (build.Format): an inline sidechain record
// into its child session, where the own session keeps a copy routed to it.
func (c *transcript) Convert(src *build.Src, r build.Record) string {
	typ := recordType(r)
	if !c.agentFile && r.True("isSidechain") {
		t := c.sidechainThread(r, src)
		c.own.s.LogOnly(src, typ, build.O("routedTo", t.s.ID))
		c.record(t, src, r, typ)
	} else {
		c.record(c.own, src, r, typ)
	}
	return typ
}

// recordType returns the event type of a record kept as is.
func recordType(r build.Record) string {
	if t, ok := r.Str("type"); ok && build.Token(t) {
		return dshq.HarnessClaudeCode + "/" + t
	}
	return TypeUntyped
}

// sidechainThread returns the child session an inline sidechain record
// belongs to: its agentId's, else its parent record's, else a new one
// named after the record (an older transcript whose sidechain records lack
// agentId).
func (c *transcript) sidechainThread(r build.Record, src *build.Src) *thread {
	key, _ := r.NonEmpty("agentId")
	if key == "" {
		if p, ok := r.NonEmpty("parentUuid"); ok && c.sidechain[p] != nil {
			return c.remember(r, c.sidechain[p])
		}
		if key, _ = r.NonEmpty("uuid"); key == "" {
			key = fmt.Sprintf("line-%d", src.Line.No)
		}
	}
	if t := c.children[key]; t != nil {
		return c.remember(r, t)
	}
	own := c.own.s.Header().Header
	cwd, stated := r.Str("cwd")
	if !stated && own.Cwd != nil {
		cwd, stated = *own.Cwd, true
	}
	depth := int64(1)
	if own.DelegationDepth != nil {
		depth = *own.DelegationDepth + 1
	}
	hf := build.HeaderFacts{ID: build.SessionID(c.own.s.ID+"-agent-", key), Harness: dshq.HarnessClaudeCode,
		CreatedAt: src.Time, Cwd: cwd, CwdStated: stated, Parent: c.own.s.ID, Depth: depth}
	t := newThread(c.file.NewSession(hf.Record()))
	c.children[key] = t
	return c.remember(r, t)
}

func (c *transcript) remember(r build.Record, t *thread) *thread {
	if u, ok := r.NonEmpty("uuid"); ok {
		c.sidechain[u] = t
	}
	return t
}

// record converts a record into thread t.
func (c *transcript) record(t *thread, src *build.Src, r build.Record, typ string) {
	switch typ {
	case dshq.HarnessClaudeCode + "/user":
		c.user(t, src, r, typ)
	case dshq.HarnessClaudeCode + "/assistant":
		c.assistant(t, src, r, typ)
	case dshq.HarnessClaudeCode + "/system":
		c.system(t, src, r, typ)
	case dshq.HarnessClaudeCode + "/summary":
		c.title(t, src, r, typ, "summary", build.O("kind", "provider", "provider", provider), true)
	case dshq.HarnessClaudeCode + "/custom-title":
		c.title(t, src, r, typ, "customTitle", build.O("kind", "user"), false)
	default:
		t.s.LogOnly(src, typ, subtype(r))
	}
	if u, ok := r.NonEmpty("uuid"); ok {
		t.known[u] = src.Line.No
		t.leaf = u
	}
}

// subtype returns the fields a log-only event shows beside its source
// line: the record's subtype (system), data.type (progress) or operation
// (queue-operation), when it is a short token.
func subtype(r build.Record) build.Obj {
	s, ok := r.Str("subtype")
	if !ok {
		if d, isObj := r.Obj("data"); isObj {
			s, ok = d.Str("type")
		}
	}
	if !ok {
		s, ok = r.Str("operation")
	}
	if ok && build.Token(s) {
		return build.O("subtype", s)
	}
	return nil
}

// messageID returns the id of the next message derived from a record.
func messageID(src *build.Src, r build.Record) string { return src.MessageIDOf(r, "uuid") }

// user converts a user record: a prompt, tool results, or a compaction
// summary.
func (c *transcript) user(t *thread, src *build.Src, r build.Record, typ string) {
	msg, ok := r.Obj("message")
	if !ok {
		t.s.LogOnly(src, typ, nil)
		return
	}
	content := msg.Raw("content")
	if r.True("isCompactSummary") {
		compaction, ok := r.NonEmpty("uuid")
		if !ok {
			compaction = fmt.Sprintf("line-%d", src.Line.No)
		}
		t.s.ReplaceAll(src, build.Message(messageID(src, r), "user", build.CompactSource(compaction), textBlocks(content)))
		return
	}
	if r.True("isMeta") {
		t.s.LogOnly(src, typ, build.O("meta", true))
		return
	}
	if s, ok := build.String(content); ok {
		c.prompt(t, src, r, build.Arr{build.Text(s)})
		return
	}
	blocks, ok := build.Array(content)
	if !ok || len(blocks) == 0 {
		t.s.LogOnly(src, typ, nil)
		return
	}
	var texts build.Arr
	var results []build.Record
	for _, b := range blocks {
		if s, ok := build.String(b); ok {
			texts = append(texts, build.Text(s))
			continue
		}
		o, _ := build.Object(b)
		switch bt, _ := o.Str("type"); bt {
		case "tool_result":
			results = append(results, o)
		case "text":
			s, _ := o.Str("text")
			texts = append(texts, build.Text(s))
		}
	}
	if len(results) == 0 {
		c.prompt(t, src, r, texts)
		return
	}
	for _, res := range results {
		call := src.ID(res, "-result", "tool_use_id")
		m := build.ToolResultMessage(messageID(src, r), call, res.True("is_error"), textBlocks(res.Raw("content")))
		t.s.ToolResult(src, call, t.s.WithTurn(build.O("message", m)))
	}
	if len(texts) > 0 {
		t.s.Append(src, dshq.TypeUserMessage, build.Message(messageID(src, r), "user", build.UserSource(), texts), nil)
	}
}

// prompt converts a human prompt: its turn, then the user message, which
// replaces the abandoned branch when the prompt rewinds (its parent is a
// record of the thread other than the last one).
func (c *transcript) prompt(t *thread, src *build.Src, r build.Record, content build.Arr) {
	t.s.Prompt(src)
	m := build.Message(messageID(src, r), "user", build.UserSource(), content)
	if parent, ok := r.NonEmpty("parentUuid"); ok && parent != t.leaf {
		if line, known := t.known[parent]; known {
			t.s.ReplaceAfter(src, line, m)
			return
		}
	}
	t.s.Append(src, dshq.TypeUserMessage, m, nil)
}

// textBlocks returns the text blocks of a content value: a string, or an
// array of text blocks (and bare strings); other blocks (images, tool
// references) are left to the source line.
func textBlocks(content json.RawMessage) build.Arr {
	if s, ok := build.String(content); ok {
		return build.Arr{build.Text(s)}
	}
	return build.AppendBlocks(build.Arr{}, content, build.Text, func(o build.Record) build.Obj {
		if bt, _ := o.Str("type"); bt == "text" {
			s, _ := o.Str("text")
			return build.Text(s)
		}
		return nil
	})
}

// assistant converts an assistant record: one assistant message (text,
// thinking as reasoning, tool uses as tool calls), then a tool/call per
// tool use.
func (c *transcript) assistant(t *thread, src *build.Src, r build.Record, typ string) {
	msg, ok := r.Obj("message")
	if !ok {
		t.s.LogOnly(src, typ, nil)
		return
	}
	var content build.Arr
	type call struct{ id, name, args string }
	var calls []call
	if s, ok := msg.Str("content"); ok {
		content = build.Arr{build.Text(s)}
	}
	blocks, _ := build.Array(msg.Raw("content"))
	for i, b := range blocks {
		if s, ok := build.String(b); ok {
			content = append(content, build.Text(s))
			continue
		}
		o, _ := build.Object(b)
		switch bt, _ := o.Str("type"); bt {
		case "text":
			s, _ := o.Str("text")
			content = append(content, build.Text(s))
		case "thinking":
			s, _ := o.Str("thinking")
			content = append(content, build.Reasoning(s))
		case "tool_use", "server_tool_use":
			id := src.ID(o, "-call-"+strconv.Itoa(i+1), "id")
			name, _ := o.Str("name")
			args := build.Compact(o.Raw("input"))
			content = append(content, build.ToolCall(id, name, args))
			calls = append(calls, call{id, name, args})
		}
	}
	model, _ := msg.Str("model")
	m := build.O("id", messageID(src, r), "role", "assistant", "source", build.ModelSource(provider, model), "content", orEmpty(content))
	t.s.Append(src, dshq.TypeAssistantMessage, t.s.WithTurn(build.O("message", m)), nil)
	t.s.Output()
	for _, cl := range calls {
		t.s.Call(src, cl.id, cl.name, cl.args)
	}
}

func orEmpty(a build.Arr) build.Arr {
	if a == nil {
		return build.Arr{}
	}
	return a
}

// system keeps a system record and ends the open turn when the record
// says the turn is over (turn_duration; stop_hook_summary unless a hook
// made the model continue).
func (c *transcript) system(t *thread, src *build.Src, r build.Record, typ string) {
	t.s.LogOnly(src, typ, subtype(r))
	switch st, _ := r.Str("subtype"); st {
	case "turn_duration":
		t.s.EndTurn(src, build.Completed())
	case "stop_hook_summary":
		if !r.True("preventedContinuation") {
			t.s.EndTurn(src, build.Completed())
		}
	}
}

// title converts a summary (a title for the branch whose leaf is
// leafUuid: only when that record is in the thread already) or a custom
// title into session/title; otherwise the record is kept log-only.
func (c *transcript) title(t *thread, src *build.Src, r build.Record, typ, field string, source build.Obj, needLeaf bool) {
	title, _ := r.Str(field)
	if field == "customTitle" && title == "" {
		title, _ = r.Str("title")
	}
	title = strings.TrimSpace(title)
	leaf, _ := r.NonEmpty("leafUuid")
	_, known := t.known[leaf]
	if title == "" || (needLeaf && !known) {
		t.s.LogOnly(src, typ, nil)
		return
	}
	t.s.Event(src, "session/title", build.O("title", title, "messageSeqs", []int64{}, "source", source))
}
