package index

import (
	"context"
	"fmt"

	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"

	"github.com/dshq/dshq"
)

// CorpusStats are the statistics BM25 ranks a phrase with
// (dshq.CorpusStats). Bleve's own global scoring across an alias sums the
// docs and text length only: a term's doc frequency stays the local one.
type CorpusStats = dshq.CorpusStats

// CorpusStats returns the index's statistics of the normalized phrase q.
func (x *Index) CorpusStats(ctx context.Context, q string) (CorpusStats, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return CorpusStats{}, indexError(ErrClosed, "corpus stats")
	}
	adv, err := x.idx.Advanced()
	if err != nil {
		return CorpusStats{}, indexError(err, "corpus stats")
	}
	r, err := adv.Reader()
	if err != nil {
		return CorpusStats{}, indexError(err, "corpus stats")
	}
	defer r.Close()
	st := CorpusStats{Terms: map[string]uint64{}}
	if st.Docs, err = r.DocCount(); err != nil {
		return CorpusStats{}, indexError(err, "corpus stats")
	}
	if br, ok := r.(bindex.BM25Reader); ok {
		n, err := br.FieldCardinality(fieldText)
		if err != nil {
			return CorpusStats{}, indexError(err, "corpus stats")
		}
		st.TextLength = uint64(n)
	}
	terms, _ := x.phrase(q)
	for _, t := range terms {
		if _, ok := st.Terms[t]; ok {
			continue
		}
		tfr, err := r.TermFieldReader(ctx, []byte(t), fieldText, false, false, false)
		if err != nil {
			return CorpusStats{}, indexError(err, "corpus stats")
		}
		st.Terms[t] = tfr.Count()
		_ = tfr.Close()
	}
	return st, nil
}

// statsQuery runs inner (the phrase) over a reader whose BM25 statistics
// of the text field are st's.
type statsQuery struct {
	inner query.Query
	st    *CorpusStats
}

// Searcher implements query.Query.
func (q statsQuery) Searcher(ctx context.Context, r bindex.IndexReader, m mapping.IndexMapping, opts search.SearcherOptions) (search.Searcher, error) {
	return q.inner.Searcher(ctx, statsReader{IndexReader: r, st: q.st}, m, opts)
}

// statsReader is an IndexReader whose doc count, text field length and
// text terms' doc frequencies are a CorpusStats's.
type statsReader struct {
	bindex.IndexReader
	st *CorpusStats
}

func (r statsReader) DocCount() (uint64, error) { return r.st.Docs, nil }

// FieldCardinality implements bindex.BM25Reader.
func (r statsReader) FieldCardinality(field string) (int, error) {
	if field == fieldText {
		return int(r.st.TextLength), nil
	}
	br, ok := r.IndexReader.(bindex.BM25Reader)
	if !ok {
		return 0, fmt.Errorf("the index reader has no field cardinality")
	}
	return br.FieldCardinality(field)
}

func (r statsReader) TermFieldReader(ctx context.Context, term []byte, field string, freq, norm, vectors bool) (bindex.TermFieldReader, error) {
	tfr, err := r.IndexReader.TermFieldReader(ctx, term, field, freq, norm, vectors)
	if err != nil || field != fieldText {
		return tfr, err
	}
	n, ok := r.st.Terms[string(term)]
	if !ok {
		return tfr, nil
	}
	return countedReader{TermFieldReader: tfr, count: n}, nil
}

// countedReader is a TermFieldReader whose Count (the term's doc
// frequency, BM25's idf) is the corpus's.
type countedReader struct {
	bindex.TermFieldReader
	count uint64
}

func (r countedReader) Count() uint64 { return r.count }
