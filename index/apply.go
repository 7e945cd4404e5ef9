package index

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
	"github.com/dshq/dshq"
)

// maxExactNumber bounds numeric doc fields: Bleve stores numbers as float64,
// exact only up to 2^53 (JavaScript's safe integers, as upstream).
const maxExactNumber = 1 << 53

// stored is a doc as the index holds it: the doc and the generation of the
// batch that first indexed it (kept across surface reclassifications).
type stored struct {
	doc  Doc
	cgen uint64
}

// Apply applies b and records generation as the index's applied stream
// sequence, in one atomic Bleve batch: after a crash the index holds either
// everything before it or everything through it. Apply returns once the batch
// is searchable; Bleve writes and syncs it in the background, a few
// milliseconds later (Close waits for that, within a bound). After a crash the index
// may therefore be behind its last Apply — Generation, read back at Open,
// says through which generation it holds everything — and its owner feeds it
// the rest again (the projector re-feeds it from its store). An invalid doc
// fails the whole batch with ErrInvalidDoc
// (CodeIndexFailed) and changes nothing. Concurrent calls are serialized.
func (x *Index) Apply(ctx context.Context, b *Batch, generation uint64) error {
	x.applyMu.Lock()
	defer x.applyMu.Unlock()
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return indexError(ErrClosed, "apply index batch")
	}
	if err := ctx.Err(); err != nil {
		return indexError(err, "apply index batch")
	}
	final, err := x.resolve(ctx, b, generation)
	if err != nil {
		return indexError(err, "apply index batch")
	}
	bb := x.idx.NewBatch()
	ids := make([]string, 0, len(final))
	for id := range final {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s := final[id]
		if s == nil {
			bb.Delete(id)
			continue
		}
		doc, err := x.document(id, s)
		if err != nil {
			return indexError(err, "index doc %q", id)
		}
		if err := bb.IndexAdvanced(doc); err != nil {
			return indexError(err, "index doc %q", id)
		}
	}
	bb.SetInternal(keyGeneration, encodeGen(generation))
	bb.SetPersistedCallback(func(err error) {
		if err == nil {
			x.noteDurable(generation)
		}
	})
	if err := ctx.Err(); err != nil {
		return indexError(err, "apply index batch")
	}
	if err := x.idx.Batch(bb); err != nil {
		return indexError(err, "apply index batch")
	}
	x.gen.Store(generation)
	return nil
}

// resolve folds the batch's operations, in order, into the final state of
// each doc id it touches (nil = deleted).
func (x *Index) resolve(ctx context.Context, b *Batch, generation uint64) (map[string]*stored, error) {
	final := make(map[string]*stored)
	for _, o := range b.ops {
		switch o.kind {
		case opUpsert:
			d, err := cleanDoc(o.doc)
			if err != nil {
				return nil, err
			}
			cgen := generation
			if d.Generation != 0 {
				cgen = d.Generation
			}
			final[docID(cgen, d.SessionID, d.Seq)] = &stored{doc: d, cgen: cgen}
		case opDeleteSession:
			if err := x.resolveDelete(ctx, final, o.doc.SessionID); err != nil {
				return nil, err
			}
		}
	}
	return final, nil
}

// resolveDelete marks every doc of the session deleted: those in the index
// and those upserted earlier in the batch.
func (x *Index) resolveDelete(ctx context.Context, final map[string]*stored, sessionID string) error {
	for id, s := range final {
		if s != nil && s.doc.SessionID == sessionID {
			final[id] = nil
		}
	}
	q := query.NewTermQuery(sessionID)
	q.SetField(fieldSession)
	const page = 10000
	var after []string
	for {
		req := bleve.NewSearchRequestOptions(q, page, 0, false)
		req.SortByCustom(search.SortOrder{&search.SortDocID{}})
		req.Score = "none"
		req.SearchAfter = after
		res, err := x.idx.SearchInContext(ctx, req)
		if err != nil {
			return fmt.Errorf("list docs of session %q: %w", sessionID, err)
		}
		for _, h := range res.Hits {
			final[h.ID] = nil
		}
		if len(res.Hits) < page {
			return nil
		}
		after = []string{res.Hits[len(res.Hits)-1].ID}
	}
}

// cleanDoc validates d and sanitizes its text.
func cleanDoc(d Doc) (Doc, error) {
	switch {
	case d.SessionID == "":
		return d, fmt.Errorf("%w: blank session id", ErrInvalidDoc)
	case d.Type == "":
		return d, fmt.Errorf("%w: blank type of %q seq %d", ErrInvalidDoc, d.SessionID, d.Seq)
	case !d.Surface.Valid():
		return d, fmt.Errorf("%w: surface %q of %q seq %d", ErrInvalidDoc, d.Surface, d.SessionID, d.Seq)
	case strings.TrimSpace(d.Text) == "":
		return d, fmt.Errorf("%w: blank text of %q seq %d", ErrInvalidDoc, d.SessionID, d.Seq)
	case !exact(d.Seq) || !exact(d.Time) || !exact(d.CreatedAt) || d.Seq < 0:
		return d, fmt.Errorf("%w: seq %d, time %d or createdAt %d of %q out of range", ErrInvalidDoc, d.Seq, d.Time, d.CreatedAt, d.SessionID)
	case d.Generation > maxExactNumber:
		return d, fmt.Errorf("%w: generation %d of %q seq %d out of range", ErrInvalidDoc, d.Generation, d.SessionID, d.Seq)
	}
	d.Text = Sanitize(d.Text)
	return d, nil
}

func exact(n int64) bool { return n >= -maxExactNumber && n <= maxExactNumber }

// Sanitize returns s with NUL and the noncharacters U+FDD0 and U+FDD1 (and any
// invalid UTF-8) replaced by U+FFFD, as upstream does to document text and
// queries.
func Sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsAny(s, "\x00\uFDD0\uFDD1") {
		return s
	}
	return strings.NewReplacer("\x00", "\uFFFD", "\uFDD0", "\uFFFD", "\uFDD1", "\uFFFD").Replace(s)
}

// fields returns the document Bleve indexes for s.
func (s *stored) fields() map[string]any {
	d := s.doc
	return map[string]any{
		fieldSession: d.SessionID,
		fieldCwd:     nullableTerm(d.Cwd),
		fieldTenant:  nullableTerm(tenantOrNil(d.Tenant)),
		fieldHarness: nullableTerm(d.Harness),
		fieldParent:  nullableTerm(d.Parent),
		fieldCreated: float64(d.CreatedAt),
		fieldSeq:     float64(d.Seq),
		fieldTime:    float64(d.Time),
		fieldType:    d.Type,
		fieldSurface: string(d.Surface),
		fieldGen:     float64(s.cgen),
		fieldText:    d.Text,
		fieldRank:    rankKey(d.Time, d.SessionID, d.Seq, d.CreatedAt, s.cgen),
	}
}

// document maps s to the Bleve document the index mapping makes of it, with
// one change the mapping cannot express: the rank key's doc value is stored
// uncompressed and unchunked. Every ranking reads the rank key of every
// match; a filtered (sparse) match would otherwise decompress a whole chunk
// of 1024 docs' keys to read its own.
func (x *Index) document(id string, s *stored) (*document.Document, error) {
	doc := document.NewDocument(id)
	if err := x.idx.Mapping().MapDocument(doc, s.fields()); err != nil {
		return nil, err
	}
	for i, f := range doc.Fields {
		if tf, ok := f.(*document.TextField); ok && f.Name() == fieldRank {
			doc.Fields[i] = document.NewTextFieldCustom(fieldRank, tf.ArrayPositions(), tf.Value(),
				tf.Options()|bindex.SkipDVCompression|bindex.SkipDVChunking, tf.Analyzer())
		}
	}
	return doc, nil
}

// storedFields lists the fields fetch loads.
var storedFields = []string{fieldSession, fieldTenant, fieldHarness, fieldCwd, fieldParent, fieldCreated, fieldSeq, fieldTime, fieldType, fieldSurface, fieldGen, fieldText}

// fetch loads the stored docs with the given ids, in the order of ids;
// missing ids are skipped. It reads the stored fields of each doc from one
// index snapshot directly: no search, no field maps built for highlighting.
func (x *Index) fetch(ctx context.Context, ids []string) ([]stored, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	ix, err := x.idx.Advanced()
	if err != nil {
		return nil, fmt.Errorf("load docs: %w", err)
	}
	r, err := ix.Reader()
	if err != nil {
		return nil, fmt.Errorf("load docs: %w", err)
	}
	defer r.Close()
	out := make([]stored, 0, len(ids))
	for i, id := range ids {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("load docs: %w", err)
			}
		}
		d, err := r.Document(id)
		if err != nil {
			return nil, fmt.Errorf("load doc %q: %w", id, err)
		}
		if d == nil {
			continue
		}
		fields := make(map[string]any, len(storedFields))
		d.VisitFields(func(f bindex.Field) {
			if n, ok := f.(bindex.NumericField); ok {
				if v, err := n.Number(); err == nil {
					fields[f.Name()] = v
				}
				return
			}
			fields[f.Name()] = string(f.Value())
		})
		s, err := decodeStored(&search.DocumentMatch{ID: id, Fields: fields})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func decodeStored(h *search.DocumentMatch) (stored, error) {
	str := func(f string) (string, error) {
		v, ok := h.Fields[f].(string)
		if !ok {
			return "", fmt.Errorf("%w: doc %q has no %s", ErrCorrupt, h.ID, f)
		}
		return v, nil
	}
	num := func(f string) (int64, error) {
		v, ok := h.Fields[f].(float64)
		if !ok || math.IsNaN(v) {
			return 0, fmt.Errorf("%w: doc %q has no %s", ErrCorrupt, h.ID, f)
		}
		return int64(v), nil
	}
	var s stored
	var errs [12]error
	var tenant, harness, cwd, parent, surface string
	var cgen int64
	s.doc.SessionID, errs[0] = str(fieldSession)
	cwd, errs[1] = str(fieldCwd)
	parent, errs[2] = str(fieldParent)
	s.doc.CreatedAt, errs[3] = num(fieldCreated)
	s.doc.Seq, errs[4] = num(fieldSeq)
	s.doc.Time, errs[5] = num(fieldTime)
	s.doc.Type, errs[6] = str(fieldType)
	surface, errs[7] = str(fieldSurface)
	cgen, errs[8] = num(fieldGen)
	s.doc.Text, errs[9] = str(fieldText)
	tenant, errs[10] = str(fieldTenant)
	harness, errs[11] = str(fieldHarness)
	for _, err := range errs {
		if err != nil {
			return s, err
		}
	}
	s.doc.Cwd = parseNullableTerm(cwd)
	if t := parseNullableTerm(tenant); t != nil {
		s.doc.Tenant = *t
	}
	s.doc.Parent = parseNullableTerm(parent)
	s.doc.Harness = parseNullableTerm(harness)
	s.doc.Surface = dshq.Surface(surface)
	s.cgen = uint64(cgen)
	return s, nil
}

// noteDurable records that the batch of generation g is on disk. The
// persister reports batches in order, but a retried write may report
// earlier ones with later ones: the recorded generation only grows.
func (x *Index) noteDurable(g uint64) {
	for {
		d := x.durable.Load()
		if g <= d || x.durable.CompareAndSwap(d, g) {
			return
		}
	}
}
