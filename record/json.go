package record

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects a record may have.
// The top-level object is depth 1.
const MaxDepth = 512

// DefaultMaxRecordBytes is the default limit on one record (one JSONL line or
// one stream message), in bytes.
const DefaultMaxRecordBytes = 64 << 20

// member is a top-level key of an object with the span of its value in the
// compacted output.
type member struct {
	key        string
	start, end int
}

// scanner validates one JSON text losslessly and writes its compact form:
// insignificant whitespace removed, every token kept byte for byte.
type scanner struct {
	in    []byte
	pos   int
	out   []byte
	depth int
	// keys is a stack of the keys of the objects being scanned; each open
	// object owns keys[its start:].
	keys [][]byte
	top  []member
}

// compactObject validates in as one JSON object (lossless JSON, see the
// package doc) and returns its compact form and its top-level members.
// The result never aliases in.
func compactObject(in []byte) ([]byte, []member, error) {
	s := scanner{in: in, out: make([]byte, 0, len(in))}
	s.skipSpace()
	if s.pos == len(s.in) {
		return nil, nil, recErr(RuleInvalidJSON, "empty record")
	}
	if s.in[s.pos] != '{' {
		if err := s.value(); err != nil {
			return nil, nil, err
		}
		return nil, nil, recErr(RuleNotObject, "record is not a JSON object")
	}
	if err := s.value(); err != nil {
		return nil, nil, err
	}
	s.skipSpace()
	if s.pos != len(s.in) {
		return nil, nil, s.syntax("trailing data after the record")
	}
	return s.out, s.top, nil
}

func (s *scanner) syntax(what string) error {
	return recErr(RuleInvalidJSON, "%s at byte %d", what, s.pos)
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.in) {
		switch s.in[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value() error {
	s.skipSpace()
	if s.pos == len(s.in) {
		return s.syntax("unexpected end of input")
	}
	switch c := s.in[s.pos]; {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		_, err := s.str(false)
		return err
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.syntax(strconv.Quote(string(rune(c))) + " where a value should be")
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.in)-s.pos < len(lit) || string(s.in[s.pos:s.pos+len(lit)]) != lit {
		return s.syntax("invalid literal")
	}
	s.out = append(s.out, lit...)
	s.pos += len(lit)
	return nil
}

func (s *scanner) enter() error {
	s.depth++
	if s.depth > MaxDepth {
		return recErr(RuleTooDeep, "nesting deeper than %d at byte %d", MaxDepth, s.pos)
	}
	return nil
}

func (s *scanner) object() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++
	s.out = append(s.out, '{')
	mark := len(s.keys)
	var set map[string]struct{} // the keys, once there are many
	defer func() { s.keys = s.keys[:mark] }()
	s.skipSpace()
	if s.pos < len(s.in) && s.in[s.pos] == '}' {
		return s.close('}')
	}
	for {
		s.skipSpace()
		if s.pos == len(s.in) || s.in[s.pos] != '"' {
			return s.syntax("expected a string key")
		}
		at := s.pos
		key, err := s.str(true)
		if err != nil {
			return err
		}
		if set == nil && len(s.keys)-mark >= linearKeys {
			set = make(map[string]struct{}, 2*linearKeys)
			for _, k := range s.keys[mark:] {
				set[string(k)] = struct{}{}
			}
		}
		if s.hasKey(mark, set, key) {
			return recErr(RuleDuplicateKey, "duplicate key %s at byte %d", strconv.Quote(string(key)), at)
		}
		s.keys = append(s.keys, key)
		if set != nil {
			set[string(key)] = struct{}{}
		}
		s.skipSpace()
		if s.pos == len(s.in) || s.in[s.pos] != ':' {
			return s.syntax("expected ':'")
		}
		s.pos++
		s.out = append(s.out, ':')
		start := len(s.out)
		if err := s.value(); err != nil {
			return err
		}
		if s.depth == 1 {
			s.top = append(s.top, member{key: string(key), start: start, end: len(s.out)})
		}
		s.skipSpace()
		if s.pos == len(s.in) {
			return s.syntax("unterminated object")
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
			s.out = append(s.out, ',')
		case '}':
			return s.close('}')
		default:
			return s.syntax("expected ',' or '}'")
		}
	}
}

// linearKeys is how many keys an object may have before its duplicate check
// uses a set instead of a linear search.
const linearKeys = 32

// hasKey reports whether the object whose keys start at mark (or are in set,
// when it is not nil) has key.
func (s *scanner) hasKey(mark int, set map[string]struct{}, key []byte) bool {
	if set != nil {
		_, ok := set[string(key)]
		return ok
	}
	for _, k := range s.keys[mark:] {
		if bytes.Equal(k, key) {
			return true
		}
	}
	return false
}

func (s *scanner) close(c byte) error {
	s.pos++
	s.out = append(s.out, c)
	s.depth--
	return nil
}

func (s *scanner) array() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++
	s.out = append(s.out, '[')
	s.skipSpace()
	if s.pos < len(s.in) && s.in[s.pos] == ']' {
		return s.close(']')
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		s.skipSpace()
		if s.pos == len(s.in) {
			return s.syntax("unterminated array")
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
			s.out = append(s.out, ',')
		case ']':
			return s.close(']')
		default:
			return s.syntax("expected ',' or ']'")
		}
	}
}

// str scans a string, copying it verbatim. With decode it also returns the
// string's value (aliasing the input when it has no escapes), lone
// surrogates kept as WTF-8 so that distinct JSON strings give distinct
// values.
func (s *scanner) str(decode bool) ([]byte, error) {
	start := s.pos
	s.pos++
	var val []byte
	escaped := false
	for {
		if s.pos == len(s.in) {
			return nil, s.syntax("unterminated string")
		}
		c := s.in[s.pos]
		switch {
		case c == '"':
			s.pos++
			s.out = append(s.out, s.in[start:s.pos]...)
			if !decode {
				return nil, nil
			}
			if !escaped {
				return s.in[start+1 : s.pos-1], nil
			}
			return val, nil
		case c == '\\':
			if !escaped && decode {
				val = append(val, s.in[start+1:s.pos]...)
			}
			escaped = true
			r, n, err := s.escape()
			if err != nil {
				return nil, err
			}
			s.pos += n
			if r >= 0xD800 && r < 0xDC00 {
				// A high surrogate escape followed by a low one is one
				// code point, equal to the same character written raw.
				if lo, m, ok := s.lowSurrogate(); ok {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					s.pos += m
				}
			}
			if decode {
				val = appendWTF8(val, r)
			}
		case c < 0x20:
			return nil, s.syntax("control character in string")
		case c < utf8.RuneSelf:
			if escaped && decode {
				val = append(val, c)
			}
			s.pos++
		default:
			r, n := utf8.DecodeRune(s.in[s.pos:])
			if r == utf8.RuneError && n == 1 {
				return nil, recErr(RuleInvalidUTF8, "invalid UTF-8 in string at byte %d", s.pos)
			}
			if escaped && decode {
				val = append(val, s.in[s.pos:s.pos+n]...)
			}
			s.pos += n
		}
	}
}

// escape decodes the escape sequence at s.pos and returns the code point
// (a UTF-16 unit for \u) and its length.
func (s *scanner) escape() (rune, int, error) {
	if s.pos+1 >= len(s.in) {
		return 0, 0, s.syntax("unterminated escape")
	}
	switch s.in[s.pos+1] {
	case '"':
		return '"', 2, nil
	case '\\':
		return '\\', 2, nil
	case '/':
		return '/', 2, nil
	case 'b':
		return '\b', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'n':
		return '\n', 2, nil
	case 'r':
		return '\r', 2, nil
	case 't':
		return '\t', 2, nil
	case 'u':
		if s.pos+6 > len(s.in) {
			return 0, 0, s.syntax("short \\u escape")
		}
		v, err := strconv.ParseUint(string(s.in[s.pos+2:s.pos+6]), 16, 16)
		if err != nil || s.in[s.pos+2] == '+' {
			return 0, 0, s.syntax("invalid \\u escape")
		}
		return rune(v), 6, nil
	default:
		return 0, 0, s.syntax("invalid escape")
	}
}

// lowSurrogate reports whether a \u escape of a low surrogate is at s.pos,
// and returns it and its length.
func (s *scanner) lowSurrogate() (rune, int, bool) {
	if s.pos+1 >= len(s.in) || s.in[s.pos] != '\\' || s.in[s.pos+1] != 'u' {
		return 0, 0, false
	}
	r, n, err := s.escape()
	if err != nil || r < 0xDC00 || r > 0xDFFF {
		return 0, 0, false
	}
	return r, n, true
}

// appendWTF8 appends r as UTF-8; a lone surrogate gets its own 3-byte form
// (WTF-8), so distinct JSON strings always decode to distinct keys.
func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(b, r)
}

func (s *scanner) number() error {
	start := s.pos
	neg := false
	if s.in[s.pos] == '-' {
		neg = true
		s.pos++
	}
	nonZero := false
	digits := func() int {
		n := 0
		for s.pos < len(s.in) && s.in[s.pos] >= '0' && s.in[s.pos] <= '9' {
			if s.in[s.pos] != '0' {
				nonZero = true
			}
			s.pos++
			n++
		}
		return n
	}
	if s.pos < len(s.in) && s.in[s.pos] == '0' {
		s.pos++
	} else if digits() == 0 {
		return s.syntax("invalid number")
	}
	if s.pos < len(s.in) && s.in[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	mantissaNonZero := nonZero
	hasFracOrExp := s.pos-start != len(intPart(s.in[start:s.pos]))
	if s.pos < len(s.in) && (s.in[s.pos] == 'e' || s.in[s.pos] == 'E') {
		hasFracOrExp = true
		s.pos++
		if s.pos < len(s.in) && (s.in[s.pos] == '+' || s.in[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return s.syntax("invalid number")
		}
	}
	lit := s.in[start:s.pos]
	if neg && !mantissaNonZero {
		return recErr(RuleNegativeZero, "number %s is -0 at byte %d", lit, start)
	}
	if !hasFracOrExp && len(lit) <= 16 {
		// A short integer is a finite double, and not -0 (checked above).
		s.out = append(s.out, lit...)
		return nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return recErr(RuleNumberRange, "number %s at byte %d is beyond the range of a double", abbreviate(lit), start)
	}
	if neg && f == 0 {
		return recErr(RuleNegativeZero, "number %s at byte %d is -0 as a double", abbreviate(lit), start)
	}
	s.out = append(s.out, lit...)
	return nil
}

// abbreviate shortens a long token for an error message.
func abbreviate(b []byte) string {
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

// splitArray returns the spans of the elements of a JSON array value that
// has already been validated; it refuses anything that is not an array.
func splitArray(v []byte) ([][]byte, bool) {
	if len(v) == 0 || v[0] != '[' {
		return nil, false
	}
	s := scanner{in: v, out: make([]byte, 0, len(v)), depth: 1}
	s.pos = 1
	s.out = append(s.out, '[')
	var elems [][]byte
	s.skipSpace()
	if s.pos < len(s.in) && s.in[s.pos] == ']' {
		return nil, true
	}
	for {
		start := len(s.out)
		if err := s.value(); err != nil {
			return nil, false
		}
		elems = append(elems, s.out[start:])
		s.skipSpace()
		if s.pos == len(s.in) {
			return nil, false
		}
		switch s.in[s.pos] {
		case ',':
			s.pos++
			s.out = append(s.out, ',')
		case ']':
			return elems, true
		default:
			return nil, false
		}
	}
}

// splitObject returns the members of a JSON object value that has already
// been validated; it refuses anything that is not an object.
func splitObject(v []byte) ([]member, []byte, bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, nil, false
	}
	out, top, err := compactObject(v)
	if err != nil {
		return nil, nil, false
	}
	return top, out, true
}

// intPart returns the leading sign and digits of a number literal.
func intPart(lit []byte) []byte {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		i++
	}
	for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
		i++
	}
	return lit[:i]
}
