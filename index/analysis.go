package index

import (
	"unsafe"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/registry"
	"golang.org/x/text/unicode/norm"

	"github.com/dshq/dshq/internal/words"
)

// Names under which the analysis components are registered with Bleve. The
// index mapping refers to them by name, so they are part of the on-disk
// format: changing what they do means a new MappingVersion.
const (
	tokenizerName = "dshq_words"
	foldName      = "dshq_fold"
	bigramName    = "dshq_cjk_bigram"
	analyzerName  = "dshq_text"
)

// Registration only records constructors; it does no work. Bleve resolves
// analysis components by name from the mapping stored in an index, so they
// must be registered before any index is opened.
func init() {
	if err := registry.RegisterTokenizer(tokenizerName, func(map[string]any, *registry.Cache) (analysis.Tokenizer, error) {
		return wordTokenizer{}, nil
	}); err != nil {
		panic(err)
	}
	if err := registry.RegisterTokenFilter(foldName, func(map[string]any, *registry.Cache) (analysis.TokenFilter, error) {
		return foldFilter{}, nil
	}); err != nil {
		panic(err)
	}
}

// wordTokenizer splits text like SQLite FTS5 unicode61: a token is a maximal
// run of letters, numbers and marks (categories L*, N*, M*, and private use
// Co); everything else separates. A run is further split where it changes
// between CJK and other scripts, and CJK tokens are typed Ideographic so the
// bigram filter can take them apart.
type wordTokenizer struct{}

// Tokenize implements analysis.Tokenizer: the words of internal/words (the
// web UI's highlighting uses the same), CJK runs typed Ideographic.
func (wordTokenizer) Tokenize(input []byte) analysis.TokenStream {
	var rv analysis.TokenStream
	pos := 1
	// The tokens' terms are slices of input; the string view of it is only
	// read while Tokenize runs.
	words.Each(unsafe.String(unsafe.SliceData(input), len(input)), func(start, end int, cjk bool) {
		typ := analysis.AlphaNumeric
		if cjk {
			typ = analysis.Ideographic
		}
		rv = append(rv, &analysis.Token{Term: input[start:end], Start: start, End: end, Position: pos, Type: typ})
		pos++
	})
	return rv
}

// foldFilter makes matching case- and diacritic-insensitive (words.Fold) for
// non-CJK tokens; CJK tokens are only NFKC-normalized (words.FoldCJK). A
// token left empty is dropped.
type foldFilter struct{}

// Filter implements analysis.TokenFilter.
func (foldFilter) Filter(input analysis.TokenStream) analysis.TokenStream {
	rv := input[:0]
	for _, tok := range input {
		switch {
		case tok.Type == analysis.Ideographic:
			tok.Term = norm.NFKC.Bytes(tok.Term)
		case isASCII(tok.Term):
			// words.Fold of ASCII letters and digits is their lower case
			// (NFKD, NFC and the marks leave ASCII alone): the term as it
			// is unless it has an upper-case letter.
			tok.Term = asciiLower(tok.Term)
		default:
			tok.Term = []byte(words.Fold(string(tok.Term)))
		}
		if len(tok.Term) > 0 {
			rv = append(rv, tok)
		}
	}
	return rv
}

// isASCII reports whether b holds ASCII bytes only.
func isASCII[T string | []byte](b T) bool {
	for i := 0; i < len(b); i++ {
		if b[i] >= 0x80 {
			return false
		}
	}
	return true
}

// asciiLower returns b lower-cased: b itself when it has no upper-case
// letter, else a copy (b may alias the analyzed text, which is not ours).
func asciiLower(b []byte) []byte {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			out := make([]byte, len(b))
			copy(out, b[:i])
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					out[j] = c + 'a' - 'A'
				} else {
					out[j] = c
				}
			}
			return out
		}
	}
	return b
}

// analyzer is the text analysis used for documents and queries alike.
type analyzer struct {
	a analysis.Analyzer
}

func newAnalyzer() *analyzer {
	return &analyzer{a: &analysis.DefaultAnalyzer{
		Tokenizer:    wordTokenizer{},
		TokenFilters: []analysis.TokenFilter{foldFilter{}, cjk.NewCJKBigramFilter(true)},
	}}
}

// Analyze returns the token stream of text.
func (an *analyzer) Analyze(text string) analysis.TokenStream {
	return an.a.Analyze([]byte(text))
}

// phraseTerms returns the terms of the phrase that text denotes, one per
// position: a CJK bigram where one starts at that position, else the single
// token there. Any occurrence of text in a doc yields, at consecutive
// positions, the same bigrams (both characters of a query bigram are in the
// doc's run too) and a unigram at every CJK position, so the phrase matches.
func (an *analyzer) phraseTerms(text string) []string {
	toks := an.Analyze(text)
	var terms []string
	lastPos := 0
	for _, t := range toks {
		if t.Position != lastPos {
			terms = append(terms, string(t.Term))
			lastPos = t.Position
			continue
		}
		if t.Type == analysis.Double {
			terms[len(terms)-1] = string(t.Term)
		}
	}
	return terms
}

// matchStart returns the byte offset in text where the phrase terms first
// occur (by position, as the index matches them), or -1.
func (an *analyzer) matchStart(text string, terms []string) int {
	if len(terms) == 0 {
		return -1
	}
	tokens := an.Analyze(text)
	if len(terms) == 1 {
		return firstTermStart(tokens, terms[0])
	}
	positions := make(map[string][]uint64)
	starts := make(map[uint64]int)
	for _, t := range tokens {
		p := uint64(t.Position)
		positions[string(t.Term)] = append(positions[string(t.Term)], p)
		if s, ok := starts[p]; !ok || t.Start < s {
			starts[p] = t.Start
		}
	}
	p, ok := firstPhrase(positions, terms)
	if !ok {
		return -1
	}
	return starts[p]
}

// firstTermStart is matchStart for a one-term phrase without the position
// maps: the lowest byte offset of a token at the lowest position where term
// occurs, or -1.
func firstTermStart(tokens analysis.TokenStream, term string) int {
	pos := -1
	for _, t := range tokens {
		if (pos < 0 || t.Position < pos) && string(t.Term) == term {
			pos = t.Position
		}
	}
	if pos < 0 {
		return -1
	}
	start := -1
	for _, t := range tokens {
		if t.Position == pos && (start < 0 || t.Start < start) {
			start = t.Start
		}
	}
	return start
}
