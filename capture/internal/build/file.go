package build

import (
	"strconv"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
)

// Format is what a harness's converter says of its own; File runs the
// rest of capture.Converter: line order and counts, holding lines until the
// header is decided, the invalid-line event, the events' time, the holder
// of each line, updates and stats.
type Format interface {
	// Learn reads what a line held before the header is decided states for
	// it (r is nil for a line that is not a JSON object), and reports
	// whether the header is now known.
	Learn(l capture.Line, r Record) (ready bool)
	// Header returns the facts of the header of the file's own session from
	// what the held lines stated; name is the session name to use when they
	// stated none (the file name's, else one made from the first line).
	Header(name string) HeaderFacts
	// Start is told the file's own session, once it is decided or resumed
	// (capture.Config.Own).
	Start(own *Session)
	// Convert converts a record of the line src (whose holder is the own
	// session; src is valid during the call only) and returns the type of
	// the log-only event that holds the line when nothing converted from it
	// did.
	Convert(src *Src, r Record) (holderType string)
}

// File is the skeleton of a harness converter (capture.Converter) around
// its Format.
type File struct {
	f       Format
	harness string
	// name is the session name the file name gives ("" for none).
	name   string
	max    int
	intake Intake
	stats  capture.Stats
	// Before the header is decided: the held lines.
	held Held
	// After: the file's own session first, then the children it started.
	own      *Session
	sessions []*Session
	// lastTime is the last timestamp a line stated: the time of the
	// events of a line that states none.
	lastTime int64
	// src is the line being converted, reused from line to line (a Src a
	// Format is handed through an interface would otherwise be allocated
	// for every line).
	src Src
}

// NewFile returns the skeleton of a converter of harness whose file name
// gives the session name name. With cfg.Own the own session is resumed at
// once (f.Start is called before NewFile returns).
func NewFile(cfg capture.Config, harness, name string, f Format) *File {
	c := &File{f: f, harness: harness, name: name, max: cfg.MaxEvent()}
	if cfg.Own != nil {
		c.start(*cfg.Own, true, nil)
	}
	return c
}

// Feed converts the next line (capture.Converter).
func (c *File) Feed(l capture.Line) ([]capture.Update, error) {
	rec, why, err := c.intake.Next(l, &c.stats)
	if err != nil {
		return nil, err
	}
	if c.own != nil {
		c.process(l, rec, why)
		return c.drain(), nil
	}
	ready := c.f.Learn(l, rec)
	if full := c.held.Hold(l, rec, why); full || ready {
		c.decide()
	}
	return c.drain(), nil
}

// Finish decides a header still waiting (capture.Converter).
func (c *File) Finish() []capture.Update {
	if c.own == nil && c.held.Len() > 0 {
		c.decide()
	}
	return c.drain()
}

// Stats returns the counts so far (capture.Converter).
func (c *File) Stats() capture.Stats {
	st := c.stats
	st.Pending = int64(c.held.Len())
	for _, s := range c.sessions {
		st = st.Add(s.Stats())
	}
	return st
}

// NewSession starts the log of another session the file holds lines of (a
// child), whose updates follow those of the sessions started before it.
func (c *File) NewSession(h dshq.HeaderRecord, notices []string) *Session {
	s := NewSession(h, c.harness, c.max, false, notices...)
	c.sessions = append(c.sessions, s)
	return s
}

// decide fixes the own session's header and converts the held lines.
func (c *File) decide() {
	name := c.name
	if name == "" {
		name = c.held.FirstLineID()
	}
	h, notices := c.f.Header(name).Record()
	c.start(h, false, notices)
	for _, p := range c.held.Release() {
		c.process(p.Line, p.Rec, p.Why)
	}
}

func (c *File) start(h dshq.HeaderRecord, announced bool, notices []string) {
	c.own = NewSession(h, c.harness, c.max, announced, notices...)
	c.sessions = append(c.sessions, c.own)
	// Lines before the first timestamped one take the session's start.
	c.lastTime = h.Header.CreatedAt
	c.f.Start(c.own)
}

// process converts one line once the header is decided: a line that is not
// a JSON object becomes <harness>/invalid-line, saying why.
func (c *File) process(l capture.Line, r Record, why string) {
	c.src = Src{Line: l, Holder: c.own.ID}
	src := &c.src
	if ts, ok := r.Str("timestamp"); ok {
		if ms, ok := Millis(ts); ok {
			c.lastTime = ms
		}
	}
	src.Time = c.lastTime
	if r == nil {
		c.stats.InvalidLines++
		c.own.LogOnly(src, c.harness+"/invalid-line", O("error", why))
		return
	}
	c.own.EnsureHeld(src, c.f.Convert(src, r))
}

func (c *File) drain() []capture.Update {
	var out []capture.Update
	for _, s := range c.sessions {
		if u, ok := s.Drain(); ok {
			out = append(out, u)
		}
	}
	return out
}

// maxID is the longest id taken from a record; a longer one is replaced by
// one made from the line.
const maxID = 200

// ID returns the first of keys that is a non-empty string in r, unless it
// is longer than maxID; else an id made from the line: "line-<n>" and
// suffix.
func (s *Src) ID(r Record, suffix string, keys ...string) string {
	for _, k := range keys {
		if id, ok := r.NonEmpty(k); ok {
			if len(id) > maxID {
				break
			}
			return id
		}
	}
	return "line-" + strconv.FormatInt(s.Line.No, 10) + suffix
}

// MessageIDOf returns the id of the next message derived from the line:
// member key of r, or one made from the line (see ID).
func (s *Src) MessageIDOf(r Record, key string) string { return s.MessageID(s.ID(r, "", key)) }
