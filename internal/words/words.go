// Package words is dshq's one word tokenizer and folding: what a searchable
// word is and when two words are the same (docs/search.md, Words and
// folding). The index's analysis (package index, inside Bleve) and the web
// UI's highlighting of snippets both use it, so a phrase is marked exactly
// where search finds it. It is pure: no Bleve, no I/O.
package words

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Each calls fn with the byte span of every word of s, in order: a word is a
// maximal run of letters, numbers and marks (categories L*, N*, M*, and
// private use Co), as SQLite FTS5's unicode61 splits text; everything else
// separates. A run is further split where it changes between CJK and other
// scripts; cjk says which side the word is on (a CJK word is a run of CJK
// characters, which search matches character by character).
func Each(s string, fn func(start, end int, cjk bool)) {
	start, startCJK := -1, false
	flush := func(end int) {
		if start >= 0 {
			fn(start, end, startCJK)
			start = -1
		}
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !IsWordRune(r):
			flush(i)
		case start >= 0 && unicode.In(r, unicode.M):
			// a mark extends whatever word it follows
		case start >= 0 && IsCJK(r) != startCJK:
			flush(i)
			start, startCJK = i, IsCJK(r)
		case start < 0:
			start, startCJK = i, IsCJK(r)
		}
		i += size
	}
	flush(len(s))
}

// IsWordRune reports whether r is part of a word (invalid UTF-8 is not).
func IsWordRune(r rune) bool {
	if r == utf8.RuneError {
		return false
	}
	return unicode.In(r, unicode.L, unicode.N, unicode.M, unicode.Co)
}

// IsCJK reports whether r belongs to a script written without spaces between
// words, which search finds character by character (the index by overlapping
// bigrams).
func IsCJK(r rune) bool {
	switch r {
	case 0x30FC, 0xFF70, 0xFF9E, 0xFF9F: // prolonged sound and (half-width) voicing marks
		return true
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Bopomofo)
}

// Fold makes a non-CJK word case- and diacritic-insensitive: lowercased,
// decomposed (NFKD), stripped of its nonspacing marks and recomposed, so
// `CAFÉ`, `café` and `cafe` are one term. It may return "".
func Fold(s string) string {
	d := norm.NFKD.String(strings.ToLower(s))
	var b strings.Builder
	b.Grow(len(d))
	for _, r := range d {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return strings.ToLower(norm.NFC.String(b.String()))
}

// FoldCJK normalizes CJK text: NFKC only (width variants), since its marks
// carry meaning (が is not か).
func FoldCJK(s string) string { return norm.NFKC.String(s) }
