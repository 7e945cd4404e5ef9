package build

import (
	"strconv"
	"unicode/utf8"
)

// Value is a JSON value the converters build: string, int64, bool, nil,
// Obj, Arr or Raw.
type Value any

// Obj is a JSON object with its members in order.
type Obj []Field

// Field is one member of an Obj.
type Field struct {
	K string
	V Value
}

// Arr is a JSON array.
type Arr []Value

// Raw is JSON text written as is; it must be valid, compact and lossless.
type Raw []byte

// Set returns o with member k set to v (replaced in place when present,
// appended otherwise).
func (o Obj) Set(k string, v Value) Obj {
	for i := range o {
		if o[i].K == k {
			o[i].V = v
			return o
		}
	}
	return append(o, Field{k, v})
}

// Get returns member k of o, nil when absent.
func (o Obj) Get(k string) Value {
	for _, f := range o {
		if f.K == k {
			return f.V
		}
	}
	return nil
}

// encode appends the JSON of v to b. Strings must be valid UTF-8 (every
// string here comes from a decoded JSON string or from the converter).
func encode(b []byte, v Value) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return appendString(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case bool:
		return strconv.AppendBool(b, v)
	case Raw:
		return append(b, v...)
	case Obj:
		b = append(b, '{')
		for i, f := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, f.K)
			b = append(b, ':')
			b = encode(b, f.V)
		}
		return append(b, '}')
	case Arr:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = encode(b, e)
		}
		return append(b, ']')
	case []int64:
		b = append(b, '[')
		for i, n := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, n, 10)
		}
		return append(b, ']')
	}
	panic("build: unsupported JSON value") // a converter bug, never input
}

const hexDigits = "0123456789abcdef"

// escapes marks the bytes appendString escapes.
var escapes = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendString appends s as a JSON string: '"', '\' and control
// characters escaped, everything else (non-ASCII included) as its UTF-8
// bytes, which survives any reader unchanged.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !escapes[c] {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// escapedLen returns the length appendString gives s, quotes excluded.
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		n += extra(s[i])
	}
	return n
}

func extra(c byte) int {
	switch {
	case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
		return 1
	case c < 0x20:
		return 5
	}
	return 0
}

// splitEscaped cuts s into pieces whose escaped lengths are at most first
// (the first piece) and rest (the others), at UTF-8 boundaries. Both
// budgets must be at least 6 (the longest escape of one byte, so every
// piece holds at least one rune of at most 4 bytes when rest >= 24).
func splitEscaped(s string, first, rest int) []string {
	var out []string
	budget := first
	for len(s) > 0 || len(out) == 0 {
		n, used := 0, 0
		for n < len(s) {
			r, size := utf8.DecodeRuneInString(s[n:])
			w := size
			if r < utf8.RuneSelf {
				w += extra(s[n])
			}
			if used+w > budget {
				break
			}
			used += w
			n += size
		}
		if n == 0 && len(s) > 0 && len(out) > 0 {
			// A rune wider than a whole piece cannot happen with rest >= 24;
			// take it anyway rather than loop.
			_, n = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:n])
		s = s[n:]
		budget = rest
	}
	return out
}

// truncateUTF8 returns s cut to at most n bytes at a UTF-8 boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// O returns the object of alternating keys and values: O("a", 1, "b", x).
// The keys must be strings and come in pairs (a converter's literal, never
// input).
func O(kv ...any) Obj {
	o := make(Obj, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		o = append(o, Field{K: kv[i].(string), V: kv[i+1]})
	}
	return o
}
