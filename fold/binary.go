package fold

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/dshq/dshq"
)

// ErrCorruptState is wrapped by every UnmarshalBinary failure.
var ErrCorruptState = errors.New("corrupt fold state")

// stateMagic and stateVersion open every encoded State; a decoder refuses
// any other version.
const (
	stateMagic   = 'F'
	stateVersion = 1
)

const (
	nodeYieldsBit = 0x80

	turnOpenBit     = 1
	turnStepOpenBit = 2
)

// MarshalBinary encodes the state: a magic byte and a format version, then
// varint-encoded fields (surface node seqs delta-encoded, a tool/result
// node's digest in 16 bytes). It never fails.
func (s *State) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, 64+len(s.nodes)*4)
	b = append(b, stateMagic, stateVersion, byte(s.format), byte(s.level))
	b = appendString(b, s.sessionID)
	b = binary.AppendUvarint(b, uint64(s.next))
	b = binary.AppendVarint(b, s.lastTime)
	b = binary.AppendVarint(b, s.lastStepStart)
	b = appendTitle(b, s.title)
	b = binary.AppendUvarint(b, uint64(len(s.nodes)))
	prev := int64(0)
	for _, n := range s.nodes {
		b = binary.AppendVarint(b, n.seq-prev)
		prev = n.seq
		flags := byte(n.typ)
		if n.yields {
			flags |= nodeYieldsBit
		}
		b = append(b, flags)
		if n.typ == nodeToolResult {
			b = append(b, n.digest[:]...)
		}
	}
	return appendTurn(b, s.turn), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTitle(b []byte, t *dshq.Title) []byte {
	if t == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = appendString(b, t.Title)
	b = binary.AppendUvarint(b, uint64(len(t.MessageSeqs)))
	for _, seq := range t.MessageSeqs {
		b = binary.AppendUvarint(b, uint64(seq))
	}
	b = appendString(b, string(t.Source))
	b = binary.AppendUvarint(b, uint64(t.EventSeq))
	return binary.AppendVarint(b, t.UpdatedAt)
}

func appendTurn(b []byte, t turnState) []byte {
	var flags byte
	if t.open {
		flags |= turnOpenBit
	}
	if t.stepOpen {
		flags |= turnStepOpenBit
	}
	b = append(b, flags)
	b = appendString(b, string(t.turn))
	b = appendString(b, string(t.step))
	b = binary.AppendUvarint(b, uint64(len(t.pending)))
	for _, c := range t.pending {
		b = appendString(b, c.id)
		b = appendString(b, string(c.step))
		b = binary.AppendVarint(b, c.callSeq)
	}
	return b
}

// UnmarshalBinary replaces the state with one encoded by MarshalBinary. Any
// input that MarshalBinary cannot have produced (wrong version, truncated,
// out-of-range seqs, bad JSON, trailing bytes) is an error wrapping
// ErrCorruptState, and the state is left unchanged.
func (s *State) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	var n State
	if err := d.state(&n); err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptState, err)
	}
	*s = n
	return nil
}

// decoder reads the encoding; its first failure sticks.
type decoder struct {
	b   []byte
	err error
	// scratch sizes the canonical encoding of a decoded varint: a
	// non-minimal one is refused, so every accepted input re-encodes to
	// itself.
	scratch [binary.MaxVarintLen64]byte
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != len(binary.AppendUvarint(d.scratch[:0], v)) {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 || n != len(binary.AppendVarint(d.scratch[:0], v)) {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length that each element of which takes at least min bytes
// of what remains.
func (d *decoder) count(min int) int {
	v := d.uvarint()
	if v > uint64(len(d.b)/min) {
		d.fail("count %d exceeds the remaining input", v)
		return 0
	}
	return int(v)
}

func (d *decoder) bytes() []byte {
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// rawJSON reads an optional raw JSON value (empty = absent).
func (d *decoder) rawJSON() json.RawMessage {
	v := d.bytes()
	if len(v) == 0 {
		return nil
	}
	if !json.Valid(v) {
		d.fail("invalid JSON value")
		return nil
	}
	return json.RawMessage(append([]byte(nil), v...))
}

func (d *decoder) state(s *State) error {
	if d.byte() != stateMagic {
		return errors.New("not a fold state")
	}
	if v := d.byte(); d.err == nil && v != stateVersion {
		return fmt.Errorf("unsupported fold state version %d", v)
	}
	s.format, s.level = int(d.byte()), Level(d.byte())
	if d.err == nil && ((s.format != dshq.FormatVersion0 && s.format != dshq.FormatVersion2) || (s.level != Strict && s.level != Lenient)) {
		return fmt.Errorf("bad format %d or level %d", s.format, s.level)
	}
	s.sessionID = string(d.bytes())
	next := d.uvarint()
	if next > maxSafeInt+1 {
		d.fail("next seq %d out of range", next)
	}
	s.next = int64(next)
	s.lastTime = d.varint()
	s.lastStepStart = d.varint()
	if d.err == nil && (s.lastStepStart < -1 || s.lastStepStart >= s.next || s.lastTime > maxSafeInt || s.lastTime < -maxSafeInt) {
		d.fail("last step start %d or last time out of range", s.lastStepStart)
	}
	d.title(s)
	d.nodes(s)
	d.turn(s)
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func (d *decoder) seqBelow(next int64) int64 {
	v := d.uvarint()
	if d.err == nil && v >= uint64(next) {
		d.fail("seq %d out of range", v)
	}
	return int64(v)
}

func (d *decoder) title(s *State) {
	switch d.byte() {
	case 0:
		return
	case 1:
	default:
		d.fail("bad title flag")
		return
	}
	t := &dshq.Title{Title: string(d.bytes())}
	if d.err == nil && (t.Title == "" || !utf8.ValidString(t.Title)) {
		d.fail("bad title")
	}
	n := d.count(1)
	t.MessageSeqs = make([]int64, 0, n)
	for range n {
		v := d.uvarint()
		if v > maxSafeInt {
			d.fail("title message seq out of range")
		}
		t.MessageSeqs = append(t.MessageSeqs, int64(v))
	}
	t.Source = d.rawJSON()
	if d.err == nil && t.Source == nil {
		d.fail("title without source")
	}
	t.EventSeq = d.seqBelow(s.next)
	t.UpdatedAt = d.varint()
	s.title = t
}

func (d *decoder) nodes(s *State) {
	n := d.count(2)
	s.nodes = make([]node, 0, n)
	seen := make(map[int64]bool, n)
	prev := int64(0)
	for range n {
		delta := d.varint()
		flags := d.byte()
		if d.err != nil {
			return
		}
		seq := prev + delta
		if delta > maxSafeInt || delta < -maxSafeInt || seq < 0 || seq >= s.next || seen[seq] {
			d.fail("surface node seq %d out of range or repeated", seq)
			return
		}
		nd := node{seq: seq, typ: nodeType(flags &^ nodeYieldsBit), yields: flags&nodeYieldsBit != 0}
		switch nd.typ {
		case nodeUser, nodeAssistant:
		case nodeToolResult:
			if len(d.b) < digestSize {
				d.fail("truncated digest")
				return
			}
			copy(nd.digest[:], d.b)
			d.b = d.b[digestSize:]
		default:
			d.fail("bad surface node type %d", nd.typ)
			return
		}
		seen[seq] = true
		prev = seq
		s.nodes = append(s.nodes, nd)
	}
}

func (d *decoder) turn(s *State) {
	flags := d.byte()
	if flags&^(turnOpenBit|turnStepOpenBit) != 0 {
		d.fail("bad turn flags")
	}
	t := turnState{open: flags&turnOpenBit != 0, stepOpen: flags&turnStepOpenBit != 0}
	t.turn = d.rawJSON()
	t.step = d.rawJSON()
	n := d.count(3)
	for range n {
		c := pendingCall{id: string(d.bytes())}
		c.step = d.rawJSON()
		c.callSeq = d.varint()
		if d.err != nil {
			return
		}
		if c.id == "" || c.callSeq < -1 || c.callSeq >= s.next || t.pendingIndex(c.id) >= 0 {
			d.fail("bad pending tool call")
			return
		}
		t.pending = append(t.pending, c)
	}
	s.turn = t
}
