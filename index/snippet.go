package index

// ellipsis is U+2026, one code point.
const ellipsis = "…"

// Snippet returns at most limit code points of text around a match, by the
// original's rule (docs/search.md#snippets). matchStart is the byte offset in
// text where the first match begins (negative when unknown: the snippet then
// starts at the beginning). Whitespace runs collapse to one space and the
// result has no leading or trailing space. Text that fits is returned whole;
// otherwise the window starts limit/3 code points before the match, with …
// marking each cut side; when the window reaches the end, the trailing … is
// dropped and the window slides back to fill the room, keeping the leading …
// even if it then starts at the beginning (the original does not recompute it).
func Snippet(text string, matchStart, limit int) string {
	if limit < 1 {
		return ""
	}
	chars, matched := collapse(text, matchStart)
	n := len(chars)
	if n <= limit {
		return string(chars)
	}
	if limit == 1 {
		return ellipsis
	}
	if matched < 0 {
		matched = 0
	}
	matched = min(matched, n-1)
	start := max(0, matched-limit/3)
	prefix, suffix := "", ellipsis
	if start > 0 {
		prefix = ellipsis
	}
	content := limit - cpLen(prefix) - cpLen(suffix)
	if content < 1 {
		start = matched
		suffix = ""
		content = limit - cpLen(prefix)
	} else if matched >= start+content {
		start = matched - content + 1
	}
	end := min(n, start+content)
	if end == n {
		suffix = ""
		content = limit - cpLen(prefix)
		start = max(0, end-content)
	}
	return prefix + string(chars[start:min(n, start+content)]) + suffix
}

func cpLen(s string) int {
	if s == "" {
		return 0
	}
	return 1
}

// collapse returns text's code points with each whitespace run collapsed to
// one space and no leading or trailing space, and the index among them of the
// first code point at or after byte matchStart (-1 when matchStart < 0 or
// past the text).
func collapse(text string, matchStart int) ([]rune, int) {
	out := make([]rune, 0, len(text))
	matched := -1
	space := false
	for i, r := range text {
		if isJSSpace(r) {
			space = true
			continue
		}
		if space && len(out) > 0 {
			out = append(out, ' ')
		}
		space = false
		if matched < 0 && matchStart >= 0 && i >= matchStart {
			matched = len(out)
		}
		out = append(out, r)
	}
	return out, matched
}

// isJSSpace reports whether r matches JavaScript's \s, the whitespace class
// of the original's snippet code.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
