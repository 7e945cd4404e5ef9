package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/internal/numfmt"
)

// Limits of what one event shows. A body (a text block, a tool's output or
// arguments, the record as written) longer than the limit is cut at a UTF-8
// boundary and says how many bytes it left out, with a "show all" link: the
// transcript cuts at inlineBytes, the event's own page at pageBytes, and only
// its ?all=1 renders a body whole.
const (
	// inlineBytes cuts one body in the transcript and the conversation.
	inlineBytes = 8 << 10
	// pageBytes cuts one body on the event's page.
	pageBytes = 64 << 10
	// collapseLines: a tool result longer than this is collapsed.
	collapseLines = 24
)

// eventView is one event as the transcript shows it. Every string in it
// has been through clean.
type eventView struct {
	SessionID  string // the raw id, for URLs
	Seq        int64
	Type       string
	Time       int64
	Surface    string // current, shadowed, log-only; "" when unknown
	ReplacedBy *int64
	// Replaced lists the events a replacement shadowed (from its trace);
	// ReplaceStart/End is its surfaceOp range.
	Replaced                 []int64
	IsReplace                bool
	ReplaceStart, ReplaceEnd int64
	Sources                  []int64
	// Shadows lists the seqs a compaction summary or prune names.
	Shadows   []int64
	Inherited bool
	Invalid   bool

	// Class selects the look: user, assistant, tool-call, tool-result,
	// turn, step, compaction, title, todo, request, marker, other.
	Class  string
	Who    string // "User", "Assistant", "Tool result", …
	Detail string // model, tool name, reason: beside Who
	Blocks []block
	Error  string
	// Line is the one-line text of a structural event; Note a line of a
	// compaction summary.
	Line  string
	Note  string
	Todos []todo
	// Raw is the pretty-printed record for the raw view.
	Raw        string
	RawOmitted int // bytes left out of Raw
	// ShowAll is the URL that shows the event whole, set when a body was cut.
	ShowAll string
	// CallID is the call a tool/call or tool/result is about.
	CallID string
	// Synthetic marks a crash closer: an event dshq synthesized to balance a
	// log whose last turn never ended (never stored, never shown for a live
	// session).
	Synthetic bool
	// Failed marks a tool result that is an error.
	Failed bool

	ignorable  bool
	turnNumber string // of turn/start and turn/end
}

// block is one content block.
type block struct {
	Kind      string // text, output, reasoning, tool-call, tool-result, image, other
	Text      string
	Parts     []textPart // of a text block
	Omitted   int        // bytes cut from Text (or Args)
	Collapsed bool
	Lines     int
	Name      string
	Args      string
	IsError   bool
	Children  []block
	// ShowAll is the event's ShowAll, on a block that was cut.
	ShowAll string
	// A tool-call block in the conversation: its call id, the tool/call
	// event that repeats it (folded into it) and its result (paired by
	// call id), or where the result is when it is on another page.
	CallID     string
	CallSeq    int64
	HasCallSeq bool
	Result     *eventView
}

type todo struct {
	Status, Content string
}

// renderEvent builds the view of e, every body cut at limit bytes (0: none;
// see inlineBytes, pageBytes); showAll is the URL that shows it whole.
func renderEvent(sessionID string, e dshq.Event, limit int, showAll string) eventView {
	v := eventView{SessionID: sessionID, Seq: e.Seq, Type: clean(e.Type), Time: e.Time, ignorable: e.Ignorable}
	v.Raw, v.RawOmitted = prettyJSON(e.Raw, limit)
	if len(e.SurfaceOp) > 0 && e.SurfaceOp[0] == '{' {
		var op struct {
			Start, End int64
		}
		if json.Unmarshal(e.SurfaceOp, &op) == nil {
			v.IsReplace, v.ReplaceStart, v.ReplaceEnd = true, op.Start, op.End
		}
	}
	if len(e.SourceEventSeqs) > 0 {
		_ = json.Unmarshal(e.SourceEventSeqs, &v.Sources)
	}
	r := renderer{limit: limit}
	r.fill(&v, e)
	cut := v.RawOmitted > 0
	for i := range v.Blocks {
		cut = markCut(v.Blocks[i:i+1], showAll) || cut
	}
	if cut {
		v.ShowAll = showAll
	}
	v.Failed = v.Class == "tool-result" && v.Error != ""
	return v
}

// markCut sets ShowAll on the blocks that were cut and reports whether any
// was.
func markCut(bs []block, showAll string) bool {
	cut := false
	for i := range bs {
		if bs[i].Omitted > 0 {
			bs[i].ShowAll, cut = showAll, true
		}
		cut = markCut(bs[i].Children, showAll) || cut
	}
	return cut
}

type renderer struct{ limit int }

// fill reads e's data (fold.Data: the reading the fold and the CLI share)
// into v.
func (r renderer) fill(v *eventView, e dshq.Event) {
	d := fold.DecodeData(e.Data)
	switch e.Type {
	case dshq.TypeUserMessage:
		r.user(v, d)
	case dshq.TypeAssistantMessage:
		r.assistant(v, d)
	case "tool/call":
		callID := d.String("callId")
		v.Class, v.Who, v.Detail, v.CallID = "tool-call", "Tool call", clean(d.String("name")), callID
		args, omitted := r.args(d.String("arguments"))
		v.Blocks = []block{{Kind: "tool-call", Args: args, Omitted: omitted, CallID: callID}}
	case dshq.TypeToolResult:
		r.toolResult(v, d)
	case "turn/start":
		v.turnNumber = num(d.Value("turn"))
		v.Class, v.Line = "turn", "Turn "+v.turnNumber+" started"
	case "turn/end":
		r.turnEnd(v, d)
	case "step/start", "step/end":
		verb := "started"
		if e.Type == "step/end" {
			verb = "ended"
		}
		v.Class, v.Line = "step", "Step "+num(d.Value("step"))+" "+verb
	case "request/header":
		config := d.Object("header").Object("config")
		v.Class = "request"
		v.Line = clean(strings.TrimSpace(fmt.Sprintf("Request %s: %s %s %s", d.String("reason"), str(config.Value("provider")),
			str(config.Value("model")), str(config.Value("reasoningEffort")))))
	case "request/context":
		v.Class = "request"
		v.Line = clean(strings.TrimSpace(fmt.Sprintf("Context: %s %s %s", str(d.Value("provider")), str(d.Value("model")), num(d.Value("contextWindow")))))
	case "session/title":
		v.Class, v.Line = "title", "Title: "+clean(str(d.Value("title")))
	case "session/end-seed":
		v.Class, v.Line = "marker", "End of the inherited prefix"
	case "todo/write":
		r.todos(v, d)
	case "compaction/start", "compaction/end", "compaction/summary", "compaction/prune":
		r.compaction(v, e, d)
	default:
		v.Class, v.Who = "other", clean(e.Type)
	}
}

func (r renderer) user(v *eventView, d fold.Data) {
	m := d.Message(dshq.TypeUserMessage)
	v.Class, v.Who = "user", "User"
	switch src := m.Source(); src.String("kind") {
	case "plugin":
		plugin := src.String("plugin")
		v.Class, v.Who, v.Detail = "plugin", "Context", clean(plugin)
		if plugin == "compact" {
			v.Class, v.Who, v.Detail = "checkpoint", "Compaction checkpoint", clean(str(src.Value("compactionId")))
		}
	case "tool":
		v.Who = "Tool output"
	}
	v.Blocks = r.blocks(m.Blocks("content"))
}

func (r renderer) assistant(v *eventView, d fold.Data) {
	m := d.Message(dshq.TypeAssistantMessage)
	v.Class, v.Who = "assistant", "Assistant"
	v.Detail = clean(str(m.Source().Value("model")))
	if u := d.Object("usage"); u.IsObject() {
		if in, out := num(u.Value("inputTokens")), num(u.Value("outputTokens")); in != "" || out != "" {
			v.Detail = strings.TrimSpace(v.Detail + " · " + in + " in / " + out + " out")
		}
	}
	if d.Bool("interrupted") {
		v.Error = "interrupted"
	}
	v.Blocks = r.blocks(m.Blocks("content"))
}

func (r renderer) toolResult(v *eventView, d fold.Data) {
	v.Class, v.Who = "tool-result", "Tool result"
	v.CallID = d.ResultCallID()
	v.Detail = clean(v.CallID)
	v.Blocks = r.blocks(d.Message(dshq.TypeToolResult).Blocks("content"))
	if e := d.Object("error"); e.IsObject() {
		v.Error = clean(strings.TrimSpace(e.String("name") + " " + str(e.Value("code"))))
	}
	for _, b := range v.Blocks {
		if b.IsError && v.Error == "" {
			v.Error = "error"
		}
	}
}

func (r renderer) turnEnd(v *eventView, d fold.Data) {
	reason := d.Object("reason")
	kind := reason.String("kind")
	v.Class, v.turnNumber = "turn", num(d.Value("turn"))
	v.Line = "Turn " + v.turnNumber + " ended: " + clean(kind)
	switch err, why := reason.Object("error"), reason.Object("reason"); {
	case err.IsObject():
		v.Error = clean(strings.TrimSpace(err.String("message") + " " + str(err.Value("code"))))
	case why.IsObject():
		v.Line += " (" + clean(strings.TrimSpace(why.String("kind")+" "+why.String("reason"))) + ")"
	}
	if kind != "completed" && kind != "" {
		v.Class = "turn turn-bad"
	}
}

func (r renderer) todos(v *eventView, d fold.Data) {
	todos, _ := d.List("todos")
	v.Class, v.Who = "todo", "Todo list"
	for _, t := range todos {
		v.Todos = append(v.Todos, todo{Status: clean(t.String("status")), Content: clean(t.String("content"))})
	}
}

func (r renderer) compaction(v *eventView, e dshq.Event, d fold.Data) {
	v.Class = "compaction"
	id := clean(str(d.Value("compactionId")))
	switch e.Type {
	case "compaction/start":
		v.Line = "Compaction " + id + " started"
	case "compaction/end":
		v.Line = "Compaction " + id + " ended"
		if d.Value("error") != nil {
			v.Error = clean(string(fold.Member(e.Data, "error")))
		}
	default:
		what := "Compaction summary"
		if e.Type == "compaction/prune" {
			what = "Tool-result pruning"
		}
		v.Who, v.Detail = what, id
		v.Shadows, _ = d.Seqs("shadowedSeqs")
		if rg := d.Object("shadowedRange"); rg.IsObject() {
			v.Note = fmt.Sprintf("shadows %d events in #%d–#%d (%s tokens)", len(v.Shadows), rg.Int("start"), rg.Int("end"), num(d.Value("shadowedTokenCount")))
		}
		v.Blocks = r.blocks(d.Blocks("summary"))
	}
}

// blocks renders content blocks.
func (r renderer) blocks(content []fold.Block) []block {
	out := make([]block, 0, len(content))
	for _, b := range content {
		switch b.Type {
		case "text", "reasoning":
			out = append(out, r.text(b.Type, b.Text))
		case "tool-call":
			args, omitted := r.args(b.Arguments)
			out = append(out, block{Kind: "tool-call", Name: clean(b.Name), Args: args, Omitted: omitted, CallID: b.ID})
		case "tool-result":
			children := r.blocks(b.Content)
			lines := 0
			for i, c := range children {
				lines += c.Lines
				if c.Kind == "text" {
					children[i].Kind, children[i].Parts = "output", nil
				}
			}
			out = append(out, block{Kind: "tool-result", IsError: b.IsError, Children: children, Lines: lines,
				Collapsed: lines > collapseLines && r.limit > 0})
		case "image":
			out = append(out, block{Kind: "image", Text: "image"})
		default:
			out = append(out, block{Kind: "other", Text: clean(b.Type)})
		}
	}
	return out
}

func (r renderer) text(kind, s string) block {
	b := block{Kind: kind, Lines: strings.Count(s, "\n") + 1}
	s, b.Omitted = cutBytes(s, r.limit)
	b.Text = clean(s)
	if kind == "text" {
		b.Parts = splitFences(b.Text)
	}
	return b
}

// textPart is prose or a fenced code block of a text block.
type textPart struct {
	Code bool
	Lang string
	Text string
}

// splitFences splits Markdown-style ``` fences out of s, so code reads as
// code; everything else stays text (no other markup is interpreted).
func splitFences(s string) []textPart {
	if !strings.Contains(s, "```") {
		return []textPart{{Text: s}}
	}
	var out []textPart
	var cur strings.Builder
	code, lang := false, ""
	emit := func() {
		t := cur.String()
		if !code {
			t = strings.Trim(t, "\n")
		} else {
			t = strings.TrimSuffix(t, "\n")
		}
		if t != "" || code {
			out = append(out, textPart{Code: code, Lang: lang, Text: t})
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(s, "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "```") {
			emit()
			if code {
				code, lang = false, ""
			} else {
				code, lang = true, strings.TrimSpace(strings.TrimPrefix(l, "```"))
			}
			continue
		}
		cur.WriteString(line)
	}
	emit()
	return out
}

// args pretty-prints tool-call arguments when they are JSON, cut at the
// limit (the bytes left out are returned).
func (r renderer) args(s string) (string, int) {
	var buf bytes.Buffer
	if len(s) <= 4*pageBytes && json.Valid([]byte(s)) && json.Indent(&buf, []byte(s), "", "  ") == nil {
		s = buf.String()
	}
	s, omitted := cutBytes(s, r.limit)
	return clean(s), omitted
}

// prettyJSON indents a record for the raw view, cut at limit bytes (0:
// whole); it returns the bytes left out.
func prettyJSON(raw []byte, limit int) (string, int) {
	var buf bytes.Buffer
	s := string(raw)
	if (limit == 0 || len(raw) <= 4*limit) && json.Indent(&buf, raw, "", "  ") == nil {
		s = buf.String()
	}
	s, omitted := cutBytes(s, limit)
	return clean(s), omitted
}

// str renders a decoded JSON scalar as text ("" for none).
func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// num renders a decoded JSON number with thousands separators.
func num(v any) string {
	f, ok := v.(float64)
	if !ok {
		return str(v)
	}
	if f != float64(int64(f)) {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return numfmt.Thousands(int64(f))
}
