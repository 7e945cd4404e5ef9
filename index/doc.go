// Package index is dshq's full-text index: a Bleve (scorch) index of the
// semantic text of events (docs/search.md#semantic-text), with each session's
// immutable header fields denormalized into every document so that metadata
// filters run inside the index, before ranking.
//
// The projector is the only writer: it fills a Batch (upserts, surface
// reclassifications, session deletions) and applies it together with the stream
// sequence it has applied (the generation), in one atomic Bleve batch. The
// query service searches: a query is one literal phrase, never syntax
// (docs/search.md#the-query-is-a-literal-phrase), analyzed like the documents
// (case- and diacritic-folded Unicode words, CJK as overlapping bigrams),
// ranked by BM25 with the deterministic tie-breaks time desc, session id asc
// (byte order), seq desc. Metadata filters join the text query with boost 0:
// they restrict the candidates and never change a score. The numeric filters
// (time, seq, createdAt, and AsOf's creation generation) are tested on each
// candidate instead, from the rank key doc value that carries all four: the
// numbers are stored but not indexed, since Bleve indexes a number as 16
// prefix-coded terms, which cost more to build and merge than the text itself.
// Note that Bleve v2.6.3 takes BM25's average field length to be the text
// field's distinct terms per doc (rounded up), not its mean token count, so
// length normalization favors short docs more than textbook BM25 does.
//
// Ranking reads no stored document: Bleve sorts by score and one keyword doc
// value holding the tie-break (time, session id, seq), and the doc id gives
// the session and seq. RankEvents and RankSessions return only these keys;
// Hits loads the docs of chosen keys and cuts their snippets, so a caller
// that ranks thousands of hits (a paged search fixed as of its first page)
// pays for loading text only on the pages it shows. SearchEvents and
// SearchSessions are Rank* followed by Hits of every ranked key.
//
// Analysis (the same for documents and queries) works like SQLite FTS5
// unicode61 without stemming or stop words: a word is a run of letters,
// numbers and marks, so `AI` finds `An AI helper` but not `BRAID`; case and
// diacritics are folded (NFKD, marks dropped), so `CAFE` finds `café` and
// back. Chinese, Japanese and Korean text is indexed as overlapping character
// bigrams plus single characters, so a query finds any run of two or more
// characters of a CJK run (and a longer run as consecutive bigrams); a
// one-character CJK query finds every doc containing that character. CJK
// characters separated only by spaces or punctuation are adjacent for
// matching, as Latin words are. A query with no word (`*`, punctuation,
// emoji) matches nothing and is not an error.
//
// Failures at the edge are *dshq.Error values: CodeIndexFailed for storage
// problems (and a closed index), CodeInvalidFilter for a filter the index
// cannot apply, CodeInvalidQuery for a blank query, CodeAborted when ctx ends.
// Open reports an unusable directory with ErrCorrupt or ErrIncompatible in the
// chain (errors.Is), so the owner can delete it and rebuild from the stream.
package index

import "github.com/dshq/dshq"

// Doc is one event with semantic text: the unit of the index. The session
// fields (Tenant, Cwd, Parent, CreatedAt) are immutable per session and
// repeated in each of its docs so filters need no join.
type Doc struct {
	SessionID string
	// Tenant is the session's tenant, "" for a session of no tenant.
	Tenant string
	// Harness is the session header's harness (the harness whose own file
	// it was converted from), nil for a native session.
	Harness *string
	// Cwd is the session header's cwd; nil when the header has none.
	Cwd *string
	// Parent is the session header's parentSession; nil when it has none.
	Parent    *string
	CreatedAt int64
	Seq       int64
	Type      string
	Time      int64
	Surface   dshq.Surface
	// Text is the event's semantic text; it must not be blank. The index
	// sanitizes it (NUL, U+FDD0, U+FDD1 → U+FFFD) before storing it.
	Text string
	// Generation is the doc's creation generation, the one AsOf compares:
	// the stream sequence of the event's record, so that a doc re-fed
	// later (after index loss, or a batch re-applied after a crash) keeps
	// the generation it was first searchable at. 0 = the generation of the
	// batch that indexes it.
	Generation uint64
}

// Record returns the doc's event record.
func (d Doc) Record() dshq.EventRecord {
	return dshq.EventRecord{SessionID: d.SessionID, Seq: d.Seq, Type: d.Type, Time: d.Time, Surface: d.Surface}
}

// Batch collects index changes to apply atomically with one generation. Its
// operations take effect in the order they were added (an upsert after a
// DeleteSession of the same session survives it). The zero value is empty and
// ready to use; a Batch is not safe for concurrent use.
type Batch struct {
	ops []op
}

type opKind int

const (
	opUpsert opKind = iota + 1
	opDeleteSession
)

type op struct {
	kind opKind
	doc  Doc
}

// Upsert adds or replaces the doc of (d.SessionID, d.Seq) and its creation
// generation (d.Generation, or the batch's): a doc's identity includes the
// generation it was first indexed at (see docID), so a reclassified or
// re-fed doc must be upserted with that Generation to replace itself.
func (b *Batch) Upsert(d Doc) {
	b.ops = append(b.ops, op{kind: opUpsert, doc: d})
}

// DeleteSession removes every doc of a session (a session marked invalid
// leaves cross-session search).
func (b *Batch) DeleteSession(sessionID string) {
	b.ops = append(b.ops, op{kind: opDeleteSession, doc: Doc{SessionID: sessionID}})
}

// Len returns the number of operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// Reset empties the batch for reuse.
func (b *Batch) Reset() { b.ops = b.ops[:0] }
