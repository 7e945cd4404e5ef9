package fold

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxSafeInt is JavaScript's Number.MAX_SAFE_INTEGER: every seq, time and
// range bound upstream is a safe integer.
const maxSafeInt = 1<<53 - 1

// jsonKind returns the first significant byte of a JSON value ('{', '[', '"',
// 'n', 't', 'f', or a number's first byte), or 0 for empty input.
func jsonKind(raw []byte) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// safeIntLiteral parses a JSON number literal as JavaScript would and reports
// whether it is a safe integer. negZero is true for a literal that denotes -0.
func safeIntLiteral(raw []byte) (v int64, negZero bool, ok bool) {
	raw = bytes.TrimSpace(raw)
	k := jsonKind(raw)
	if k != '-' && (k < '0' || k > '9') {
		return 0, false, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) || math.Abs(f) > maxSafeInt {
		return 0, false, false
	}
	if f == 0 && raw[0] == '-' {
		negZero = true
	}
	return int64(f), negZero, true
}

// decodeAny decodes a JSON value into Go's generic form (map[string]any,
// []any, string, float64, bool, nil): the shape JavaScript's JSON.parse
// gives, which the fold's comparisons are defined on.
func decodeAny(raw []byte) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkLossless reports the first value in raw that upstream's lossless-JSON
// check refuses: invalid JSON, -0 and numbers outside the float64 range
// (JSON cannot carry NaN, undefined or cycles, so they cannot occur).
func checkLossless(raw []byte) error {
	if !json.Valid(raw) {
		return errors.New("invalid JSON")
	}
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			end := skipString(raw, i)
			if end < 0 {
				return errors.New("unterminated string")
			}
			i = end - 1
		case c == '-' || (c >= '0' && c <= '9'):
			j := i
			simple := c != '-'
			for j < len(raw) && strings.IndexByte("+-.eE0123456789", raw[j]) >= 0 {
				if raw[j] == 'e' || raw[j] == 'E' {
					simple = false
				}
				j++
			}
			if !simple {
				if err := checkNumber(raw[i:j]); err != nil {
					return err
				}
			}
			i = j - 1
		}
	}
	return nil
}

// checkNumber refuses a number literal that JavaScript reads as -0 or as
// an infinity.
func checkNumber(lit []byte) error {
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		return errors.New("number " + string(lit) + " is not finite")
	}
	if f == 0 && lit[0] == '-' {
		return errors.New("-0 is not lossless JSON")
	}
	return nil
}

// obj returns v as a JSON object, or nil.
func obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// arr returns v as a JSON array and whether it is one.
func arr(v any) ([]any, bool) {
	a, ok := v.([]any)
	return a, ok
}

// str returns v as a string and whether it is one.
func str(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// nonEmptyString reports whether v is a string other than "".
func nonEmptyString(v any) bool {
	s, ok := v.(string)
	return ok && s != ""
}

// scanObject calls fn with each member key and raw value of the JSON object
// raw, in order, without decoding the values. It reports false when raw is
// not an object it can walk (values are delimited, not validated).
func scanObject(raw []byte, fn func(key string, val []byte)) bool {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return skipSpace(raw, i+1) == len(raw)
	}
	for i < len(raw) {
		if raw[i] != '"' {
			return false
		}
		end := skipString(raw, i)
		if end < 0 {
			return false
		}
		key := string(raw[i+1 : end-1])
		if bytes.IndexByte(raw[i:end], '\\') >= 0 || !utf8.Valid(raw[i:end]) {
			if json.Unmarshal(raw[i:end], &key) != nil {
				return false
			}
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return false
		}
		start := skipSpace(raw, i+1)
		end = skipValue(raw, start)
		if end < 0 {
			return false
		}
		fn(key, raw[start:end])
		i = skipSpace(raw, end)
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = skipSpace(raw, i+1)
		case '}':
			return skipSpace(raw, i+1) == len(raw)
		default:
			return false
		}
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"',
// or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index after the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end := skipString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[j])) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
