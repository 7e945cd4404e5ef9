package index

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
)

// groupQuery wraps a query and, in one pass over its matches, keeps each
// session's best doc (score desc, rank key asc: the order rankOrder sorts
// by) in out. It hands no match to Bleve's collector, so the search result
// is empty and out holds the grouping.
type groupQuery struct {
	inner  query.Query
	filter *rankFilter // nil: none
	out    *sessionBests
}

// genQuery wraps a query and records the generation of the index state
// its search reads (the batch generation stored beside the docs, read
// through the same reader as the search) in out.
type genQuery struct {
	inner query.Query
	out   *uint64
}

// Searcher implements query.Query.
func (q genQuery) Searcher(ctx context.Context, r bindex.IndexReader, m mapping.IndexMapping, opts search.SearcherOptions) (search.Searcher, error) {
	raw, err := r.GetInternal(keyGeneration)
	if err != nil {
		return nil, err
	}
	if len(raw) != 8 {
		return nil, fmt.Errorf("%w: unreadable generation (%d bytes)", ErrCorrupt, len(raw))
	}
	*q.out = binary.BigEndian.Uint64(raw)
	return q.inner.Searcher(ctx, r, m, opts)
}

// sessionBests is each session's best match. The bests live in one slice
// and their rank keys in one arena (a session's rank keys all have the same
// length, so a better match overwrites its key in place): a pass allocates
// per session only the map key, not a struct and a key each.
type sessionBests struct {
	index map[string]int
	bests []groupBest
	arena []byte
}

type groupBest struct {
	sid        string
	score      float64
	start, end int // the rank key in the arena
}

// offer records a match of session sid with score and rank key rank.
func (s *sessionBests) offer(sid []byte, score float64, rank []byte) {
	i, ok := s.index[string(sid)]
	if !ok {
		id := string(sid)
		s.index[id] = len(s.bests)
		start := len(s.arena)
		s.arena = append(s.arena, rank...)
		s.bests = append(s.bests, groupBest{sid: id, score: score, start: start, end: len(s.arena)})
		return
	}
	b := &s.bests[i]
	key := s.arena[b.start:b.end]
	if score > b.score || (score == b.score && bytes.Compare(rank, key) < 0) {
		b.score = score
		if len(rank) == len(key) {
			copy(key, rank)
			return
		}
		b.start = len(s.arena)
		s.arena = append(s.arena, rank...)
		b.end = len(s.arena)
	}
}

func (s *sessionBests) rank(b groupBest) []byte { return s.arena[b.start:b.end] }

// Searcher implements query.Query.
func (q groupQuery) Searcher(ctx context.Context, r bindex.IndexReader, m mapping.IndexMapping, opts search.SearcherOptions) (search.Searcher, error) {
	s, dv, err := rankSearcher(ctx, q.inner, r, m, opts)
	if err != nil {
		return nil, err
	}
	return &groupSearcher{Searcher: s, ctx: ctx, dv: dv, filter: q.filter, out: q.out}, nil
}

// groupSearcher consumes every match of its inner searcher on the first
// Next and then reports the end.
type groupSearcher struct {
	search.Searcher
	// ctx is the search's: the pass checks it as Bleve's collector does.
	ctx    context.Context
	dv     bindex.DocValueReader
	filter *rankFilter
	out    *sessionBests
}

func (g *groupSearcher) Next(ctx *search.SearchContext) (*search.DocumentMatch, error) {
	var rank, sid []byte
	visit := func(_ string, term []byte) { rank = append(rank[:0], term...) }
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := g.ctx.Err(); err != nil {
				return nil, err
			}
		}
		d, err := g.Searcher.Next(ctx)
		if err != nil || d == nil {
			return nil, err
		}
		rank = rank[:0]
		if err := g.dv.VisitDocValues(d.IndexInternalID, visit); err != nil {
			return nil, err
		}
		if g.filter != nil {
			ok, err := g.filter.pass(rank)
			if err != nil {
				return nil, err
			}
			if !ok {
				ctx.DocumentMatchPool.Put(d)
				continue
			}
		}
		if sid, err = appendRankSession(sid[:0], rank); err != nil {
			return nil, err
		}
		// The lookup by string(sid) does not allocate; only a session's
		// first match does.
		g.out.offer(sid, d.Score, rank)
		ctx.DocumentMatchPool.Put(d)
	}
}

func (g *groupSearcher) Advance(ctx *search.SearchContext, _ bindex.IndexInternalID) (*search.DocumentMatch, error) {
	return g.Next(ctx)
}

// parseRankKey reads the session id and seq back from a rank key (see
// rankKey: 16 hex digits of time, the escaped session id, 0x01 0x01, 16 hex
// digits of seq, then the trailer's createdAt and generation).
func parseRankKey(k []byte) (string, int64, error) {
	sid, err := appendRankSession(nil, k)
	if err != nil {
		return "", 0, err
	}
	seq, err := rankKeySeq(k)
	if err != nil {
		return "", 0, err
	}
	return string(sid), seq, nil
}

// rankKeyHex reads the 16 hex digits at offset off of rank key k; a
// negative offset counts from the end.
func rankKeyHex(k []byte, off int) (uint64, error) {
	if len(k) < minRankKey {
		return 0, errors.New("short rank key")
	}
	if off < 0 {
		off += len(k)
	}
	return parseHex16(k[off : off+16])
}

// rankKeySeq reads the seq back from a rank key.
func rankKeySeq(k []byte) (int64, error) {
	inv, err := rankKeyHex(k, -rankTrailer)
	return int64(^inv), err
}

// rankKeyTime reads the time back from a rank key.
func rankKeyTime(k []byte) (int64, error) {
	inv, err := rankKeyHex(k, 0)
	return int64(^inv ^ 1<<63), err
}

// rankKeyCreated reads the session's createdAt back from a rank key.
func rankKeyCreated(k []byte) (int64, error) {
	v, err := rankKeyHex(k, -32)
	return int64(v ^ 1<<63), err
}

// rankKeyGen reads the doc's creation generation back from a rank key.
func rankKeyGen(k []byte) (uint64, error) { return rankKeyHex(k, -16) }

// parseHex16 parses 16 lowercase or uppercase hex digits without allocating.
func parseHex16(h []byte) (uint64, error) {
	var v uint64
	for _, c := range h {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, fmt.Errorf("rank key digit %q is not hex", c)
		}
		v = v<<4 | uint64(d)
	}
	return v, nil
}

// appendRankSession appends the session id of rank key k to sid.
func appendRankSession(sid, k []byte) ([]byte, error) {
	if len(k) < minRankKey {
		return nil, errors.New("short rank key")
	}
	body := k[16 : len(k)-rankTrailer]
	ended := false
	for i := 0; i < len(body) && !ended; i++ {
		if body[i] != 0x01 {
			sid = append(sid, body[i])
			continue
		}
		if i+1 >= len(body) {
			return nil, errors.New("bad rank key escape")
		}
		i++
		if body[i] == 0x01 {
			if i != len(body)-1 {
				return nil, errors.New("bad rank key terminator")
			}
			ended = true
			continue
		}
		sid = append(sid, body[i]-2)
	}
	if !ended {
		return nil, errors.New("rank key has no terminator")
	}
	return sid, nil
}

// bestPerSession returns, in rank order, the best doc of each of the first
// need sessions: one pass over every match (groupQuery) keeps each
// session's best, so a session with many matching docs costs only their
// scoring, and memory grows with the sessions, not the matches.
// searched is set to the generation of the index state the pass read.
func (x *Index) bestPerSession(ctx context.Context, tq query.Query, fs *filterSet, asOf uint64, need int, searched *uint64) ([]Key, error) {
	out := &sessionBests{index: make(map[string]int)}
	inner, filter := withFilters(tq, fs, asOf)
	q := genQuery{inner: groupQuery{inner: inner, filter: filter, out: out}, out: searched}
	req := bleve.NewSearchRequestOptions(q, 1, 0, false)
	if _, err := x.idx.SearchInContext(ctx, req); err != nil {
		return nil, err
	}
	all := out.bests
	slices.SortFunc(all, func(a, b groupBest) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return bytes.Compare(out.rank(a), out.rank(b))
	})
	keys := make([]Key, 0, min(need, len(all)))
	for _, b := range all[:min(need, len(all))] {
		seq, err := rankKeySeq(out.rank(b))
		if err != nil {
			return nil, err
		}
		gen, err := rankKeyGen(out.rank(b))
		if err != nil {
			return nil, err
		}
		tm, err := rankKeyTime(out.rank(b))
		if err != nil {
			return nil, err
		}
		keys = append(keys, Key{SessionID: b.sid, Seq: seq, Gen: gen, Score: b.score, Time: tm})
	}
	return keys, nil
}
