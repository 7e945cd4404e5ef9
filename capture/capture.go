package capture

import (
	"errors"
	"fmt"

	"github.com/dshq/dshq"
)

// DefaultMaxEventBytes is the largest event a converter writes, encoded:
// the bus's default maximum payload (1 MiB) less room for the record's NATS
// headers. A longer source line is split over several events
// (docs/harnesses.md#source-lines), so every converted event can be
// published.
const DefaultMaxEventBytes = 1<<20 - 16<<10

// MinMaxEventBytes is the smallest Config.MaxEventBytes a converter accepts.
const MinMaxEventBytes = 4 << 10

// Header waiting. A converter holds a file's lines until they tell it the
// session's header (its id, createdAt and cwd), so that the header is the
// same whether the file is converted whole or line by line. It stops
// waiting after MaxPendingLines lines or MaxPendingBytes bytes, whichever
// comes first, and decides the header from what it has (the limits are part
// of the conversion: a log converted with other limits could differ).
const (
	MaxPendingLines = 1000
	MaxPendingBytes = 16 << 20
)

// Config is what a converter is told about the file it converts.
type Config struct {
	// Path is the file's path (absolute, or relative to the harness's
	// root). Only its last elements are read: the file name gives the
	// session id when no line states one, and a Claude Code subagent file
	// (agent-<id>.jsonl) is told from a main transcript by it.
	Path string
	// MaxEventBytes bounds every event's encoded size; 0 means
	// DefaultMaxEventBytes. It is part of the conversion: every conversion of
	// one file must use the same value, or the logs differ where a long line
	// is split.
	MaxEventBytes int
	// Own, when set, is the header under which this file's own session (the
	// session that holds its lines) is already stored: the converter takes
	// it as decided from the first line instead of waiting for the lines to
	// state it, and emits no header record for it. A conversion resumed from
	// a stored log sets it
	// (docs/harnesses.md#prefix-stable-incremental-resumable), so a header
	// that was decided by Finish or by the waiting limits is reproduced
	// exactly.
	Own *dshq.HeaderRecord
}

// MaxEvent returns the effective event size bound.
func (c Config) MaxEvent() int {
	if c.MaxEventBytes == 0 {
		return DefaultMaxEventBytes
	}
	return max(c.MaxEventBytes, MinMaxEventBytes)
}

// Update is what one Feed or Finish produced for one session.
type Update struct {
	// SessionID is the session's dshq id.
	SessionID string
	// Header is set in the first update of a session: its header record
	// (Raw as record.EncodeHeader writes it). A session's events never come
	// before its header, and a child's header never before its parent's.
	Header *dshq.HeaderRecord
	// Events are the session's new events, seq contiguous with the events
	// of its earlier updates, each with Raw set.
	Events []dshq.Event
	// Notices are things a person should be told once about the session,
	// such as a cwd that cannot be known (its session is then visible to no
	// workspace caller).
	Notices []string
}

// Stats counts what a converter has done so far.
type Stats struct {
	// Lines and Bytes count the source lines fed and their bytes.
	Lines, Bytes int64
	// InvalidLines counts lines that are not a JSON object.
	InvalidLines int64
	// Sessions counts the sessions whose header was emitted; ChildSessions
	// those of them that are a subagent (or a spawned or forked thread).
	Sessions, ChildSessions int
	// Events counts the events emitted. LogOnly counts those of them that
	// carry a source record with no dshq meaning (type "<harness>/<record
	// type>", invalid lines included); Parts the extra events of lines
	// longer than one event (type "capture/line-part"); Truncated the events
	// whose derived content was shortened to fit (the full text stays in the
	// source line).
	Events, LogOnly, Parts, Truncated int64
	// Pending counts the lines held while the header is not yet known.
	Pending int64
}

// Add returns the sum of s and o.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Lines: s.Lines + o.Lines, Bytes: s.Bytes + o.Bytes, InvalidLines: s.InvalidLines + o.InvalidLines,
		Sessions: s.Sessions + o.Sessions, ChildSessions: s.ChildSessions + o.ChildSessions,
		Events: s.Events + o.Events, LogOnly: s.LogOnly + o.LogOnly, Parts: s.Parts + o.Parts,
		Truncated: s.Truncated + o.Truncated, Pending: s.Pending + o.Pending,
	}
}

// ErrLineOrder is returned by Feed for a line whose number is not the next
// one: a converter must see a file's lines in order, each once.
var ErrLineOrder = errors.New("capture: line out of order")

// Converter turns one source file into dshq session logs, line by line. It
// is prefix-stable: the updates for the first N lines are the same whatever
// follows, so feeding a growing file line by line gives exactly what
// converting the finished file gives. It is pure: no I/O, no goroutines;
// not safe for concurrent use.
type Converter interface {
	// Feed converts the next line (its No must be the next number, else
	// ErrLineOrder and nothing changes). A line that is not JSON is kept
	// as an invalid-line event; Feed never fails on content.
	Feed(Line) ([]Update, error)
	// Finish says the file is complete as fed so far: a header still
	// waiting for its facts is decided from what the lines gave (with a
	// notice), and its held events are returned. Feeding may continue
	// afterwards (a file that grows later).
	Finish() []Update
	// Stats returns the counts so far.
	Stats() Stats
}

// Convert feeds every line of a complete file to c, then Finish, and
// returns all the updates in order.
func Convert(c Converter, data []byte) ([]Update, error) {
	var out []Update
	for _, l := range SplitLines(data) {
		u, err := c.Feed(l)
		if err != nil {
			return out, err
		}
		out = append(out, u...)
	}
	return append(out, c.Finish()...), nil
}

// Log is one converted session log: its header record and its events.
type Log struct {
	Header  dshq.HeaderRecord
	Events  []dshq.Event
	Notices []string
}

// Collect merges updates into complete logs, in the order their headers
// appeared. It fails on updates that do not fit together (events before
// their header, a second header, a seq gap): a converter's output always
// fits.
func Collect(updates []Update) ([]Log, error) {
	var logs []Log
	at := map[string]int{}
	for _, u := range updates {
		i, ok := at[u.SessionID]
		if u.Header != nil {
			if ok {
				return nil, fmt.Errorf("capture: session %q has a second header", u.SessionID)
			}
			i, ok = len(logs), true
			at[u.SessionID] = i
			logs = append(logs, Log{Header: *u.Header})
		}
		if !ok {
			return nil, fmt.Errorf("capture: session %q has events before its header", u.SessionID)
		}
		l := &logs[i]
		for _, e := range u.Events {
			if e.Seq != int64(len(l.Events)) {
				return nil, fmt.Errorf("capture: session %q: event seq %d, expected %d", u.SessionID, e.Seq, len(l.Events))
			}
			l.Events = append(l.Events, e)
		}
		l.Notices = append(l.Notices, u.Notices...)
	}
	return logs, nil
}
