package index

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/numeric"
	"github.com/blevesearch/bleve/v2/search"

	"github.com/dshq/dshq/internal/words"
)

// loadDocs loads the stored docs of ids (a page's hits) from one index
// snapshot, keyed by id (an id not indexed is absent), and returns the
// generation of that snapshot (0 when it cannot tell). fetch asks Bleve for
// each doc by id, which opens a term reader of the id field on every
// segment per doc; this looks every id up once per segment (zap skips an id
// above the segment's largest, as is every id of a later generation: see
// docID) and reads each found doc's stored fields directly. A reader that is not
// scorch's falls back to fetch.
func (x *Index) loadDocs(ctx context.Context, ids []string) (map[string]stored, uint64, error) {
	out := make(map[string]stored, len(ids))
	ix, err := x.idx.Advanced()
	if err != nil {
		return nil, 0, fmt.Errorf("load docs: %w", err)
	}
	r, err := ix.Reader()
	if err != nil {
		return nil, 0, fmt.Errorf("load docs: %w", err)
	}
	defer r.Close()
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		docs, err := x.fetch(ctx, ids)
		if err != nil {
			return nil, 0, err
		}
		for _, s := range docs {
			out[docID(s.cgen, s.doc.SessionID, s.doc.Seq)] = s
		}
		return out, 0, nil
	}
	var gen uint64
	if raw, err := snap.GetInternal(keyGeneration); err == nil && len(raw) == 8 {
		gen = binary.BigEndian.Uint64(raw)
	}
	fields := make(map[string]any, len(storedFields))
	var id string
	visit := func(name string, typ byte, val []byte, _ []uint64) bool {
		switch {
		case name == "_id":
			id = string(val)
		case typ == 'n':
			if v, err := numeric.PrefixCoded(val).Int64(); err == nil {
				fields[name] = numeric.Int64ToFloat64(v)
			}
		case typ == 't':
			fields[name] = string(val)
		}
		return true
	}
	for _, seg := range snap.Segments() {
		if err := ctx.Err(); err != nil {
			return nil, 0, fmt.Errorf("load docs: %w", err)
		}
		nums, err := seg.DocNumbers(ids)
		if err != nil {
			return nil, 0, fmt.Errorf("load docs: %w", err)
		}
		for it := nums.Iterator(); it.HasNext(); {
			clear(fields)
			id = ""
			if err := seg.VisitDocument(uint64(it.Next()), visit); err != nil {
				return nil, 0, fmt.Errorf("load doc %q: %w", id, err)
			}
			s, err := decodeStored(&search.DocumentMatch{ID: id, Fields: fields})
			if err != nil {
				return nil, 0, err
			}
			out[docID(s.cgen, s.doc.SessionID, s.doc.Seq)] = s
		}
	}
	return out, gen, nil
}

// pageMatchStart is analyzer.matchStart without its maps of every token:
// it keeps the positions of the phrase's own terms only (a lookup by the
// token's bytes allocates nothing), then reads the byte offset of the one
// position found. Same result, for the snippet of every hit a page shows.
func (an *analyzer) pageMatchStart(text string, terms []string) int {
	if len(terms) == 0 {
		return -1
	}
	if at, ok := leadingMatchStart(text, terms); ok {
		return at
	}
	tokens := an.Analyze(text)
	if len(terms) == 1 {
		return firstTermStart(tokens, terms[0])
	}
	index := make(map[string]int, len(terms))
	seq := make([]int, len(terms))
	var pos [][]uint64
	for j, t := range terms {
		i, ok := index[t]
		if !ok {
			i = len(pos)
			index[t] = i
			pos = append(pos, nil)
		}
		seq[j] = i
	}
	for _, t := range tokens {
		if i, ok := index[string(t.Term)]; ok {
			pos[i] = append(pos[i], uint64(t.Position))
		}
	}
	for _, p := range pos {
		slices.Sort(p)
	}
	p, ok := phraseStart(pos, seq)
	if !ok {
		return -1
	}
	start := -1
	for _, t := range tokens {
		if uint64(t.Position) == p && (start < 0 || t.Start < start) {
			start = t.Start
		}
	}
	return start
}

// leadingMatchStart is pageMatchStart without building the token stream:
// it scans the words as the analyzer folds them and stops at the first
// match. The analyzer's non-CJK tokens are the folded words (empties
// dropped), one per position, in order (the bigram filter numbers them); a
// CJK word between two takes at least one position. So a phrase of terms
// of ASCII letters and digits matches at consecutive non-CJK words, its
// first match to end is the first to start (every match has len(terms)
// positions), and its start is the first word's. With another term that
// holds up to the first CJK word; ok is false when one comes before a
// match, and the caller analyzes the whole text.
func leadingMatchStart(text string, terms []string) (start int, ok bool) {
	n := len(terms)
	// ring holds the last n words' folded terms and starts.
	type word struct {
		term  string
		start int
	}
	var small [4]word
	ring := small[:0]
	if n > len(small) {
		ring = make([]word, 0, n)
	}
	asciiTerms := true
	for _, t := range terms {
		asciiTerms = asciiTerms && isASCIIWord(t)
	}
	seen := 0
	start, ok = -1, true
	stop := false
	words.Each(text, func(s, e int, cjk bool) {
		if stop {
			return
		}
		if cjk {
			if !asciiTerms {
				stop, ok = true, false
				return
			}
			// A CJK word takes at least one position and yields no
			// ASCII letter or digit (TestCJKFoldsOffASCII): no match
			// spans it.
			ring, seen = ring[:0], 0
			return
		}
		t := text[s:e]
		if isASCII(t) {
			t = asciiLowerString(t)
		} else {
			t = words.Fold(t)
		}
		if t == "" {
			return
		}
		w := word{term: t, start: s}
		if len(ring) < n {
			ring = append(ring, w)
		} else {
			ring[seen%n] = w
		}
		seen++
		if seen < n {
			return
		}
		// The window's oldest word is at seen%n.
		for j := range n {
			if ring[(seen+j)%n].term != terms[j] {
				return
			}
		}
		start, stop = ring[seen%n].start, true
	})
	return start, ok
}

// asciiLowerString is asciiLower of a string: s itself when it has no
// upper-case letter.
func asciiLowerString(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return string(asciiLower([]byte(s)))
		}
	}
	return s
}

// isASCIIWord reports whether s is ASCII letters and digits only.
func isASCIIWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
