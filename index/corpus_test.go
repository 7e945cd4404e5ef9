package index

import (
	"bytes"
	"context"
	"fmt"
	"github.com/dshq/dshq/internal/corpus"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/record"
)

var corpusDir, corpusErr = corpus.Dir()

// corpusDocs folds every importable real log of the corpus (each file its
// own session, named after the file) and returns its search docs.
func corpusDocs(t *testing.T) []Doc {
	t.Helper()
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatalf("corpus not available: %v (%v)", err, corpusErr)
	}
	var docs []Doc
	for _, en := range entries {
		f, err := os.Open(filepath.Join(corpusDir, en.Name()))
		must(t, err)
		sid := strings.TrimSuffix(en.Name(), ".jsonl")
		h, evs, err := record.ReadAll(f, record.WithName(en.Name()), record.WithFixturePlaceholders("/corpus/"+sid, sid))
		f.Close()
		if err != nil {
			continue // the corpus holds logs that must be refused
		}
		res, err := fold.Fold(h, evs, fold.Lenient)
		if err != nil {
			continue
		}
		for i, rec := range res.Records {
			if strings.TrimSpace(res.Texts[i]) == "" {
				continue
			}
			docs = append(docs, Doc{
				SessionID: sid, Cwd: h.Header.Cwd, Parent: h.Header.ParentSession, CreatedAt: h.Header.CreatedAt,
				Seq: rec.Seq, Type: rec.Type, Time: rec.Time, Surface: rec.Surface, Text: res.Texts[i],
			})
		}
	}
	if len(docs) == 0 {
		t.Fatal("no docs folded from the corpus")
	}
	return docs
}

// TestRealCorpus indexes the semantic text of the real deepseek-harness logs
// and checks, on a deterministic sample of docs, that a phrase cut from a
// doc's own text finds that doc with a snippet around it; then pins the
// ranked results of a few queries in testdata/corpus_search.golden
// (-update rewrites it).
func TestRealCorpus(t *testing.T) {
	docs := corpusDocs(t)
	x, _ := openTest(t)
	for i := 0; i < len(docs); i += 1000 {
		var b Batch
		for _, d := range docs[i:min(len(docs), i+1000)] {
			b.Upsert(d)
		}
		must(t, x.Apply(context.Background(), &b, uint64(i+1)))
	}
	st, err := x.Stats()
	must(t, err)
	if st.Docs != uint64(len(docs)) {
		t.Fatalf("indexed %d docs, folded %d", st.Docs, len(docs))
	}

	an := newAnalyzer()
	checked := 0
	for i, d := range docs {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s#%d", d.SessionID, d.Seq)
		if h.Sum32()%8 != 0 {
			continue
		}
		toks := an.Analyze(d.Text)
		if len(toks) == 0 {
			continue
		}
		first := int(h.Sum32()/8) % len(toks)
		last := first
		for last+1 < len(toks) && toks[last+1].Position-toks[first].Position < 4 {
			last++
		}
		phrase := d.Text[toks[first].Start:toks[last].End]
		p := searchEvents(t, x, EventQuery{SessionID: d.SessionID, Query: phrase, Limit: MaxLimit})
		found := false
		for _, hit := range p.Hits {
			if hit.Seq == d.Seq {
				found = true
				if hit.Snippet == "" {
					t.Errorf("doc %d (%s#%d): empty snippet", i, d.SessionID, d.Seq)
				}
			}
		}
		if !found {
			t.Errorf("doc %s#%d: its own phrase %q does not find it", d.SessionID, d.Seq, phrase)
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d docs sampled", checked)
	}

	var out bytes.Buffer
	fmt.Fprintf(&out, "%d docs\n", len(docs))
	for _, q := range []string{"error", "hello", "read file", "tool call", "bash", "完成"} {
		p := searchSessions(t, x, SessionQuery{Query: q, Limit: 5, SnippetChars: 80})
		fmt.Fprintf(&out, "query %q (more %v)\n", q, p.More)
		for _, hit := range p.Hits {
			fmt.Fprintf(&out, "  %s #%d %s %s: %q\n", hit.SessionID, hit.Seq, hit.Type, hit.Surface, hit.Snippet)
		}
	}
	path := filepath.Join("testdata", "corpus_search.golden")
	if *update {
		must(t, os.WriteFile(path, out.Bytes(), 0o644))
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("ranked results differ from %s (run with -update and review the diff):\n%s", path, out.String())
	}
}
