// Package restore is what `dshq restore` needs beside I/O: where Claude
// Code and Codex look for a session's file (Path, ClaudeProjectKey), and
// the rewrite of the working directories a harness reads from a session's
// lines, so that a session restored to another directory is found and
// resumed there (Map, Rewrite), and recognised by dshq watch as the session
// it came from (Equivalent). It is pure: no I/O, no goroutines.
//
// The fields rewritten (docs/harnesses.md#restoring-a-session-elsewhere):
//
//   - Claude Code: the top-level "cwd" of every record, and the working
//     directory of an environment attachment
//     ("attachment"."snapshot"."workingDirectory");
//   - Codex: "payload"."cwd" of a session_meta or turn_context line.
//
// Everything else — the conversation, tool inputs and outputs, paths the
// model wrote — stays as it was: it is what happened, not where the harness
// runs.
package restore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/dshq/dshq/capture"
)

// Pair maps one directory to another: a value equal to Old, or under Old
// ("Old/…"), becomes New (with the same rest).
type Pair struct {
	Old, New string
}

// Map is an ordered list of pairs; the first pair that matches a value
// rewrites it (put the longer Old first when one is under another: ParseMap
// sorts them so).
type Map []Pair

// ErrBadPair is the refusal of a pair that is not OLD=NEW with two
// absolute, clean paths.
var ErrBadPair = errors.New("restore: a map is OLD=NEW with two absolute paths")

// ParsePair parses "OLD=NEW". Both must be absolute; they are cleaned.
func ParsePair(s string) (Pair, error) {
	old, nw, ok := strings.Cut(s, "=")
	if !ok || !filepath.IsAbs(old) || !filepath.IsAbs(nw) {
		return Pair{}, fmt.Errorf("%w, not %q", ErrBadPair, s)
	}
	return Pair{Old: filepath.Clean(old), New: filepath.Clean(nw)}, nil
}

// Add appends p, keeping the longer Old paths first, so that a more
// specific pair wins over one it is under. A pair whose Old is already
// mapped replaces nothing: the first stays.
func (m Map) Add(p Pair) Map {
	for _, q := range m {
		if q.Old == p.Old {
			return m
		}
	}
	i := 0
	for i < len(m) && len(m[i].Old) >= len(p.Old) {
		i++
	}
	m = append(m, Pair{})
	copy(m[i+1:], m[i:])
	m[i] = p
	return m
}

// Apply returns the value dir maps to, and whether a pair matched.
func (m Map) Apply(dir string) (string, bool) {
	for _, p := range m {
		if dir == p.Old {
			return p.New, true
		}
		if p.Old == "/" && strings.HasPrefix(dir, "/") {
			return filepath.Join(p.New, dir[1:]), true
		}
		if strings.HasPrefix(dir, p.Old+"/") {
			return p.New + dir[len(p.Old):], true
		}
	}
	return dir, false
}

// span is the byte range [start, end) of one rewritable string value in a
// line, with its decoded value.
type span struct {
	start, end int
	value      string
}

// spans returns the rewritable values of a line of format f, in order. A
// line that is not a JSON object has none.
func spans(f capture.Format, text []byte) []span {
	type frame struct {
		obj, wantKey bool
		key          string
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var (
		out  []span
		st   []frame
		typ  string // the line's top-level "type"
		done bool
		path []string
	)
	for {
		pre := int(dec.InputOffset())
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil || done {
			return nil // not JSON, or more than one value
		}
		d, isDelim := tok.(json.Delim)
		if len(st) == 0 {
			if !isDelim || d != '{' {
				return nil
			}
			st = append(st, frame{obj: true, wantKey: true})
			continue
		}
		top := &st[len(st)-1]
		if isDelim && (d == '}' || d == ']') {
			st = st[:len(st)-1]
			if len(st) == 0 {
				done = true
			} else if st[len(st)-1].obj {
				st[len(st)-1].wantKey = true
			}
			continue
		}
		if top.obj && top.wantKey {
			top.key, _ = tok.(string)
			top.wantKey = false
			continue
		}
		if !top.obj {
			top.key = "[]"
		}
		if isDelim {
			st = append(st, frame{obj: d == '{', wantKey: d == '{'})
			continue
		}
		if s, ok := tok.(string); ok {
			path = path[:0]
			for _, fr := range st {
				path = append(path, fr.key)
			}
			if len(path) == 1 && path[0] == "type" {
				typ = s
			}
			if rewritable(f, path) {
				end := int(dec.InputOffset())
				start := pre
				for start < end && text[start] != '"' {
					start++
				}
				out = append(out, span{start: start, end: end, value: s})
			}
		}
		if top.obj {
			top.wantKey = true
		}
	}
	if !done || f == capture.FormatCodex && typ != "session_meta" && typ != "turn_context" {
		return nil
	}
	return out
}

// rewritable reports the key paths of the values a harness reads as its
// working directory.
func rewritable(f capture.Format, path []string) bool {
	switch f {
	case capture.FormatClaudeCode:
		return len(path) == 1 && path[0] == "cwd" ||
			len(path) == 3 && path[0] == "attachment" && path[1] == "snapshot" && path[2] == "workingDirectory"
	case capture.FormatCodex:
		return len(path) == 2 && path[0] == "payload" && path[1] == "cwd"
	}
	return false
}

// Rewrite returns line text of format f with its working directories
// mapped by m (byte for byte elsewhere), and whether anything changed.
func Rewrite(f capture.Format, text []byte, m Map) ([]byte, bool) {
	if len(m) == 0 {
		return text, false
	}
	var out []byte
	last := 0
	for _, s := range spans(f, text) {
		nv, ok := m.Apply(s.value)
		if !ok || nv == s.value {
			continue
		}
		out = append(out, text[last:s.start]...)
		out = append(out, quote(nv)...)
		last = s.end
	}
	if out == nil {
		return text, false
	}
	return append(out, text[last:]...), true
}

// quote encodes s as a JSON string without HTML escapes (as both harnesses
// write).
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Equivalent reports whether file, a line of a file of format f, is stored
// (a line a session holds) with its working directories rewritten: the two
// are equal outside the rewritable values, and each stored value becomes
// one file value throughout (m, the pairs seen so far, is extended and
// checked: pass the returned map to the next line's call). Equal lines are
// equivalent.
func Equivalent(f capture.Format, stored, file []byte, m map[string]string) (bool, map[string]string) {
	if bytes.Equal(stored, file) {
		return true, m
	}
	ss, fs := spans(f, stored), spans(f, file)
	if len(ss) == 0 || len(ss) != len(fs) {
		return false, m
	}
	next := map[string]string{}
	for k, v := range m {
		next[k] = v
	}
	sl, fl := 0, 0
	for i := range ss {
		if !bytes.Equal(stored[sl:ss[i].start], file[fl:fs[i].start]) {
			return false, m
		}
		if v, ok := next[ss[i].value]; ok && v != fs[i].value {
			return false, m
		}
		if !bytes.Equal(stored[ss[i].start:ss[i].end], file[fs[i].start:fs[i].end]) {
			next[ss[i].value] = fs[i].value
		}
		sl, fl = ss[i].end, fs[i].end
	}
	if !bytes.Equal(stored[sl:], file[fl:]) {
		return false, m
	}
	return true, next
}
