package web

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// segment is a piece of a snippet; Hit marks the matched phrase.
type segment struct {
	Text string
	Hit  bool
}

// token is one searchable unit of text: a run of letters and digits, or one
// CJK character, folded (lower case, no diacritics), with its byte span in
// the original text.
type token struct {
	folded     string
	start, end int
}

// highlight splits snippet into segments, marking every occurrence of the
// phrase query the way search finds it: case- and diacritic-insensitively,
// on token boundaries, CJK character by character. Both are cleaned first.
func highlight(snippet, query string) []segment {
	snippet = clean(snippet)
	q := tokens(clean(query))
	if len(q) == 0 {
		return []segment{{Text: snippet}}
	}
	t := tokens(snippet)
	var out []segment
	at := 0
	for i := 0; i+len(q) <= len(t); {
		if !matchAt(t[i:], q) {
			i++
			continue
		}
		start, end := t[i].start, t[i+len(q)-1].end
		if start > at {
			out = append(out, segment{Text: snippet[at:start]})
		}
		out = append(out, segment{Text: snippet[start:end], Hit: true})
		at = end
		i += len(q)
	}
	if at < len(snippet) {
		out = append(out, segment{Text: snippet[at:]})
	}
	return out
}

func matchAt(t, q []token) bool {
	for j := range q {
		if t[j].folded != q[j].folded {
			return false
		}
	}
	return true
}

// tokens splits s into folded tokens, as the index's analysis does (see
// docs/search.md, Words and folding): a token is a run of letters, numbers and
// marks, split where it changes between CJK and other scripts; a non-CJK
// token is lower-cased and stripped of its diacritics (NFKD, no nonspacing
// marks); CJK text is matched character by character (NFKC).
func tokens(s string) []token {
	var out []token
	start, startCJK := -1, false
	flush := func(end int) {
		if start < 0 {
			return
		}
		if startCJK {
			for i, r := range s[start:end] {
				out = append(out, token{folded: norm.NFKC.String(string(r)), start: start + i, end: start + i + utf8.RuneLen(r)})
			}
		} else if f := foldWord(s[start:end]); f != "" {
			out = append(out, token{folded: f, start: start, end: end})
		}
		start = -1
	}
	for i, r := range s {
		switch {
		case !isWordRune(r):
			flush(i)
		case start >= 0 && unicode.In(r, unicode.M):
		case start >= 0 && isCJK(r) != startCJK:
			flush(i)
			start, startCJK = i, isCJK(r)
		case start < 0:
			start, startCJK = i, isCJK(r)
		}
	}
	flush(len(s))
	return out
}

func isWordRune(r rune) bool {
	return r != utf8.RuneError && unicode.In(r, unicode.L, unicode.N, unicode.M, unicode.Co)
}

func isCJK(r rune) bool {
	switch r {
	case 0x30FC, 0xFF70, 0xFF9E, 0xFF9F:
		return true
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Bopomofo)
}

func foldWord(s string) string {
	d := norm.NFKD.String(strings.ToLower(s))
	var b strings.Builder
	for _, r := range d {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return strings.ToLower(norm.NFC.String(b.String()))
}
