package record

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/dshq/dshq"
)

// Substitute returns line with every "{{name}}" placeholder whose name is a
// key of vars replaced by that value, written as the inside of a JSON string
// (quotes and backslashes escaped), so the line stays valid JSON when the
// placeholder sat inside a string. Other placeholders stay literal. The
// result is line itself when nothing was replaced.
// Replacement is one pass: a value that itself holds a placeholder is not
// substituted again.
func Substitute(line []byte, vars map[string]string) []byte {
	i := bytes.Index(line, []byte("{{"))
	if i < 0 || len(vars) == 0 {
		return line
	}
	var out []byte
	last := 0
	for i >= 0 {
		end := bytes.Index(line[i+2:], []byte("}}"))
		if end < 0 {
			break
		}
		name := string(line[i+2 : i+2+end])
		next := i + 1
		if val, ok := vars[name]; ok {
			if out == nil {
				out = make([]byte, 0, len(line)+len(val))
			}
			out = append(out, line[last:i]...)
			out = appendEscaped(out, val)
			last = i + 2 + end + 2
			next = last
		}
		j := bytes.Index(line[next:], []byte("{{"))
		if j < 0 {
			break
		}
		i = next + j
	}
	if out == nil {
		return line
	}
	return append(out, line[last:]...)
}

// appendEscaped appends s as the inside of a JSON string.
func appendEscaped(b []byte, s string) []byte {
	var esc bytes.Buffer
	appendString(&esc, s)
	return append(b, esc.Bytes()[1:esc.Len()-1]...)
}

// replace replaces every from in line by to escaped as JSON string content.
func replace(line []byte, from, to string) []byte {
	if !bytes.Contains(line, []byte(from)) {
		return line
	}
	return bytes.ReplaceAll(line, []byte(from), appendEscaped(nil, to))
}

// fixture is the placeholder substitution for one file
// (docs/file-format.md#test-fixtures-and-placeholders): {{cwd}} and
// {{sessionId}}; when the header's cwd is "{{cwd}}/workspace", every
// "{{cwd}}/workspace" collapses to the cwd itself (the web seeder's
// rewrite of the header cwd to the workspace root).
type fixture struct {
	cwd, sessionID string
	collapse       bool
}

func (f *fixture) apply(line []byte) []byte {
	if !bytes.Contains(line, []byte("{{")) {
		return line
	}
	if f.collapse {
		line = replace(line, "{{cwd}}/workspace", f.cwd)
	}
	line = replace(line, "{{cwd}}", f.cwd)
	return replace(line, "{{sessionId}}", f.sessionID)
}

// Placeholder returns the first "{{name}}" template placeholder in s (name
// non-empty, without braces), or "" when s holds none.
func Placeholder(s string) string {
	for i := 0; ; {
		j := strings.Index(s[i:], "{{")
		if j < 0 {
			return ""
		}
		start := i + j
		end := strings.Index(s[start+2:], "}}")
		if end < 0 {
			return ""
		}
		name := s[start+2 : start+2+end]
		if name != "" && !strings.ContainsAny(name, "{}") {
			return s[start : start+2+end+2]
		}
		i = start + 1
	}
}

// headerPlaceholder refuses a header whose id, parentSession or cwd holds a
// placeholder (RulePlaceholder).
func headerPlaceholder(h dshq.Header) error {
	fields := []struct {
		name  string
		value *string
	}{{"id", &h.ID}, {"parentSession", h.ParentSession}, {"cwd", h.Cwd}}
	for _, f := range fields {
		if f.value == nil {
			continue
		}
		if p := Placeholder(*f.value); p != "" {
			return &RecordError{Rule: RulePlaceholder, Msg: "session header " + f.name + " " + strconv.Quote(*f.value) + " holds the " + p + " placeholder of a test fixture template"}
		}
	}
	return nil
}
