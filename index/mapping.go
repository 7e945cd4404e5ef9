package index

import (
	"fmt"

	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/mapping"
	bindex "github.com/blevesearch/bleve_index_api"
)

// Field names of an indexed doc.
const (
	fieldSession = "sid"
	fieldCwd     = "cwd"
	fieldTenant  = "tn"
	// fieldHarness is the header's harness (claude-code, codex), the
	// null term for a native session.
	fieldHarness = "hn"
	fieldParent  = "parent"
	fieldCreated = "created"
	fieldSeq     = "seq"
	fieldTime    = "time"
	fieldType    = "type"
	fieldSurface = "surface"
	fieldGen     = "cgen"
	fieldText    = "text"
	fieldRank    = "rk"
)

// newMapping returns the index mapping: one document type with keyword
// metadata fields, stored numbers, and the analyzed text; BM25 scoring.
func newMapping() (*mapping.IndexMappingImpl, error) {
	im := mapping.NewIndexMapping()
	im.ScoringModel = bindex.BM25Scoring
	im.IndexDynamic = false
	im.StoreDynamic = false
	im.DocValuesDynamic = false
	if err := im.AddCustomTokenFilter(bigramName, map[string]any{
		"type":           cjk.BigramName,
		"output_unigram": true,
	}); err != nil {
		return nil, fmt.Errorf("index mapping: %w", err)
	}
	if err := im.AddCustomAnalyzer(analyzerName, map[string]any{
		"type":          custom.Name,
		"tokenizer":     tokenizerName,
		"token_filters": []any{foldName, bigramName},
	}); err != nil {
		return nil, fmt.Errorf("index mapping: %w", err)
	}

	dm := mapping.NewDocumentStaticMapping()
	keywordField := func(sortable bool) *mapping.FieldMapping {
		f := mapping.NewKeywordFieldMapping()
		f.Analyzer = keyword.Name
		f.Store = !sortable
		f.IncludeInAll = false
		f.DocValues = sortable
		return f
	}
	// The numbers are stored, not indexed: their filters read the rank
	// key's trailer (see rankKey).
	storedNumber := func() *mapping.FieldMapping {
		f := mapping.NewNumericFieldMapping()
		f.Index = false
		f.Store = true
		f.IncludeInAll = false
		f.DocValues = false
		return f
	}
	text := mapping.NewTextFieldMapping()
	text.Analyzer = analyzerName
	text.Store = true
	text.IncludeInAll = false
	text.IncludeTermVectors = true // positions, for phrases
	text.DocValues = false

	dm.AddFieldMappingsAt(fieldSession, keywordField(false))
	dm.AddFieldMappingsAt(fieldRank, keywordField(true))
	dm.AddFieldMappingsAt(fieldCwd, keywordField(false))
	dm.AddFieldMappingsAt(fieldTenant, keywordField(false))
	dm.AddFieldMappingsAt(fieldHarness, keywordField(false))
	dm.AddFieldMappingsAt(fieldParent, keywordField(false))
	dm.AddFieldMappingsAt(fieldType, keywordField(false))
	dm.AddFieldMappingsAt(fieldSurface, keywordField(false))
	dm.AddFieldMappingsAt(fieldCreated, storedNumber())
	dm.AddFieldMappingsAt(fieldSeq, storedNumber())
	dm.AddFieldMappingsAt(fieldTime, storedNumber())
	dm.AddFieldMappingsAt(fieldGen, storedNumber())
	dm.AddFieldMappingsAt(fieldText, text)
	// No composite "_all" field: every query names its field, and Bleve
	// would otherwise visit the composite for every doc it indexes.
	dm.AddSubDocumentMapping("_all", mapping.NewDocumentDisabledMapping())
	im.DefaultMapping = dm
	im.DefaultAnalyzer = analyzerName
	if err := im.Validate(); err != nil {
		return nil, fmt.Errorf("index mapping: %w", err)
	}
	return im, nil
}

// docID is the Bleve id of a doc: its creation generation and its seq as
// 16 hex digits each, then the session id's bytes. The fixed-width prefix
// makes it injective for any session id bytes, and lets a hit's identity be
// read from its id.
//
// The generation leads so that the ids a batch adds sort after every id
// already indexed (the projector applies the stream in order, and a doc
// keeps its creation generation for life): Bleve looks each id of a batch up
// in the id dictionary of every segment only when it is not beyond that
// segment's largest, so new docs cost no lookup at all, and the segments'
// pages are not touched by every batch. A doc re-indexed (reclassified,
// re-fed) carries its generation and so keeps its id.
func docID(gen uint64, sessionID string, seq int64) string {
	return fmt.Sprintf("%016x%016x", gen, uint64(seq)) + sessionID
}

// ParseDocID reads a doc's identity back from the Bleve id this package gave
// it: its creation generation, session id and seq.
func ParseDocID(id string) (gen uint64, sessionID string, seq int64, err error) {
	if len(id) < 32 {
		return 0, "", 0, fmt.Errorf("index doc id %q is too short", id)
	}
	g, err1 := parseHex16([]byte(id[:16]))
	q, err2 := parseHex16([]byte(id[16:32]))
	if err1 != nil || err2 != nil {
		return 0, "", 0, fmt.Errorf("index doc id %q: not hex", id)
	}
	return g, id[32:], int64(q), nil
}

// rankKey is the tie-break part of the rank order as one keyword whose byte
// order is time desc, session id asc (byte order), seq desc, so that Bleve
// sorts ties by reading one doc value instead of three. The session id is
// escaped order-preservingly (0x01 → 01 03, 0x00 → 01 02) and ended by 01 01,
// which sorts below every escaped byte, so a shorter id sorts first.
//
// A fixed-width trailer follows the seq: the session's createdAt and the
// doc's creation generation, 16 hex digits each (not raw bytes: zap splits
// a doc value at 0xff). They never decide
// an order (time, session id and seq already identify the doc); they are
// there so that the numeric filters (time, seq, createdAt, AsOf) read every
// value they test from this one doc value (see rankFilter), and the numeric
// fields need no indexed terms — Bleve indexes a number as 16 prefix terms,
// which cost more to build and merge than the text.
func rankKey(time int64, sessionID string, seq, createdAt int64, cgen uint64) string {
	b := make([]byte, 0, 16+len(sessionID)+2+rankTrailer)
	b = fmt.Appendf(b, "%016x", ^(uint64(time) ^ 1<<63))
	for i := 0; i < len(sessionID); i++ {
		switch c := sessionID[i]; c {
		case 0x00, 0x01:
			b = append(b, 0x01, c+2)
		default:
			b = append(b, c)
		}
	}
	b = append(b, 0x01, 0x01)
	return string(fmt.Appendf(b, "%016x%016x%016x", ^uint64(seq), uint64(createdAt)^1<<63, cgen))
}

// rankTrailer is the length of a rank key after its session id's
// terminator: 16 hex digits each of seq, createdAt and generation.
const rankTrailer = 3 * 16

// minRankKey is the length of a rank key of the empty session id.
const minRankKey = 16 + 2 + rankTrailer

// nullableTerm encodes an optional header string as a keyword term that keeps
// "absent" apart from every present value (including the empty string).
func nullableTerm(s *string) string {
	if s == nil {
		return "n"
	}
	return "v" + *s
}

// tenantOrNil maps the untenanted namespace ("") to the null term, so that
// a tenant filter's null value finds it (as the query API's does).
func tenantOrNil(tenant string) *string {
	if tenant == "" {
		return nil
	}
	return &tenant
}

func parseNullableTerm(t string) *string {
	if len(t) == 0 || t[0] != 'v' {
		return nil
	}
	s := t[1:]
	return &s
}
