package fold

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/dshq/dshq"
)

// plan is everything Apply decided about one event before it changes the
// state: validation has passed once a plan exists, and committing it cannot
// fail.
type plan struct {
	e       dshq.Event
	surface bool
	replace bool
	// startIdx/endIdx are the replaced range's positions in the surface.
	startIdx, endIdx int
	node             node
	sources          []int64
	text             string
	title            *dshq.Title
	// Closer bookkeeping read from the event's data.
	turn        json.RawMessage
	step        json.RawMessage
	toolCallIDs []string
	callID      string
}

// Apply validates e against the state and, when it is valid, folds it in and
// returns what changed. A refused event returns a *ValidationError and leaves
// the state exactly as it was (plan, then commit).
func (s *State) Apply(e dshq.Event) (Effects, error) {
	p, err := s.plan(e)
	if err != nil {
		return Effects{}, err
	}
	return s.commit(p), nil
}

func (s *State) plan(e dshq.Event) (*plan, *ValidationError) {
	if err := s.checkEnvelope(e); err != nil {
		return nil, err
	}
	data, err := s.decodeData(e)
	if err != nil {
		return nil, err
	}
	if s.level == Strict {
		if err := s.checkStrict(e, data); err != nil {
			return nil, err
		}
	}
	p := &plan{e: e}
	if err := s.planSurface(p, data); err != nil {
		return nil, err
	}
	d := dataOf(data)
	msg := d.Message(e.Type)
	if err := s.planLogFacts(p, data, msg); err != nil {
		return nil, err
	}
	p.text = semanticText(e.Type, d, msg)
	return p, nil
}

// decodeData decodes the data of the event types the fold reads; other types
// are log-only and their data is never decoded.
func (s *State) decodeData(e dshq.Event) (any, *ValidationError) {
	switch e.Type {
	case dshq.TypeUserMessage, dshq.TypeAssistantMessage, dshq.TypeToolResult,
		"tool/call", "todo/write", "turn/start", "turn/end", "step/start",
		"session/title":
	case "request/header":
		// Only Strict reads it; it carries the system prompt and tools.
		if s.level != Strict {
			return nil, nil
		}
	default:
		return nil, nil
	}
	v, err := decodeAny(e.Data)
	if err != nil {
		return nil, invalid(e.Seq, RuleData, "%s event at seq %d has data that is not lossless JSON: %v", e.Type, e.Seq, err)
	}
	return v, nil
}

// planLogFacts reads what the title, step and crash-closer bookkeeping need.
// msg is the event's message (Data.Message).
func (s *State) planLogFacts(p *plan, data any, msg Data) *ValidationError {
	d := obj(data)
	switch p.e.Type {
	case "turn/start":
		p.turn = valueJSON(d, "turn")
	case "step/start":
		p.step = valueJSON(d, "step")
	case dshq.TypeAssistantMessage:
		p.step = valueJSON(d, "step")
		p.toolCallIDs = toolCallIDs(msg)
	case "tool/call":
		p.callID, _ = str(d["callId"])
	case dshq.TypeToolResult:
		p.callID = resultCallID(d)
	case "session/title":
		t, err := s.planTitle(p.e, d)
		if err != nil {
			return err
		}
		p.title = t
	}
	return nil
}

// planTitle reads a session/title payload. Strict refuses a malformed one;
// Lenient keeps it in the log without changing the title.
func (s *State) planTitle(e dshq.Event, d map[string]any) (*dshq.Title, *ValidationError) {
	title, ok := str(d["title"])
	if !ok || title == "" {
		if s.level == Strict {
			return nil, invalid(e.Seq, RuleTitle, "session/title event at seq %d must carry a non-empty title", e.Seq)
		}
		return nil, nil
	}
	seqs := []int64{}
	if list, ok := arr(d["messageSeqs"]); ok {
		for _, v := range list {
			f, ok := v.(float64)
			if !ok || f < 0 || f != float64(int64(f)) || f > maxSafeInt {
				seqs = nil
				break
			}
			seqs = append(seqs, int64(f))
		}
	} else {
		seqs = nil
	}
	if seqs == nil {
		if s.level == Strict {
			return nil, invalid(e.Seq, RuleTitle, "session/title event at seq %d must carry messageSeqs as an array of seqs", e.Seq)
		}
		seqs = []int64{}
	}
	source := rawMember(e.Data, "source")
	if source == nil {
		source = json.RawMessage("null")
	}
	return &dshq.Title{Title: title, MessageSeqs: seqs, Source: source, EventSeq: e.Seq, UpdatedAt: e.Time}, nil
}

// commit applies a plan. It cannot fail.
func (s *State) commit(p *plan) Effects {
	e := p.e
	eff := Effects{
		Record: dshq.EventRecord{SessionID: s.sessionID, Seq: e.Seq, Type: e.Type, Time: e.Time, Surface: dshq.SurfaceLogOnly},
		Text:   p.text,
	}
	if p.surface {
		eff.Record.Surface = dshq.SurfaceCurrent
		eff.Sources = p.sources
		if p.replace {
			eff.Shadowed = make([]int64, 0, p.endIdx-p.startIdx+1)
			for _, n := range s.nodes[p.startIdx : p.endIdx+1] {
				eff.Shadowed = append(eff.Shadowed, n.seq)
			}
			s.nodes = slices.Replace(s.nodes, p.startIdx, p.endIdx+1, p.node)
		} else {
			s.nodes = append(s.nodes, p.node)
		}
	}
	if p.title != nil {
		s.title = p.title
		eff.Title = s.Title()
	}
	if e.Type == "step/start" {
		s.lastStepStart = e.Seq
		eff.StepStart = true
	}
	s.commitTurn(p)
	s.next = e.Seq + 1
	s.lastTime = e.Time
	return eff
}

// commitTurn keeps the open turn, open step and pending tool calls
// (docs/events-and-surfaces.md#crash-closers-and-the-balanced-view): a
// turn/start opens a turn, a step/start a step; an assistant/message's
// tool-call blocks become pending, a tool/call records its seq on its pending
// call, a tool/result answers it; step/end and turn/end clear the pending
// calls.
func (s *State) commitTurn(p *plan) {
	t := &s.turn
	switch p.e.Type {
	case "turn/start":
		*t = turnState{open: true, turn: p.turn}
	case "turn/end":
		*t = turnState{}
	case "step/start":
		t.stepOpen, t.step = true, p.step
	case "step/end":
		t.stepOpen, t.step, t.pending = false, nil, nil
	case dshq.TypeAssistantMessage:
		for _, id := range p.toolCallIDs {
			if t.pendingIndex(id) < 0 {
				t.pending = append(t.pending, pendingCall{id: id, step: p.step, callSeq: -1})
			}
		}
	case "tool/call":
		if i := t.pendingIndex(p.callID); i >= 0 {
			t.pending[i].callSeq = p.e.Seq
		}
	case dshq.TypeToolResult:
		if i := t.pendingIndex(p.callID); i >= 0 {
			t.pending = slices.Delete(t.pending, i, i+1)
		}
	}
}

func (t *turnState) pendingIndex(id string) int {
	if id == "" {
		return -1
	}
	for i, c := range t.pending {
		if c.id == id {
			return i
		}
	}
	return -1
}

// rawMember returns the raw JSON of member key of the object raw, nil when
// raw is not an object or has no such member.
func rawMember(raw json.RawMessage, key string) json.RawMessage {
	if jsonKind(raw) != '{' {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	v, ok := m[key]
	if !ok {
		return nil
	}
	return compactJSON(v)
}

// valueJSON returns the JSON of member key of d, nil when d has no such
// member.
func valueJSON(d map[string]any, key string) json.RawMessage {
	v, ok := d[key]
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// compactJSON returns raw without insignificant whitespace.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return slices.Clone(raw)
	}
	return buf.Bytes()
}

// messageOf returns the message object of a surface event's data: data
// itself for a user/message, data.message for the other two, or data itself
// for an older shape without data.message.
func messageOf(d map[string]any) map[string]any {
	if m := obj(d["message"]); m != nil {
		return m
	}
	return d
}

// messageContent returns the content blocks of a surface event's message.
func messageContent(d map[string]any) any {
	return messageOf(d)["content"]
}

// toolCallIDs returns the non-empty ids of the tool-call blocks of a
// message, in order.
func toolCallIDs(msg Data) []string {
	var ids []string
	eachBlock(msg.m["content"], func(b Block) {
		if b.Type == "tool-call" && b.ID != "" {
			ids = append(ids, b.ID)
		}
	})
	return ids
}

// resultCallID returns the call a tool/result answers: message.source.callId,
// or data.callId in the older shape.
func resultCallID(d map[string]any) string {
	if id, ok := str(obj(obj(d["message"])["source"])["callId"]); ok {
		return id
	}
	id, _ := str(d["callId"])
	return id
}
