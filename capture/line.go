package capture

import (
	"bytes"
	"encoding/json"
)

// Line is one physical line of a source file.
type Line struct {
	// No is the line's number in its file, from 1.
	No int64
	// Text is the line without its terminator.
	Text []byte
	// EOL is the terminator: "\n", "\r\n", or "" for a last line that has
	// none (a file finished without a final newline, or a torn write the
	// caller decided to keep).
	EOL string
}

// Len returns the number of source bytes the line occupies, terminator
// included.
func (l Line) Len() int64 { return int64(len(l.Text) + len(l.EOL)) }

// Lines cuts a growing byte stream into Lines. A line ends at "\n"; a "\r"
// right before it is part of the terminator ("\r\n"), any other "\r" is
// text. What follows the last "\n" is held, not returned: it is a line only
// once its newline arrives, or when the caller declares the stream finished
// (Finish). The zero value starts at line 1 and offset 0; NewLines starts
// elsewhere (to continue a file after what a stored log already holds).
type Lines struct {
	next   int64 // number of the next line; 0 means 1
	offset int64 // source bytes returned as lines so far
	tail   []byte
}

// NewLines returns a Lines whose first line is numbered next and starts at
// byte offset of its file.
func NewLines(next, offset int64) *Lines {
	return &Lines{next: next, offset: offset}
}

// Write consumes p and returns the lines it completes, in order. The
// returned Text slices are the caller's to keep (they do not alias p or the
// held tail).
func (s *Lines) Write(p []byte) []Line {
	var out []Line
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.tail = append(s.tail, p...)
			break
		}
		text := make([]byte, 0, len(s.tail)+i)
		text = append(append(text, s.tail...), p[:i]...)
		s.dropTail()
		p = p[i+1:]
		eol := "\n"
		if n := len(text); n > 0 && text[n-1] == '\r' {
			text, eol = text[:n-1], "\r\n"
		}
		out = append(out, s.line(text, eol))
	}
	return out
}

// Held returns the number of bytes held after the last complete line (a
// torn write, or a last line without a newline yet).
func (s *Lines) Held() int { return len(s.tail) }

// Finish returns the held bytes as a last line without a terminator, and
// false when nothing is held. Use it when the file is complete: a finished
// file whose last line has no newline keeps that line (and its missing
// newline) this way.
func (s *Lines) Finish() (Line, bool) {
	if len(s.tail) == 0 {
		return Line{}, false
	}
	text := append([]byte(nil), s.tail...)
	s.dropTail()
	return s.line(text, ""), true
}

// maxKeptTail is the largest held buffer Lines keeps for the next torn
// write once its line is complete: a longer one (a long line's) is let go,
// so that memory is held only while such a line is.
const maxKeptTail = 64 << 10

func (s *Lines) dropTail() {
	if cap(s.tail) > maxKeptTail {
		s.tail = nil
		return
	}
	s.tail = s.tail[:0]
}

// Complete returns the held bytes as a last line without a terminator when
// no write can still be in progress in them, and false otherwise (the
// bytes stay held). This is the rule dshq import and dshq watch share for
// the last line of a file that has no newline
// (docs/harnesses.md#the-last-line-of-a-file): every line of a harness's
// JSONL file is one JSON value, so held bytes that are a whole JSON value
// are a finished last line, while held bytes that are not (a write cut in
// the middle of a line, or ending in the "\r" of a "\r\n" still to come)
// wait for the rest of their line. Finish, by contrast, takes whatever is
// held: a caller that knows the file is complete.
func (s *Lines) Complete() (Line, bool) {
	if len(s.tail) == 0 || s.tail[len(s.tail)-1] == '\r' || !json.Valid(s.tail) {
		return Line{}, false
	}
	return s.Finish()
}

// Next returns the number the next line will have.
func (s *Lines) Next() int64 {
	if s.next == 0 {
		return 1
	}
	return s.next
}

// Offset returns the number of source bytes returned as lines so far: the
// offset in the file where the next line starts.
func (s *Lines) Offset() int64 { return s.offset }

func (s *Lines) line(text []byte, eol string) Line {
	l := Line{No: s.Next(), Text: text, EOL: eol}
	s.next = l.No + 1
	s.offset += l.Len()
	return l
}

// SplitLines cuts a complete file into its lines: every line Lines.Write
// returns, then the unterminated rest, if any, as the last line.
func SplitLines(data []byte) []Line {
	var s Lines
	out := s.Write(data)
	if l, ok := s.Finish(); ok {
		out = append(out, l)
	}
	return out
}
