package fold

import (
	"encoding/json"
	"slices"

	"github.com/dshq/dshq"
)

// nodeType is a surface node's event type, kept in one byte.
type nodeType uint8

const (
	nodeUser nodeType = iota + 1
	nodeAssistant
	nodeToolResult
)

func surfaceNodeType(t string) nodeType {
	switch t {
	case dshq.TypeUserMessage:
		return nodeUser
	case dshq.TypeAssistantMessage:
		return nodeAssistant
	case dshq.TypeToolResult:
		return nodeToolResult
	}
	return 0
}

func (t nodeType) String() string {
	switch t {
	case nodeUser:
		return dshq.TypeUserMessage
	case nodeAssistant:
		return dshq.TypeAssistantMessage
	case nodeToolResult:
		return dshq.TypeToolResult
	}
	return "unknown"
}

// node is one current surface node. A tool/result node keeps the digest of
// its data with the inner result content nulled (the tool-result rewrite
// rule compares against it), so the state never holds event data.
type node struct {
	seq int64
	typ nodeType
	// yields is true when the node yields a model-history message
	// (docs/events-and-surfaces.md#model-history): always for user/message and
	// tool/result, for assistant/message only when its content is not empty.
	yields bool
	digest [digestSize]byte
}

// pendingCall is a tool call of the open step still waiting for its result.
type pendingCall struct {
	id string
	// step is the raw data.step of the assistant/message that asked for it.
	step json.RawMessage
	// callSeq is the seq of the call's tool/call event, -1 when none was
	// logged.
	callSeq int64
}

// turnState is what the crash closers need: the open turn, the open step and
// the open step's unanswered tool calls
// (docs/events-and-surfaces.md#crash-closers-and-the-balanced-view).
type turnState struct {
	open bool
	// turn is the raw data.turn of the open turn's turn/start (nil if absent).
	turn     json.RawMessage
	stepOpen bool
	// step is the raw data.step of the open step's step/start (nil if absent).
	step    json.RawMessage
	pending []pendingCall
}

// State is one session's fold after the events applied so far: the current
// surface in model order, the latest title, the last step/start and the
// open-turn bookkeeping for crash closers. It holds no event data, so it
// stays small (MarshalBinary), and each Apply costs O(1) apart from a
// replace's splice of the surface.
//
// A State is not safe for concurrent use.
type State struct {
	sessionID string
	format    int
	level     Level
	// next is the seq the next event must carry (the number of events).
	next     int64
	lastTime int64
	// nodes is the current surface in model order.
	nodes []node
	title *dshq.Title
	// lastStepStart is the seq of the last step/start, -1 when none.
	lastStepStart int64
	turn          turnState
}

// New returns the fold of an empty log under h's format rules (G0 for
// FormatVersion 0, G2 otherwise) at the given validation level.
func New(h dshq.HeaderRecord, level Level) *State {
	return &State{
		sessionID:     h.Header.ID,
		format:        h.FormatVersion,
		level:         level,
		lastStepStart: -1,
	}
}

// g0 reports whether the log follows the version 0 rules.
func (s *State) g0() bool { return s.format == dshq.FormatVersion0 }

// Level returns the validation level the state applies.
func (s *State) Level() Level { return s.level }

// NextSeq returns the seq the next event must carry: the number of events
// applied so far.
func (s *State) NextSeq() int64 { return s.next }

// CapturedThroughSeq returns the last applied seq, and false for an empty
// log (upstream's null).
func (s *State) CapturedThroughSeq() (int64, bool) {
	return s.next - 1, s.next > 0
}

// Surface returns the current surface: the seqs of the current nodes in
// model order (which is not seq order after a replace).
func (s *State) Surface() []int64 {
	out := make([]int64, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.seq
	}
	return out
}

// MessageSeqs returns, in model order, the seqs of the current nodes that yield
// a model-history message (docs/events-and-surfaces.md#model-history): every
// user/message and tool/result, and every assistant/message whose content is
// not empty.
func (s *State) MessageSeqs() []int64 {
	out := make([]int64, 0, len(s.nodes))
	for _, n := range s.nodes {
		if n.yields {
			out = append(out, n.seq)
		}
	}
	return out
}

// Title returns the latest session/title (last wins), or nil.
func (s *State) Title() *dshq.Title {
	if s.title == nil {
		return nil
	}
	t := *s.title
	t.MessageSeqs = slices.Clone(t.MessageSeqs)
	return &t
}

// LastStepStart returns the seq of the last step/start, and false when the
// log has none.
func (s *State) LastStepStart() (int64, bool) {
	return s.lastStepStart, s.lastStepStart >= 0
}

// TurnOpen reports whether the log's last turn has started and not ended.
func (s *State) TurnOpen() bool { return s.turn.open }

// Clone returns an independent copy of the state.
func (s *State) Clone() *State {
	c := *s
	c.nodes = slices.Clone(s.nodes)
	c.title = s.Title()
	c.turn.pending = slices.Clone(s.turn.pending)
	return &c
}
