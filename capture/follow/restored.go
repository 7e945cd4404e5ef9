package follow

import (
	"bytes"
	"sort"
	"strings"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/restore"
)

// storedPrefix returns how many bytes at the start of data hold lines, the
// lines a file's session holds, and the working directories the file
// holds in their place (nil when none differs). A stored line is at its
// place when the file has it byte for byte, or with its working
// directories rewritten as dshq restore --cwd/--map writes them
// (restore.Equivalent, each directory rewritten one way throughout): a
// restored file is the session it came from. ok is false when the file
// does not begin with the lines.
func storedPrefix(f capture.Format, lines []capture.Line, data []byte) (n int64, remapped map[string]string, ok bool) {
	for _, l := range lines {
		rest := data[min(n, int64(len(data))):]
		if bytes.HasPrefix(rest, l.Text) && bytes.HasPrefix(rest[len(l.Text):], []byte(l.EOL)) {
			n += l.Len()
			continue
		}
		text, eol, found := fileLine(rest, l.EOL)
		if !found {
			return 0, nil, false
		}
		same, m := restore.Equivalent(f, l.Text, text, remapped)
		if !same {
			return 0, nil, false
		}
		remapped = m
		n += int64(len(text) + eol)
	}
	return n, remapped, true
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
