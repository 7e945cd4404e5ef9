package build

import (
	"fmt"

	"github.com/dshq/dshq/capture"
)

// Intake is the start of a converter's Feed: it checks that lines come in
// order, counts them and parses each. The zero value expects line 1.
type Intake struct {
	last int64
}

// Next checks that l follows the previous line (capture.ErrLineOrder, and
// nothing changes, otherwise), counts it into st and parses it
// (ParseRecord).
func (in *Intake) Next(l capture.Line, st *capture.Stats) (Record, string, error) {
	if l.No != in.last+1 {
		return nil, "", fmt.Errorf("%w: got line %d, expected %d", capture.ErrLineOrder, l.No, in.last+1)
	}
	in.last++
	st.Lines++
	st.Bytes += l.Len()
	rec, why := ParseRecord(l.Text)
	return rec, why, nil
}

// Held is the lines a converter holds, parsed, until it can decide its
// session's header. The zero value is empty.
type Held struct {
	lines []HeldLine
	bytes int64
}

// HeldLine is one held line and what ParseRecord made of it.
type HeldLine struct {
	Line capture.Line
	Rec  Record
	Why  string
}

// Hold adds a line and reports whether the hold is full
// (capture.MaxPendingLines or capture.MaxPendingBytes): the header must be
// decided now.
func (h *Held) Hold(l capture.Line, rec Record, why string) (full bool) {
	h.lines = append(h.lines, HeldLine{l, rec, why})
	h.bytes += l.Len()
	return len(h.lines) >= capture.MaxPendingLines || h.bytes >= capture.MaxPendingBytes
}

// Len returns how many lines are held.
func (h *Held) Len() int { return len(h.lines) }

// FirstLineID is the session id of last resort, made from the first held
// line's text ("" when none is held).
func (h *Held) FirstLineID() string {
	if len(h.lines) == 0 {
		return ""
	}
	return SessionID("", string(h.lines[0].Line.Text))
}

// Release returns the held lines and empties the hold.
func (h *Held) Release() []HeldLine {
	out := h.lines
	h.lines, h.bytes = nil, 0
	return out
}
