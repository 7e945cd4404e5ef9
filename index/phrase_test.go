package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteFirstPhrase is the definition: the lowest start s such that the j-th
// term occurs at s+j for every j.
func bruteFirstPhrase(doc []string, terms []string) (uint64, bool) {
	for s := 0; s+len(terms) <= len(doc); s++ {
		if slices.Equal(doc[s:s+len(terms)], terms) {
			return uint64(s), true
		}
	}
	return 0, false
}

func TestPhraseStartIsTheLowestConsecutiveRun(t *testing.T) {
	tests := []struct {
		name  string
		doc   string
		terms []string
	}{
		{"a two-term phrase in the middle", "x a b y", []string{"a", "b"}},
		{"terms present but never adjacent", "a x b a y b", []string{"a", "b"}},
		{"a repeated term", "a a x a a a b", []string{"a", "a", "b"}},
		{"the anchor is a later term", "b a b a a b c", []string{"a", "b", "c"}},
		{"a run at position 0", "a b a b", []string{"a", "b"}},
		{"one term", "x y z y", []string{"y"}},
		{"a missing term", "a b c", []string{"a", "d"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkPhraseStart(t, splitWords(tt.doc), tt.terms)
		})
	}
	t.Run("random docs over a three-word vocabulary agree with the definition", func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		vocab := []string{"a", "b", "c"}
		for range 2000 {
			doc := make([]string, 1+r.IntN(30))
			for i := range doc {
				doc[i] = vocab[r.IntN(len(vocab))]
			}
			terms := make([]string, 1+r.IntN(4))
			for i := range terms {
				terms[i] = vocab[r.IntN(len(vocab))]
			}
			checkPhraseStart(t, doc, terms)
		}
	})
}

func splitWords(s string) []string {
	var out []string
	for _, w := range []rune(s) {
		if w != ' ' {
			out = append(out, string(w))
		}
	}
	return out
}

func checkPhraseStart(t *testing.T, doc, terms []string) {
	t.Helper()
	positions := map[string][]uint64{}
	// Reverse order: firstPhrase must not rely on sorted input.
	for i := len(doc) - 1; i >= 0; i-- {
		positions[doc[i]] = append(positions[doc[i]], uint64(i))
	}
	got, ok := firstPhrase(positions, terms)
	want, wantOK := bruteFirstPhrase(doc, terms)
	if ok != wantOK || got != want {
		t.Fatalf("%s in %v: got %d %v, want %d %v", fmt.Sprint(terms), doc, got, ok, want, wantOK)
	}
}
