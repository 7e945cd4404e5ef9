package index

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/record"

	"github.com/dshq/dshq/internal/golden"
)

// corpusDocs folds every importable log of dir (each file its own session,
// named after the file) and returns its search docs.
func corpusDocs(t *testing.T, dir string) []Doc {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no logs in %s (%v)", dir, err)
	}
	var docs []Doc
	for _, path := range paths {
		name := filepath.Base(path)
		f, err := os.Open(path)
		must(t, err)
		sid := strings.TrimSuffix(name, ".jsonl")
		h, evs, err := record.ReadAll(f, record.WithName(name), record.WithFixturePlaceholders("/corpus/"+sid, sid))
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

// corpusSearch is how TestCorpus searches one corpus: which docs' own
// phrases it checks (those whose hash is 0 modulo sample), the queries
// whose ranked results it pins, and the golden that pins them.
type corpusSearch struct {
	sample  uint32
	queries []string
	golden  string
	// hashed writes each snippet as the first bytes of its SHA-256 and its
	// length: the shared corpus comes from other repositories, and no part
	// of its text is copied into this one.
	hashed bool
}

// TestCorpus indexes the semantic text of the fixture logs and of the
// deepseek-harness corpus and checks, on a deterministic sample of docs
// (every doc of the fixtures), that a phrase cut from a doc's own text
// finds that doc with a snippet around it; then pins the ranked results of
// a few queries in a golden file (-update rewrites it).
func TestCorpus(t *testing.T) {
	corpus.Each(t, func(t *testing.T, dir string, shared bool) {
		c := corpusSearch{
			sample:  1,
			queries: []string{"lighthouse", "harbour", "harbour log", "pilot boarded", "moorings", "error", "KESTREL", "完成", "渡轮时刻表"},
			golden:  "fixture_search.golden",
		}
		if shared {
			c = corpusSearch{8, []string{"error", "hello", "read file", "tool call", "bash", "完成"}, "corpus_search.golden", true}
		}
		testSearchesTheCorpus(t, corpusDocs(t, dir), c)
	})
}

func testSearchesTheCorpus(t *testing.T, docs []Doc, c corpusSearch) {
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
		if h.Sum32()%c.sample != 0 {
			continue
		}
		toks := an.Analyze(d.Text)
		if len(toks) == 0 {
			continue
		}
		first := int(h.Sum32()/c.sample) % len(toks)
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
	for _, q := range c.queries {
		p := searchSessions(t, x, SessionQuery{Query: q, Limit: 5, SnippetChars: 80})
		fmt.Fprintf(&out, "query %q (more %v)\n", q, p.More)
		for _, hit := range p.Hits {
			snippet := fmt.Sprintf("%q", hit.Snippet)
			if c.hashed {
				sum := sha256.Sum256([]byte(hit.Snippet))
				snippet = fmt.Sprintf("sha256:%.6x, %d bytes", sum[:], len(hit.Snippet))
			}
			fmt.Fprintf(&out, "  %s #%d %s %s: %s\n", hit.SessionID, hit.Seq, hit.Type, hit.Surface, snippet)
		}
	}
	path := filepath.Join("testdata", c.golden)
	golden.Check(t, path, out.Bytes())
}
