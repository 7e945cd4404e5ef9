package index

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/registry"
	"golang.org/x/text/unicode/norm"

	"github.com/dshq/dshq/internal/golden"
	"github.com/dshq/dshq/internal/words"
)

// matchCases: does a doc with text find the query? Checked against a real
// index, so they pin down analysis and phrase building together.
var matchCases = []struct {
	name, text, query string
	match             bool
}{
	{"a whole word matches", "An AI helper", "AI", true},
	{"a word inside another word does not match", "BRAID", "AI", false},
	{"matching ignores case", "an ai helper", "AN AI", true},
	{"an unaccented query finds accented text", "café", "CAFE", true},
	{"an accented query finds unaccented text", "CAFE au lait", "café", true},
	{"a decomposed accent folds like a precomposed one", "cafe\u0301", "CAFÉ", true},
	{"dotted capital I folds to i", "İstanbul", "istanbul", true},
	{"a phrase matches adjacent words", "alpha beta", "alpha beta", true},
	{"a phrase ignores punctuation between its words", "Alpha, beta!", "alpha beta", true},
	{"a phrase does not match separated words", "alpha middle beta", "alpha beta", false},
	{"a phrase does not match reversed words", "beta alpha", "alpha beta", false},
	{"quotes are literal", `say "needle" exactly`, `say "needle"`, true},
	{"OR is a literal word", "needle or absent", "needle OR absent", true},
	{"OR is not an operator", "needle", "needle OR absent", false},
	{"NEAR is not an operator", "needle", "needle NEAR absent", false},
	{"a star alone matches nothing", "needle", "*", false},
	{"a star is no wildcard", "needles", "needle*", false},
	{"parentheses and plus are literal punctuation", "Hello\n(AI)+", "(ai)+", true},
	{"there is no stemming", "running", "run", false},
	{"stop words are words", "to be or not to be", "not to be", true},
	{"underscore separates words", "snake_case", "case", true},
	{"a dot separates words", "/tmp/file.go", "file go", true},
	{"a number is a word", "version 2.5.1", "5 1", true},
	{"a number does not match a longer number", "version 25", "2", false},
	{"full-width Latin folds to ASCII", "ＡＢＣ corp", "abc", true},
	{"a Chinese bigram matches", "我们在中文环境中测试", "中文", true},
	{"a Chinese run crossing word boundaries matches", "我们在中文环境中测试", "文环", true},
	{"a longer Chinese run matches", "我们在中文环境中测试", "中文环境中", true},
	{"Chinese characters that are not adjacent do not match", "我们在中文环境中测试", "环中", false},
	{"a single Chinese character matches anywhere it occurs", "我们在中文环境中测试", "境", true},
	{"a single Chinese character absent from the text does not match", "我们在中文环境中测试", "书", false},
	{"a Chinese query finds a run between Latin words", "我用Go写代码", "写代码", true},
	{"a mixed Chinese and Latin query matches", "我用Go写代码", "用Go写", true},
	{"a Latin word inside Chinese text matches", "我用Go写代码", "GO", true},
	{"a mixed query with a gap does not match", "我用Go写代码", "用写", false},
	{"katakana with a prolonged sound mark matches", "コーヒーを飲む", "コーヒー", true},
	{"half-width katakana folds to full width", "ｺｰﾋｰを飲む", "コーヒー", true},
	{"kana keep their voicing marks", "かき", "がき", false},
	{"Korean is found by character bigrams", "안녕하세요 세계", "하세", true},
	{"an emoji is not a word", "🙂 smile", "🙂", false},
	{"NUL in a query is a separator, not an error", "nul here", "nul\x00here", true},
}

func TestAnalysisMatches(t *testing.T) {
	x, _ := openTest(t)
	var docs []Doc
	for i, c := range matchCases {
		docs = append(docs, doc(fmt.Sprintf("case-%02d", i), 0, 1, c.text))
	}
	apply(t, x, 1, docs...)
	for i, c := range matchCases {
		t.Run(c.name, func(t *testing.T) {
			sid := fmt.Sprintf("case-%02d", i)
			p := searchEvents(t, x, EventQuery{SessionID: sid, Query: c.query})
			if got := len(p.Hits) == 1; got != c.match {
				t.Fatalf("text %q, query %q: match = %v, want %v", c.text, c.query, got, c.match)
			}
		})
	}
}

// TestRegisteredAnalyzerIsTheQueryAnalyzer checks that the analyzer Bleve
// builds from the stored mapping (documents) and the one queries use are the
// same, token for token.
func TestRegisteredAnalyzerIsTheQueryAnalyzer(t *testing.T) {
	m, err := newMapping()
	if err != nil {
		t.Fatal(err)
	}
	cache := registry.NewCache()
	for name, cfg := range m.CustomAnalysis.TokenFilters {
		if _, err := cache.DefineTokenFilter(name, cfg); err != nil {
			t.Fatal(err)
		}
	}
	registered, err := cache.DefineAnalyzer(analyzerName, m.CustomAnalysis.Analyzers[analyzerName])
	if err != nil {
		t.Fatal(err)
	}
	an := newAnalyzer()
	for _, c := range goldenInputs {
		if got, want := dumpTokens(registered.Analyze([]byte(c))), dumpTokens(an.Analyze(c)); got != want {
			t.Errorf("input %q: registered analyzer gives\n%s\nquery analyzer gives\n%s", c, got, want)
		}
	}
}

var goldenInputs = []string{
	"An AI helper — café",
	"CAFÉ naïve İstanbul straße",
	"snake_case /tmp/file.go v2.5.1",
	"我们在中文环境中测试",
	"我用Go写代码 中 文",
	"コーヒーを飲む ｺｰﾋｰ",
	"안녕하세요 세계",
	"ＡＢＣ 🙂 * \"quoted\" (ai)+",
}

func dumpTokens(ts analysis.TokenStream) string {
	var b strings.Builder
	for _, tok := range ts {
		fmt.Fprintf(&b, "  %d %q [%d,%d) type %d\n", tok.Position, tok.Term, tok.Start, tok.End, tok.Type)
	}
	return b.String()
}

// TestAnalysisGolden pins the token streams of varied inputs (term, position,
// byte range) in testdata/analysis.golden; -update rewrites it.
func TestAnalysisGolden(t *testing.T) {
	an := newAnalyzer()
	var b bytes.Buffer
	for _, in := range goldenInputs {
		fmt.Fprintf(&b, "%q\n", in)
		b.WriteString(dumpTokens(an.Analyze(in)))
	}
	path := filepath.Join("testdata", "analysis.golden")
	golden.Check(t, path, b.Bytes())
}

func TestPhraseTerms(t *testing.T) {
	an := newAnalyzer()
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"punctuation alone has no terms", "* () \"\" —", nil},
		{"Latin words are folded terms", "Café OR Naïve", []string{"cafe", "or", "naive"}},
		{"a Chinese run is bigrams then its last character", "中文字", []string{"中文", "文字", "字"}},
		{"a lone Chinese character is a unigram", "文", []string{"文"}},
		{"mixed text keeps word order", "用Go写", []string{"用", "go", "写"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := an.phraseTerms(c.query)
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("phraseTerms(%q) = %q, want %q", c.query, got, c.want)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	got := Sanitize("a\x00b\uFDD0c\uFDD1d\xffe")
	if want := "a\uFFFDb\uFFFDc\uFFFDd\uFFFDe"; got != want {
		t.Fatalf("Sanitize = %q, want %q", got, want)
	}
	if got := Sanitize("plain — café"); got != "plain — café" {
		t.Fatalf("Sanitize changed clean text: %q", got)
	}
}

// FuzzAnalysis: any text analyzes without panic into in-bounds tokens, and
// as a query it finds itself, starting at its first token.
func FuzzAnalysis(f *testing.F) {
	for _, in := range goldenInputs {
		f.Add(in)
	}
	f.Add("a\x00b\uFDD0c \xff\xfe 中\u0301文")
	an := newAnalyzer()
	f.Fuzz(func(t *testing.T, text string) {
		text = Sanitize(text)
		toks := an.Analyze(text)
		for _, tok := range toks {
			if len(tok.Term) == 0 || tok.Start < 0 || tok.End > len(text) || tok.Start >= tok.End {
				t.Fatalf("text %q: bad token %+v", text, tok)
			}
		}
		q, err := NormalizeQuery(text)
		if err != nil {
			return
		}
		terms := an.phraseTerms(q)
		if len(terms) == 0 {
			if len(toks) != 0 {
				t.Fatalf("text %q has tokens but its query has no terms", text)
			}
			return
		}
		if at := an.matchStart(text, terms); at != toks[0].Start {
			t.Fatalf("text %q as a query matches at %d, want its first token at %d (terms %q)", text, at, toks[0].Start, terms)
		}
	})
}

// TestOneTermMatchStartIsTheGeneralOne: the one-term shortcut of matchStart
// finds the same offset as the general phrase path (position maps and
// firstPhrase) on mixed Latin, CJK and repeated text.
func TestOneTermMatchStartIsTheGeneralOne(t *testing.T) {
	an := newAnalyzer()
	general := func(text, term string) int {
		positions := make(map[string][]uint64)
		starts := make(map[uint64]int)
		for _, tk := range an.Analyze(text) {
			p := uint64(tk.Position)
			positions[string(tk.Term)] = append(positions[string(tk.Term)], p)
			if s, ok := starts[p]; !ok || tk.Start < s {
				starts[p] = tk.Start
			}
		}
		p, ok := firstPhrase(positions, []string{term})
		if !ok {
			return -1
		}
		return starts[p]
	}
	texts := []string{
		"", "needle", "pad Needle needle", "café CAFE cafe", "中文搜索中文", "a 中文 b 文搜 中", "x\u0301 needle\tneedle",
		"run run run ran", "数据库 database 数据",
	}
	queries := []string{"needle", "cafe", "中文", "文", "搜", "run", "ran", "数据", "database", "absent"}
	checked := 0
	for _, text := range texts {
		for _, q := range queries {
			terms := an.phraseTerms(q)
			if len(terms) != 1 {
				continue
			}
			checked++
			if got, want := an.matchStart(text, terms), general(text, terms[0]); got != want {
				t.Errorf("matchStart(%q, %q) = %d, the general path %d", text, q, got, want)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d one-term cases checked", checked)
	}
}

// oldFoldFilter is foldFilter before its ASCII fast path: every non-CJK
// term through words.Fold.
type oldFoldFilter struct{}

func (oldFoldFilter) Filter(input analysis.TokenStream) analysis.TokenStream {
	rv := input[:0]
	for _, tok := range input {
		if tok.Type == analysis.Ideographic {
			tok.Term = norm.NFKC.Bytes(tok.Term)
		} else {
			tok.Term = []byte(words.Fold(string(tok.Term)))
		}
		if len(tok.Term) > 0 {
			rv = append(rv, tok)
		}
	}
	return rv
}

// TestAnalyzeFastPathSame checks that the analyzer (with foldFilter's ASCII
// fast path) yields exactly the tokens of the one before it, and so the same
// snippets, on a generated corpus and on mixed scripts.
func TestAnalyzeFastPathSame(t *testing.T) {
	old := &analyzer{a: &analysis.DefaultAnalyzer{
		Tokenizer:    wordTokenizer{},
		TokenFilters: []analysis.TokenFilter{oldFoldFilter{}, cjk.NewCJKBigramFilter(true)},
	}}
	an := newAnalyzer()
	texts := []string{
		"", "Hello WORLD mixedCase123 ABC abc", "Ünïcödé Café naïve ﬁle ＡＢＣ Straße İstanbul",
		"配置 重试预算 Retry BUDGET 超时", "x", "x \u0301\u0301 y Retry \u0301 Budget the ﬁle", "Retry Budget 配置 retry budget", "retry 配置 budget ㈀ the log 配 level retry budget", "retry㈀budget retry budget", strings.Repeat("Token UPPER lower 配置 ", 300),
	}
	for _, d := range commonPhraseCorpus(3000) {
		texts = append(texts, d.Text, strings.ToUpper(d.Text))
	}
	for _, text := range texts {
		got, want := an.Analyze(text), old.Analyze(text)
		if len(got) != len(want) {
			t.Fatalf("%q: %d tokens, want %d", text, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if string(g.Term) != string(w.Term) || g.Start != w.Start || g.End != w.End || g.Position != w.Position || g.Type != w.Type {
				t.Fatalf("%q: token %d is %+v, want %+v", text, i, *g, *w)
			}
		}
		for _, q := range []string{"retry budget", "BUDGET", "重试 预算", "café naïve", "token upper", "the", "timeout", "log level", "quasar pulsar", "upper lower 配置", "ﬁle"} {
			terms := an.phraseTerms(q)
			if a, b := an.pageMatchStart(text, terms), old.matchStart(text, old.phraseTerms(q)); a != b {
				t.Fatalf("%q in %q: match at %d, want %d", q, text, a, b)
			}
		}
	}
}

// TestCJKFoldsOffASCII checks what leadingMatchStart relies on: every rune
// of a CJK word (words' scripts) stays a CJK word after folding (NFKC) and
// yields no ASCII letter or digit, so no token of a CJK word equals a term
// of ASCII letters and digits, and each takes a position.
func TestCJKFoldsOffASCII(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Bopomofo) {
			continue
		}
		f := norm.NFKC.String(string(r))
		if f == "" {
			t.Fatalf("%U folds to nothing", r)
		}
		for i := 0; i < len(f); i++ {
			if isASCIIWord(f[i : i+1]) {
				t.Fatalf("%U folds to %q, which has an ASCII letter or digit", r, f)
			}
		}
	}
}
