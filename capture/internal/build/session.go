// Package build writes the dshq session logs of the harness converters
// (capture/claudecode, capture/codex): events with their capture members
// (docs/harnesses.md#source-lines), long lines split to fit one event,
// and the bookkeeping every mapping needs — seqs, turns, the current
// surface with the source line of each node, tool calls awaiting results —
// and the skeleton of a converter (File) around what a harness states of its
// own (Format). It does no I/O.
package build

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/fold"
)

// Src is the source line events are being derived from.
type Src struct {
	Line capture.Line
	// Time is the events' time (epoch ms).
	Time int64
	// Holder is the id of the session that holds the line: the first event
	// that session derives from it carries the line's bytes.
	Holder string
	held   bool
	// messages counts the messages derived from the line, for their ids.
	messages int
}

// Held reports whether the holder has written the line's bytes yet.
func (s *Src) Held() bool { return s.held }

// MessageID returns the id of the next message derived from the line:
// base for the first, base#2, base#3… after it.
func (s *Src) MessageID(base string) string {
	s.messages++
	if s.messages == 1 {
		return base
	}
	return base + "#" + strconv.Itoa(s.messages)
}

// node is one current surface node and the source line it came from.
type node struct {
	seq, line int64
}

// Session is one session log being written.
type Session struct {
	// ID is the session's dshq id.
	ID      string
	harness string
	max     int
	header  dshq.HeaderRecord
	// announced is true once the header has gone out in an update.
	announced bool
	notices   []string
	next      int64
	out       []dshq.Event
	nodes     []node
	// Turn bookkeeping: the open turn's number, and whether the model has
	// produced anything in it.
	turnOpen, turnOutput bool
	turn                 int64
	calls                map[string]int64
	stats                capture.Stats
}

// NewSession starts the log of a session whose header is decided. When
// announced, the header is already stored and no update carries it.
func NewSession(h dshq.HeaderRecord, harness string, maxEvent int, announced bool, notices ...string) *Session {
	s := &Session{ID: h.Header.ID, harness: harness, max: maxEvent, header: h, announced: announced,
		notices: notices, calls: map[string]int64{}}
	s.stats.Sessions = 1
	if h.Header.ParentSession != nil {
		s.stats.ChildSessions = 1
	}
	return s
}

// Header returns the session's header record.
func (s *Session) Header() dshq.HeaderRecord { return s.header }

// Stats returns what the session has emitted (Sessions and ChildSessions
// count it once).
func (s *Session) Stats() capture.Stats { return s.stats }

// Drain returns the session's update since the last Drain: its header the
// first time, and the events written since. ok is false when there is
// nothing to say.
func (s *Session) Drain() (u capture.Update, ok bool) {
	if s.announced && len(s.out) == 0 && len(s.notices) == 0 {
		return capture.Update{}, false
	}
	u = capture.Update{SessionID: s.ID, Events: s.out, Notices: s.notices}
	if !s.announced {
		h := s.header
		u.Header = &h
		s.announced = true
	}
	s.out, s.notices = nil, nil
	return u, true
}

// Turn returns the open turn's number, and false when no turn is open.
func (s *Session) Turn() (int64, bool) { return s.turn, s.turnOpen }

// WithTurn returns data with member "turn" set to the open turn's number,
// unchanged when no turn is open.
func (s *Session) WithTurn(data Obj) Obj {
	if s.turnOpen {
		return append(Obj{{"turn", s.turn}}, data...)
	}
	return data
}

// Prompt opens the turn a human prompt belongs to: a prompt after model
// output in the open turn ends it (turn/end completed) and starts the next;
// a prompt with no turn open starts one; a prompt in a turn with no model
// output yet joins it (several inputs before one answer are one turn).
func (s *Session) Prompt(src *Src) {
	switch {
	case s.turnOpen && !s.turnOutput:
		return
	case s.turnOpen:
		s.EndTurn(src, Obj{{"kind", "completed"}})
	}
	s.turn++
	s.turnOpen, s.turnOutput = true, false
	s.emit(src, "turn/start", Obj{{"turn", s.turn}}, nil, nil)
}

// StartTurn starts a turn the source marks explicitly (Codex task_started),
// with the same rule as Prompt.
func (s *Session) StartTurn(src *Src) { s.Prompt(src) }

// EndTurn ends the open turn with reason (turn/end); nothing when no turn
// is open.
func (s *Session) EndTurn(src *Src, reason Obj) {
	if !s.turnOpen {
		return
	}
	s.emit(src, "turn/end", Obj{{"turn", s.turn}, {"reason", reason}}, nil, nil)
	s.turnOpen, s.turnOutput = false, false
}

// Output records that the model produced something in the open turn.
func (s *Session) Output() { s.turnOutput = true }

// LogOnly writes a log-only event of type typ (a harness record with no
// dshq meaning) whose data is fields plus the capture member.
func (s *Session) LogOnly(src *Src, typ string, fields Obj) int64 {
	return s.emit(src, typ, fields, nil, nil)
}

// Event writes a non-surface event (tool/call, session/title…).
func (s *Session) Event(src *Src, typ string, data Obj) int64 {
	return s.emit(src, typ, data, nil, nil)
}

// Call writes a tool/call and remembers its seq for the result.
func (s *Session) Call(src *Src, callID, name, arguments string) int64 {
	seq := s.emit(src, "tool/call", s.WithTurn(Obj{{"callId", callID}, {"name", name}, {"arguments", arguments}}), nil, nil)
	if callID != "" {
		s.calls[callID] = seq
	}
	s.Output()
	return seq
}

// Append writes a surface event appended to the surface (user/message,
// assistant/message, tool/result) citing sources.
func (s *Session) Append(src *Src, typ string, data Obj, sources []int64) int64 {
	seq := s.emit(src, typ, data, "append", sources)
	s.nodes = append(s.nodes, node{seq: seq, line: src.Line.No})
	return seq
}

// ToolResult appends a tool/result answering callID, citing its tool/call
// when that was written.
func (s *Session) ToolResult(src *Src, callID string, data Obj) int64 {
	var sources []int64
	if seq, ok := s.calls[callID]; ok {
		sources = []int64{seq}
	}
	return s.Append(src, "tool/result", data, sources)
}

// ReplaceAll writes a user/message that replaces the whole current surface
// (a compaction), citing every node it shadows; with an empty surface it
// is appended.
func (s *Session) ReplaceAll(src *Src, msg Obj) int64 { return s.replaceFrom(src, 0, msg) }

// ReplaceAfter writes a user/message that replaces the current surface
// nodes derived from lines after line (a rewind to the record at that
// line: the abandoned branch is shadowed), citing each; appended when there
// are none.
func (s *Session) ReplaceAfter(src *Src, line int64, msg Obj) int64 {
	k := len(s.nodes)
	for k > 0 && s.nodes[k-1].line > line {
		k--
	}
	return s.replaceFrom(src, k, msg)
}

func (s *Session) replaceFrom(src *Src, k int, msg Obj) int64 {
	if k >= len(s.nodes) {
		return s.Append(src, dshq.TypeUserMessage, msg, nil)
	}
	shadowed := make([]int64, 0, len(s.nodes)-k)
	for _, n := range s.nodes[k:] {
		shadowed = append(shadowed, n.seq)
	}
	op := Obj{{"op", "replace"}, {"start", shadowed[0]}, {"end", shadowed[len(shadowed)-1]}}
	seq := s.emit(src, dshq.TypeUserMessage, msg, op, shadowed)
	s.nodes = append(s.nodes[:k], node{seq: seq, line: src.Line.No})
	return seq
}

// EnsureHeld writes a log-only event of type typ when this session holds
// src's line and has derived nothing from it, so that no line goes unkept.
func (s *Session) EnsureHeld(src *Src, typ string) {
	if src.Holder == s.ID && !src.held {
		s.LogOnly(src, typ, nil)
	}
}

// emit writes one event (and the line-part events of a long line), fitting
// each within the size bound, and returns its seq.
func (s *Session) emit(src *Src, typ string, data Obj, op Value, sources []int64) int64 {
	seq := s.next
	ev := eventSpec{seq: seq, typ: typ, time: src.Time, data: data, op: op, sources: sources, sizeHint: 512 + 8*len(sources)}
	ev.capture = Obj{{capture.FieldLine, src.Line.No}}
	if src.Holder != s.ID {
		ev.capture = append(ev.capture, Field{capture.FieldSession, src.Holder})
	}
	if src.Holder != s.ID || src.held {
		s.push(s.fit(ev, s.max))
		return seq
	}
	src.held = true
	if src.Line.EOL != "\n" {
		ev.capture = append(ev.capture, Field{capture.FieldEOL, src.Line.EOL})
	}
	key, payload := capture.FieldText, string(src.Line.Text)
	if !utf8.Valid(src.Line.Text) {
		key, payload = capture.FieldBase64, base64.StdEncoding.EncodeToString(src.Line.Text)
	}
	// A line longer than the bound cannot fit one event: it is not encoded
	// whole to find out (a long line would cost several times its size).
	if len(payload) <= s.max {
		whole := ev.with(Field{key, payload})
		whole.sizeHint += len(payload) + len(payload)/4
		if e := whole.encode(); len(e.Raw) <= s.max {
			s.push(e, false)
			return seq
		}
	}
	// Too long for one event: the derived content keeps at most half the
	// bound, the line's bytes fill the rest and as many line-part events as
	// they need.
	probe := ev.with(Field{capture.FieldParts, int64(1e12)}, Field{key, ""})
	probe, cut := s.shrink(probe, s.max/2)
	room := s.max - len(probe.encode().Raw)
	part := eventSpec{typ: capture.TypeLinePart, time: src.Time,
		capture: Obj{{capture.FieldLine, src.Line.No}, {capture.FieldPart, int64(1e12)}, {key, ""}}}
	pieces := splitEscaped(payload, room, s.max-len(part.encode().Raw))
	holder := ev
	holder.data = probe.data
	holder.capture = append(ev.capture[:len(ev.capture):len(ev.capture)], Field{capture.FieldParts, int64(len(pieces))})
	if cut {
		holder.capture = append(holder.capture, Field{capture.FieldTruncated, true})
	}
	holder.capture = append(holder.capture, Field{key, pieces[0]})
	s.push(holder.encode(), cut)
	for i, p := range pieces[1:] {
		part.seq = s.next
		part.capture = Obj{{capture.FieldLine, src.Line.No}, {capture.FieldPart, int64(i + 2)}, {key, p}}
		s.push(part.encode(), false)
	}
	return seq
}

// eventSpec is an event before encoding.
type eventSpec struct {
	seq     int64
	typ     string
	time    int64
	data    Obj
	capture Obj
	op      Value
	sources []int64
	// sizeHint is the buffer to start the encoding with.
	sizeHint int
}

// with returns ev with fields added to its capture member.
func (ev eventSpec) with(fields ...Field) eventSpec {
	ev.capture = append(ev.capture[:len(ev.capture):len(ev.capture)], fields...)
	return ev
}

// fit encodes ev, shortening the strings of its data when it is longer
// than limit.
func (s *Session) fit(ev eventSpec, limit int) (dshq.Event, bool) {
	ev, cut := s.shrink(ev, limit)
	return ev.encode(), cut
}

// minCap is the length below which shrink never cuts a string, so that
// ids, names and type tags survive whatever the bound.
const minCap = 256

// shrink returns ev with the strings of its data cut to the largest length
// that brings it within limit (never below minCap), and the truncated flag
// in its capture member; ev itself when it fits. When cutting strings is
// not enough (thousands of short blocks), arrays are cut too, to the
// largest length that fits (never below one element, so a message keeps
// the block the fold requires).
func (s *Session) shrink(ev eventSpec, limit int) (eventSpec, bool) {
	// A string longer than limit cannot fit: no need to encode it whole.
	if longestString(ev.data) <= limit && len(ev.encode().Raw) <= limit {
		return ev, false
	}
	ev = ev.with(Field{capture.FieldTruncated, true})
	fits := func(n, k int) bool {
		try := ev
		try.data = capStrings(ev.data, n, k)
		return len(try.encode().Raw) <= limit
	}
	n := largest(minCap, longestString(ev.data), func(n int) bool { return fits(n, -1) })
	k := -1
	if !fits(n, -1) {
		k = largest(1, longestArray(ev.data), func(k int) bool { return fits(minCap, k) })
	}
	ev.data = capStrings(ev.data, n, k)
	return ev, true
}

// largest returns the largest x in [lo, hi] for which ok holds, assuming
// ok is monotone (true up to some point), and lo when it holds nowhere.
func largest(lo, hi int, ok func(int) bool) int {
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// encode returns the event record: type, seq, time, data (with the
// capture member last), surfaceOp, sourceEventSeqs, and ignorable for a
// type the original vocabulary lacks (so that a harness SDK reading the
// log back accepts it).
func (ev eventSpec) encode() dshq.Event {
	b := make([]byte, 0, ev.sizeHint)
	b = append(b, `{"type":`...)
	b = appendString(b, ev.typ)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, ev.seq, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, ev.time, 10)
	b = append(b, `,"data":`...)
	d0 := len(b)
	b = encode(b, append(ev.data[:len(ev.data):len(ev.data)], Field{capture.FieldCapture, ev.capture}))
	d1 := len(b)
	var o0, o1, s0, s1 int
	if ev.op != nil {
		b = append(b, `,"surfaceOp":`...)
		o0 = len(b)
		b = encode(b, ev.op)
		o1 = len(b)
	}
	if len(ev.sources) > 0 {
		b = append(b, `,"sourceEventSeqs":`...)
		s0 = len(b)
		b = encode(b, ev.sources)
		s1 = len(b)
	}
	ignorable := !fold.KnownType(ev.typ)
	if ignorable {
		b = append(b, `,"ignorable":true`...)
	}
	b = append(b, '}')
	e := dshq.Event{Type: ev.typ, Seq: ev.seq, Time: ev.time, Data: b[d0:d1:d1], Ignorable: ignorable, Raw: b}
	if o1 > 0 {
		e.SurfaceOp = b[o0:o1:o1]
	}
	if s1 > 0 {
		e.SourceEventSeqs = b[s0:s1:s1]
	}
	return e
}

// push records an encoded event.
func (s *Session) push(e dshq.Event, cut bool) {
	s.out = append(s.out, e)
	s.next++
	s.stats.Events++
	switch {
	case e.Type == capture.TypeLinePart:
		s.stats.Parts++
	case len(e.Type) > len(s.harness) && e.Type[:len(s.harness)] == s.harness && e.Type[len(s.harness)] == '/':
		s.stats.LogOnly++
	}
	if cut {
		s.stats.Truncated++
	}
}

// longestString returns the length of the longest string in v.
func longestString(v Value) int {
	n := 0
	switch v := v.(type) {
	case string:
		n = len(v)
	case Obj:
		for _, f := range v {
			n = max(n, longestString(f.V))
		}
	case Arr:
		for _, e := range v {
			n = max(n, longestString(e))
		}
	}
	return n
}

// longestArray returns the length of the longest array in v.
func longestArray(v Value) int {
	n := 0
	switch v := v.(type) {
	case Obj:
		for _, f := range v {
			n = max(n, longestArray(f.V))
		}
	case Arr:
		n = len(v)
		for _, e := range v {
			n = max(n, longestArray(e))
		}
	}
	return n
}

// capStrings returns v with every string longer than max(n, minCap)
// bytes cut to that length (at a UTF-8 boundary) and, when k >= 0, every
// array longer than max(k, 1) elements cut to that many; v is not changed.
func capStrings[T Value](v T, n, k int) T {
	n = max(n, minCap)
	var out Value
	switch x := any(v).(type) {
	case string:
		out = truncateUTF8(x, n)
	case Obj:
		o := make(Obj, len(x))
		for i, f := range x {
			o[i] = Field{f.K, capStrings(f.V, n, k)}
		}
		out = o
	case Arr:
		if k >= 0 {
			x = x[:min(len(x), max(k, 1))]
		}
		a := make(Arr, len(x))
		for i, e := range x {
			a[i] = capStrings(e, n, k)
		}
		out = a
	default:
		return v
	}
	return out.(T)
}
