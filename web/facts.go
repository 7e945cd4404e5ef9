package web

import (
	"strconv"
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
)

// eventFacts is what a session's totals and its timeline read from one
// event: one reading of its data, through fold.Data (the reading the fold,
// the CLI's previews and the renderer share), so the two pages never count a
// call, a failure or a model differently.
type eventFacts struct {
	// Model is an assistant message's model ("" when unstated or unknown).
	Model string
	// Calls are the tool calls the event makes: an assistant message's
	// tool-call blocks, or a tool/call's own call.
	Calls []callFact
	// ResultOf is the call a tool/result answers; Failed says it failed
	// (data.error, or a content block's isError).
	ResultOf string
	Failed   bool
	// Turn is a turn/start's or turn/end's turn number as written ("" when
	// it states none).
	Turn string
	// Reason is a turn/end's reason kind other than completed; Captured
	// says capture converted the turn/end (it is written when the harness
	// logged the next prompt, so its time is late).
	Reason   string
	Captured bool
	// Interrupted is an assistant message's: it was cut off.
	Interrupted bool
}

// callFact is one tool call an event makes.
type callFact struct{ ID, Name string }

// factsOf reads e.
func factsOf(e dshq.Event) eventFacts {
	var f eventFacts
	d := fold.DecodeData(e.Data)
	switch e.Type {
	case "turn/start":
		f.Turn = turnNumber(d)
	case "turn/end":
		f.Turn = turnNumber(d)
		if k := d.Object("reason").String("kind"); k != "completed" {
			f.Reason = k
		}
		f.Captured = d.Value("capture") != nil
	case "tool/call":
		f.Calls = []callFact{{ID: d.String("callId"), Name: d.String("name")}}
	case dshq.TypeAssistantMessage:
		m := d.Message(e.Type)
		if model := m.Source().String("model"); model != "unknown" {
			f.Model = model
		}
		for _, b := range m.Blocks("content") {
			if b.Type == "tool-call" {
				f.Calls = append(f.Calls, callFact{ID: b.ID, Name: b.Name})
			}
		}
		f.Interrupted = d.Bool("interrupted")
	case dshq.TypeToolResult:
		f.ResultOf = d.ResultCallID()
		f.Failed = d.Value("error") != nil
		for _, b := range d.Message(e.Type).Blocks("content") {
			f.Failed = f.Failed || b.IsError
		}
	}
	return f
}

// turnNumber is data.turn as written: a number, or a string as some
// harnesses write it.
func turnNumber(d fold.Data) string {
	switch v := d.Value("turn").(type) {
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return strings.TrimSpace(v)
	}
	return ""
}

// turnLabel is a turn span's label: "Turn 3", or "Turn" when the log states
// no number.
func turnLabel(f eventFacts) string { return strings.TrimSpace("Turn " + clean(f.Turn)) }

// callSet counts tool calls once each: a tool-call block and the tool/call
// that repeats it are one call; a call without an id always counts.
type callSet struct {
	Count int64
	seen  map[string]bool
}

// add counts the call with id, and reports whether it is new.
func (c *callSet) add(id string) bool {
	if id == "" {
		c.Count++
		return true
	}
	if c.seen[id] {
		return false
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[id] = true
	c.Count++
	return true
}

// clone returns a copy that counts on independently.
func (c callSet) clone() callSet {
	out := callSet{Count: c.Count, seen: make(map[string]bool, len(c.seen))}
	for k, v := range c.seen {
		out.seen[k] = v
	}
	return out
}
