package index

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/dshq/dshq"
)

// TestLoadDocsReadsWhatFetchReads checks the page loader against fetch over
// several segments, a re-indexed doc (its old version deleted in an older
// segment), a deleted doc and an id never indexed: the same docs, each
// once, every stored field alike.
func TestLoadDocsReadsWhatFetchReads(t *testing.T) {
	x, _ := openTest(t)
	ctx := context.Background()
	for g := uint64(1); g <= 4; g++ {
		var docs []Doc
		for i := range 5 {
			d := doc(fmt.Sprintf("s%d", i), int64(g), int64(100*g)+int64(i), fmt.Sprintf("retry budget %d of %d", g, i))
			d.Cwd, d.Parent, d.Tenant, d.Harness = dshq.Str("/w"), nil, "t1", dshq.Str("codex")
			d.CreatedAt = int64(i)
			docs = append(docs, d)
		}
		apply(t, x, g, docs...)
	}
	// Re-index seq 1 of s0 (reclassified) and delete session s1.
	moved := doc("s0", 1, 100, "retry budget 1 of 0")
	moved.Cwd, moved.Tenant, moved.Harness, moved.Surface = dshq.Str("/w"), "t1", dshq.Str("codex"), dshq.SurfaceShadowed
	moved.Generation = 1
	var b Batch
	b.Upsert(moved)
	b.DeleteSession("s1")
	if err := x.Apply(ctx, &b, 5); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for g := uint64(1); g <= 4; g++ {
		for i := range 5 {
			ids = append(ids, docID(g, fmt.Sprintf("s%d", i), int64(g)))
		}
	}
	ids = append(ids, docID(9, "nobody", 1))
	x.mu.RLock()
	defer x.mu.RUnlock()
	want, err := x.fetch(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	got, gen, err := x.loadDocs(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if gen != 5 {
		t.Fatalf("loadDocs read generation %d, want 5", gen)
	}
	if len(got) != len(want) {
		t.Fatalf("loadDocs found %d docs, fetch %d", len(got), len(want))
	}
	for _, w := range want {
		id := docID(w.cgen, w.doc.SessionID, w.doc.Seq)
		g, ok := got[id]
		if !ok {
			t.Fatalf("loadDocs misses %s", id)
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("doc %s: loadDocs %+v, fetch %+v", id, g, w)
		}
	}
	if s := got[docID(1, "s0", 1)]; s.doc.Surface != dshq.SurfaceShadowed {
		t.Fatalf("re-indexed doc has surface %q, want its new one", s.doc.Surface)
	}
	for g := uint64(1); g <= 4; g++ {
		if _, ok := got[docID(g, "s1", int64(g))]; ok {
			t.Fatalf("deleted doc s1#%d was loaded", g)
		}
	}
}

// TestPageMatchStartIsMatchStart checks the page's match finder against
// the analyzer's on phrases with repeated terms, CJK runs, case folding
// and no match.
func TestPageMatchStartIsMatchStart(t *testing.T) {
	an := newAnalyzer()
	texts := []string{
		"retry the Retry budget, then retry budget again",
		"budget retry budget retry budget",
		"已将重试预算从 3 提高到 5：重试预算",
		"a b a b a b c",
		"nothing here matches",
		"Raise the retry budget to 5 and explain the change in 中文",
	}
	phrases := []string{"retry budget", "budget retry budget", "重试预算", "a b a b c", "b a", "中文", "retry", "zeta"}
	for _, text := range texts {
		for _, q := range phrases {
			terms := an.phraseTerms(q)
			if got, want := an.pageMatchStart(text, terms), an.matchStart(text, terms); got != want {
				t.Errorf("%q in %q: pageMatchStart %d, matchStart %d", q, text, got, want)
			}
		}
	}
}
