package web

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// clean makes untrusted log text safe to show as text: C0 controls other
// than tab and newline, DEL and C1 controls become their visible Control
// Pictures (U+2400…) or ⟨U+XXXX⟩, and so do the bidirectional controls
// that could reorder what is shown around them (U+202A–U+202E,
// U+2066–U+2069, U+200E, U+200F, U+061C). Carriage returns before a newline
// are dropped. html/template escapes the result for its context.
func clean(s string) string {
	if !needsClean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range s {
		switch {
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
		case r == '\t' || r == '\n':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('\u2421')
		case r == utf8.RuneError && isInvalidAt(s, i):
			b.WriteRune('\uFFFD')
		case r >= 0x80 && r < 0xa0, isBidiControl(r):
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func needsClean(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f || c >= 0x80 {
			return needsCleanSlow(s)
		}
	}
	return false
}

func needsCleanSlow(s string) bool {
	for i, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 || isBidiControl(r) ||
			r == utf8.RuneError && isInvalidAt(s, i) {
			return true
		}
	}
	return false
}

func isInvalidAt(s string, i int) bool {
	_, n := utf8.DecodeRuneInString(s[i:])
	return n == 1
}

func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}

// truncate cuts s to at most n runes, saying how much was left out.
func truncate(s string, n int) (string, int) {
	if utf8.RuneCountInString(s) <= n {
		return s, 0
	}
	i, count := 0, 0
	for i = range s {
		if count == n {
			break
		}
		count++
	}
	return s[:i], utf8.RuneCountInString(s[i:])
}

// cutBytes cuts s to at most n bytes at a UTF-8 boundary (n 0: not at all),
// returning the bytes left out.
func cutBytes(s string, n int) (string, int) {
	if n <= 0 || len(s) <= n {
		return s, 0
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], len(s) - i
}

// firstLine returns the first non-blank line of s, cut to n runes.
func firstLine(s string, n int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			cut, rest := truncate(l, n)
			if rest > 0 {
				cut += "…"
			}
			return cut
		}
	}
	return ""
}
