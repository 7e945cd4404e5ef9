package build

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// Record is a JSON object decoded one level: its members in order, each
// value as written. Lookups take the last member of a name, as a decoder
// into a map would.
type Record []member

type member struct {
	key []byte // decoded key
	val json.RawMessage
}

// ParseRecord decodes a source line. A line that is not a JSON object
// returns nil and why, in fixed words for the invalid-line event (never a
// decoder's message, which could change with the Go release and so change
// the conversion of a file already stored).
func ParseRecord(text []byte) (Record, string) {
	if !json.Valid(text) {
		switch {
		case len(bytes.TrimSpace(text)) == 0:
			return nil, "an empty line"
		case kind(text) == '{':
			return nil, "not JSON: a torn or malformed object"
		}
		return nil, "not JSON"
	}
	if kind(text) != '{' {
		return nil, "a JSON " + jsonKindName(text) + ", not an object"
	}
	r, _ := Object(text)
	if r == nil {
		r = Record{}
	}
	return r, ""
}

func jsonKindName(text []byte) string {
	switch kind(text) {
	case '"':
		return "string"
	case '[':
		return "array"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// kind returns the first byte of a JSON value, whitespace skipped.
func kind(raw []byte) byte {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

func (r Record) get(k string) json.RawMessage {
	for i := len(r) - 1; i >= 0; i-- {
		if string(r[i].key) == k {
			return r[i].val
		}
	}
	return nil
}

// Str returns member k when it is a JSON string.
func (r Record) Str(k string) (string, bool) { return String(r.get(k)) }

// NonEmpty returns member k when it is a non-empty JSON string.
func (r Record) NonEmpty(k string) (string, bool) {
	s, ok := String(r.get(k))
	return s, ok && s != ""
}

// True reports whether member k is the literal true.
func (r Record) True(k string) bool { return string(r.get(k)) == "true" }

// Has reports whether member k is present.
func (r Record) Has(k string) bool { return r.get(k) != nil }

// Obj returns member k when it is a JSON object.
func (r Record) Obj(k string) (Record, bool) { return Object(r.get(k)) }

// Raw returns member k as written, nil when absent.
func (r Record) Raw(k string) json.RawMessage { return r.get(k) }

// String decodes raw when it is a JSON string. Invalid UTF-8 in it
// becomes U+FFFD, so the result is always valid UTF-8.
func String(raw json.RawMessage) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Object splits raw into its members when it is a JSON object. raw must be
// valid JSON (a part of a line ParseRecord accepted, which checked the
// whole line once), so the split does not check it again.
func Object(raw json.RawMessage) (Record, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	var r Record
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] == '"' {
		end := skipString(raw, i)
		key := raw[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			_ = json.Unmarshal(raw[i:end], &s)
			key = []byte(s)
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // the colon
		vend := skipValue(raw, i)
		r = append(r, member{key: key, val: raw[i:vend:vend]})
		i = skipSpace(raw, vend)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return r, true
}

// Array splits raw into its elements when it is a JSON array (valid JSON,
// as for Object).
func Array(raw json.RawMessage) ([]json.RawMessage, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	var out []json.RawMessage
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != ']' {
		end := skipValue(raw, i)
		if end == i {
			break
		}
		out = append(out, raw[i:end:end])
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, true
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at raw[i]: the
// next quote not escaped by an odd run of backslashes.
func skipString(raw []byte, i int) int {
	for i++; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '"')
		if j < 0 {
			return len(raw)
		}
		q := i + j
		n := 0
		for k := q - 1; k >= i && raw[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
	return len(raw)
}

// skipValue returns the index after the value starting at raw[i].
func skipValue(raw []byte, i int) int {
	if i >= len(raw) {
		return i
	}
	switch raw[i] {
	case '"':
		return skipString(raw, i)
	case '{', '[':
		depth := 0
		for ; i < len(raw); i++ {
			switch raw[i] {
			case '"':
				i = skipString(raw, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(raw)
	}
	for i < len(raw) && raw[i] != ',' && raw[i] != '}' && raw[i] != ']' && raw[i] != ' ' && raw[i] != '\t' && raw[i] != '\n' && raw[i] != '\r' {
		i++
	}
	return i
}

// IsString reports whether raw is a JSON string.
func IsString(raw json.RawMessage) bool { return kind(raw) == '"' }

// Compact returns raw without insignificant whitespace, as valid UTF-8:
// the text of a tool's arguments. Absent raw gives "{}".
func Compact(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return strings.ToValidUTF8(string(raw), "\uFFFD")
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

// Int returns raw when it is a JSON number that is a non-negative integer
// below 2^31.
func Int(raw json.RawMessage) (int64, bool) {
	var n json.Number
	if kind(raw) == '"' || json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	v, err := n.Int64()
	if err != nil || v < 0 || v >= 1<<31 {
		return 0, false
	}
	return v, true
}

// Millis parses an ISO-8601 timestamp (RFC 3339, any fraction) into epoch
// milliseconds within the safe-integer range.
func Millis(s string) (int64, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	ms := t.UnixMilli()
	if ms > record.MaxSafeInteger || ms < -record.MaxSafeInteger {
		return 0, false
	}
	return ms, true
}

// Token reports whether s may follow "<harness>/" in an event type: 1 to
// 64 bytes of ASCII letters, digits and "_-.:", led by a letter or digit.
func Token(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '-' || c == '.' || c == ':'):
		default:
			return false
		}
	}
	return true
}

// SessionID returns prefix+name when that is a valid session id, and
// otherwise prefix+"x"+ the first 32 hex digits of SHA-256(name), so that a
// hostile or over-long name still gives a stable, valid id.
func SessionID(prefix, name string) string {
	if id := prefix + name; name != "" && record.ValidateSessionID(id) == nil {
		return id
	}
	sum := sha256.Sum256([]byte(name))
	return prefix + "x" + hex.EncodeToString(sum[:16])
}

// FileName returns the last element of a slash- or backslash-separated
// path and the element before it.
func FileName(path string) (dir, base string) {
	i := strings.LastIndexAny(path, `/\`)
	base = path[i+1:]
	if i < 0 {
		return "", base
	}
	rest := path[:i]
	j := strings.LastIndexAny(rest, `/\`)
	return rest[j+1:], base
}

// Stem returns a file name without its .jsonl (or .json) extension.
func Stem(base string) string {
	for _, ext := range []string{".jsonl", ".json"} {
		if strings.HasSuffix(base, ext) {
			return strings.TrimSuffix(base, ext)
		}
	}
	return base
}

// Abs reports whether cwd is an absolute path a header can hold: POSIX, or
// a Windows drive-letter or UNC path, kept as the harness stated it
// (dshq.AbsoluteCwd).
func Abs(cwd string) bool { return dshq.AbsoluteCwd(cwd) }
