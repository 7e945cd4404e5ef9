package capture

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/dshq/dshq"
)

// The capture member (docs/harnesses.md#source-lines). Every event a
// converter writes has data.capture naming the source line it came from;
// exactly one event per line (the first derived from it, in the session
// that holds the file) carries the line's bytes.
const (
	// FieldCapture is the member of an event's data that names its source
	// line (for a user/message, a member of the message, which is its data).
	FieldCapture = "capture"
	// FieldLine is the line's number in its file, from 1.
	FieldLine = "line"
	// FieldText is the line's bytes without terminator, when they are valid
	// UTF-8 (the holder only).
	FieldText = "text"
	// FieldBase64 is the line's bytes in standard base64, instead of text,
	// when they are not valid UTF-8 (the holder only).
	FieldBase64 = "base64"
	// FieldEOL is the line's terminator when it is not "\n": "\r\n", or ""
	// for a last line without one (the holder only).
	FieldEOL = "eol"
	// FieldParts is the number of pieces the line's bytes are split into
	// when they do not fit one event (the holder only; absent = 1). The
	// holder carries piece 1, and TypeLinePart events carry the others.
	FieldParts = "parts"
	// FieldPart is a TypeLinePart event's piece number (2 onwards).
	FieldPart = "part"
	// FieldSession names the session that holds the line, on an event of
	// another session derived from it (an inline sidechain's child session
	// points at its parent, which holds the file).
	FieldSession = "session"
	// FieldTruncated is true when the event's derived content (message
	// text, tool arguments) was shortened to fit MaxEventBytes; the source
	// line keeps all of it.
	FieldTruncated = "truncated"
)

// TypeLinePart is the log-only event carrying a further piece of a source
// line too long for one event.
const TypeLinePart = "capture/line-part"

// captureMember is the decoded capture member.
type captureMember struct {
	Line    *int64  `json:"line"`
	Text    *string `json:"text"`
	Base64  *string `json:"base64"`
	EOL     *string `json:"eol"`
	Parts   *int64  `json:"parts"`
	Part    *int64  `json:"part"`
	Session *string `json:"session"`
}

// SourceError is why a log's source lines cannot be rebuilt: not a
// converted log, or one whose capture members do not fit together.
type SourceError struct {
	// Seq is the event at fault, -1 when the fault is the log as a whole.
	Seq int64
	Msg string
}

func (e *SourceError) Error() string {
	if e.Seq < 0 {
		return "capture: " + e.Msg
	}
	return fmt.Sprintf("capture: event %d: %s", e.Seq, e.Msg)
}

func sourceErr(seq int64, format string, args ...any) error {
	return &SourceError{Seq: seq, Msg: fmt.Sprintf(format, args...)}
}

// SourceLines returns the source lines a converted session log holds, in
// order, numbered from 1: the input Source writes back. It fails with a
// *SourceError when an event has no capture member, when the log holds no
// line (a child session whose lines its parent holds: the message names
// the parent), or when the held lines and pieces are not complete and in
// order.
func SourceLines(events []dshq.Event) ([]Line, error) {
	var lines []Line
	var open *Line // the line whose pieces are being gathered
	var parts, got int64
	var b64 bool
	var text []byte
	var elsewhere string
	closeLine := func(seq int64) error {
		if open == nil {
			return nil
		}
		if got != parts {
			return sourceErr(seq, "line %d has %d of its %d pieces", open.No, got, parts)
		}
		if b64 {
			raw, err := base64.StdEncoding.DecodeString(string(text))
			if err != nil {
				return sourceErr(seq, "line %d: base64: %v", open.No, err)
			}
			open.Text = raw
		} else {
			open.Text = bytes.Clone(text)
		}
		lines = append(lines, *open)
		open, text = nil, text[:0]
		return nil
	}
	for _, e := range events {
		c, err := eventCapture(e)
		if err != nil {
			return nil, err
		}
		switch {
		case c.Part != nil:
			if open == nil || *c.Line != open.No || *c.Part != got+1 {
				return nil, sourceErr(e.Seq, "piece %d of line %d is out of order", *c.Part, *c.Line)
			}
			s, isB64, err := pieceOf(e.Seq, c)
			if err != nil {
				return nil, err
			}
			if isB64 != b64 {
				return nil, sourceErr(e.Seq, "piece %d of line %d mixes text and base64", *c.Part, *c.Line)
			}
			text = append(text, s...)
			got++
		case c.Text != nil || c.Base64 != nil:
			if err := closeLine(e.Seq); err != nil {
				return nil, err
			}
			if want := int64(len(lines)) + 1; *c.Line != want {
				return nil, sourceErr(e.Seq, "holds line %d, expected line %d", *c.Line, want)
			}
			s, isB64, err := pieceOf(e.Seq, c)
			if err != nil {
				return nil, err
			}
			eol := "\n"
			if c.EOL != nil {
				eol = *c.EOL
			}
			if eol != "\n" && eol != "\r\n" && eol != "" {
				return nil, sourceErr(e.Seq, "line %d has terminator %q", *c.Line, eol)
			}
			open = &Line{No: *c.Line, EOL: eol}
			parts, got, b64 = 1, 1, isB64
			if c.Parts != nil {
				parts = *c.Parts
			}
			if parts < 1 {
				return nil, sourceErr(e.Seq, "line %d has %d pieces", *c.Line, parts)
			}
			text = append(text[:0], s...)
		default:
			if c.Session != nil && elsewhere == "" {
				elsewhere = *c.Session
			}
		}
	}
	if err := closeLine(-1); err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		if elsewhere != "" {
			return nil, sourceErr(-1, "the log holds no source line: its lines are held by session %q", elsewhere)
		}
		return nil, sourceErr(-1, "the log holds no source line")
	}
	return lines, nil
}

// Source returns the bytes of the source file a converted session log was
// made from, exactly: its lines and their terminators, in order. Errors are
// SourceLines'.
func Source(events []dshq.Event) ([]byte, error) {
	lines, err := SourceLines(events)
	if err != nil {
		return nil, err
	}
	var n int64
	for _, l := range lines {
		n += l.Len()
	}
	out := make([]byte, 0, n)
	for _, l := range lines {
		out = append(append(out, l.Text...), l.EOL...)
	}
	return out, nil
}

var captureKey = []byte(`"` + FieldCapture + `":`)

// eventCapture decodes an event's data.capture. A converter writes it as
// the last member of data, so it is read from there without decoding the
// rest; data written otherwise is decoded whole.
func eventCapture(e dshq.Event) (captureMember, error) {
	var c *captureMember
	if i := bytes.LastIndex(e.Data, captureKey); i > 0 && (e.Data[i-1] == ',' || e.Data[i-1] == '{') && e.Data[len(e.Data)-1] == '}' {
		var m captureMember
		if json.Unmarshal(e.Data[i+len(captureKey):len(e.Data)-1], &m) == nil {
			c = &m
		}
	}
	if c == nil {
		var d struct {
			Capture *captureMember `json:"capture"`
		}
		if json.Unmarshal(e.Data, &d) == nil {
			c = d.Capture
		}
	}
	if c == nil || c.Line == nil {
		return captureMember{}, sourceErr(e.Seq, "%s event has no capture member: not a converted log", e.Type)
	}
	if *c.Line < 1 {
		return captureMember{}, sourceErr(e.Seq, "capture line %d", *c.Line)
	}
	return *c, nil
}

// pieceOf returns the text or base64 piece a capture member carries.
func pieceOf(seq int64, c captureMember) (string, bool, error) {
	switch {
	case c.Text != nil && c.Base64 != nil:
		return "", false, sourceErr(seq, "line %d has both text and base64", *c.Line)
	case c.Base64 != nil:
		return *c.Base64, true, nil
	case c.Text != nil:
		if !utf8.ValidString(*c.Text) {
			return "", false, sourceErr(seq, "line %d text is not valid UTF-8", *c.Line)
		}
		return *c.Text, false, nil
	}
	return "", false, sourceErr(seq, "piece of line %d carries no bytes", *c.Line)
}
