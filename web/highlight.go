package web

import (
	"unicode/utf8"

	"github.com/dshq/dshq/internal/words"
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

// tokens splits s into folded tokens with the index's own tokenizer and
// folding (internal/words; docs/search.md, Words and folding): a non-CJK
// word folded whole, CJK text character by character.
func tokens(s string) []token {
	var out []token
	words.Each(s, func(start, end int, cjk bool) {
		if cjk {
			for i, r := range s[start:end] {
				out = append(out, token{folded: words.FoldCJK(string(r)), start: start + i, end: start + i + utf8.RuneLen(r)})
			}
		} else if f := words.Fold(s[start:end]); f != "" {
			out = append(out, token{folded: f, start: start, end: end})
		}
	})
	return out
}
