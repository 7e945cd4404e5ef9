package follow

import (
	"bytes"
	"errors"
	"io"
	"sort"
	"strings"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/restore"
)

// storedPrefix returns how many bytes at the start of the file lr reads
// hold lines, the lines a file's session holds, and the working
// directories the file holds in their place (nil when none differs). A
// stored line is at its place when the file has it byte for byte, or with
// its working directories rewritten as dshq restore --cwd/--map writes them
// (restore.Equivalent, each directory rewritten one way throughout): a
// restored file is the session it came from. ok is false when the file
// does not begin with the lines. The file is read a line at a time.
func storedPrefix(f capture.Format, lines []capture.Line, lr *lineReader) (n int64, remapped map[string]string, ok bool, err error) {
	for _, l := range lines {
		// The file's line at n, its "\n" included: a stored line's text
		// holds no "\n", so the file holds the stored line at n exactly
		// when that line begins with it and its terminator.
		rest, err := lr.lineAt(n)
		if err != nil {
			return 0, nil, false, err
		}
		if bytes.HasPrefix(rest, l.Text) && bytes.HasPrefix(rest[len(l.Text):], []byte(l.EOL)) {
			n += l.Len()
			continue
		}
		text, eol, found := fileLine(rest, l.EOL)
		if !found {
			return 0, nil, false, nil
		}
		same, m := restore.Equivalent(f, l.Text, text, remapped)
		if !same {
			return 0, nil, false, nil
		}
		remapped = m
		n += int64(len(text) + eol)
	}
	return n, remapped, true, nil
}

// lineReader reads the lines of a file (the first size bytes of src) in
// order, holding one window of it: the line asked for and what was read
// past it, bounded by the longest line (and a piece of readAhead bytes).
type lineReader struct {
	src  io.ReaderAt
	size int64
	win  []byte // the file's bytes from at
	at   int64
}

// readAhead is the least lineReader reads at once.
const readAhead = 64 << 10

// lineAt returns the file's line starting at off, its "\n" included (the
// rest of the file when no "\n" follows; nothing at its end). off may not
// go back before the last line asked for.
func (r *lineReader) lineAt(off int64) ([]byte, error) {
	if off < r.at || off > r.at+int64(len(r.win)) {
		r.win, r.at = r.win[:0], off
	} else {
		r.win, r.at = r.win[off-r.at:], off
	}
	scanned := 0
	for {
		if i := bytes.IndexByte(r.win[scanned:], '\n'); i >= 0 {
			return r.win[:scanned+i+1], nil
		}
		scanned = len(r.win)
		end := r.at + int64(len(r.win))
		if end >= r.size {
			return r.win, nil
		}
		more := int(min(int64(max(readAhead, len(r.win))), r.size-end))
		buf := r.win
		if cap(buf)-len(buf) < more {
			// A fresh window: the old one's bytes before off are let go.
			buf = make([]byte, len(r.win), len(r.win)+more)
			copy(buf, r.win)
		}
		n, err := r.src.ReadAt(buf[len(buf):len(buf)+more], end)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if n == 0 {
			return r.win, nil
		}
		r.win = buf[:len(buf)+n]
	}
}

// fileLine cuts the line at the start of rest as a stored line ending in
// eol would be cut: its text and the terminator's length.
func fileLine(rest []byte, eol string) ([]byte, int, bool) {
	i := bytes.IndexByte(rest, '\n')
	switch eol {
	case "\n":
		if i < 0 {
			return nil, 0, false
		}
		return rest[:i], 1, true
	case "\r\n":
		if i < 1 || rest[i-1] != '\r' {
			return nil, 0, false
		}
		return rest[:i-1], 2, true
	}
	if i >= 0 {
		return rest[:i], 0, true
	}
	return rest, 0, true
}

// remappedNotice says once that a file was recognised as a session
// restored elsewhere ("" when it was not).
func remappedNotice(r *Resumed) string {
	if len(r.Remapped) == 0 {
		return ""
	}
	olds := make([]string, 0, len(r.Remapped))
	for o := range r.Remapped {
		olds = append(olds, o)
	}
	sort.Strings(olds)
	var b strings.Builder
	for i, o := range olds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(o + " → " + r.Remapped[o])
	}
	return "restored here with its working directories rewritten (" + b.String() + "): continued as this session"
}
