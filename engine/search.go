package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// storedChunkBytes bounds one stored chunk of hits (well under any payload).
const storedChunkBytes = 256 << 10

// searchMeta is what a paged search stores beside its hits: the sessions
// its results count (for the stale check) and where each chunk starts.
type searchMeta struct {
	Sessions []string `json:"sessions"`
	Starts   []int64  `json:"starts"`
	// Truncated is set when the search matched more than the stored hits
	// (the Engine's max results): continuing past them fails.
	Truncated bool `json:"truncated,omitempty"`
	// MaxResults, when set, is the bound a truncated search was cut at
	// (the source's, Ranked.MaxResults); else the Engine's.
	MaxResults int `json:"maxResults,omitempty"`
	// Keys is set when the chunks hold HitKeys (a search's later pages);
	// a ranking stored for a partitioned service (sessions.rank) holds
	// wire.RankedSessions (LoadRanking).
	Keys bool `json:"keys,omitempty"`
}

// searchSessions answers sessions.search in the original's order
// (docs/search.md#request-validation-order): cursor, then the compile budget,
// then the index.
func (e *Engine) searchSessions(ctx context.Context, snap Snapshot, req *wire.Request) (any, error) {
	c, first, err := e.continueCursor(snap, req)
	if err != nil {
		return nil, err
	}
	if err := wire.CheckSearchBudget(req); err != nil {
		return nil, err
	}
	page := dshq.SessionSearchPage{Items: []dshq.SessionSearchHit{}, Generation: snap.Generation()}
	ix := snap.Index()
	if !first {
		_, checks := ix.(SessionHitter)
		page.Items, page.NextCursor, err = continueSearch(ctx, e, snap, req, c, page, e.sessionHits(ix, req.Query), checks)
		return page, err
	}
	page.Items, page.NextCursor, err = e.keySessions(ctx, ix, snap, req, c, page)
	return page, err
}

// searchEvents answers events.search: the target is resolved before the
// cursor is decoded (docs/search.md#request-validation-order); an invalid target is
// SESSION_QUERY_INVALID_SURFACE.
func (e *Engine) searchEvents(ctx context.Context, snap Snapshot, req *wire.Request) (any, error) {
	info, err := lookup(snap, req.SessionID)
	if err != nil {
		return nil, err
	}
	if info.InvalidFrom >= 0 {
		return nil, invalidSurface(info)
	}
	c, first, err := e.continueCursor(snap, req)
	if err != nil {
		return nil, err
	}
	if err := wire.CheckSearchBudget(req); err != nil {
		return nil, err
	}
	page := dshq.EventSearchPage{Session: info.Header.Header, Items: []dshq.EventSearchHit{}, Generation: snap.Generation()}
	ix := snap.Index()
	if !first {
		page.Items, page.NextCursor, err = continueSearch(ctx, e, snap, req, c, page, e.eventHits(ix, req.Query), false)
		return page, err
	}
	page.Items, page.NextCursor, err = e.keyEvents(ctx, ix, snap, req, c, page)
	return page, err
}

func indexFailed(err error) error {
	var de *dshq.Error
	if errors.As(err, &de) {
		return err
	}
	return &dshq.Error{Code: dshq.CodeIndexFailed, Message: "search index failed: " + err.Error(), Err: err}
}

// resolveHit checks a hit against the snapshot: the index may be ahead of
// it, so a hit the snapshot does not hold is dropped, and the surface is the
// snapshot's.
func resolveHit(snap Snapshot, sessionID string, h dshq.EventSearchHit) (dshq.EventSearchHit, bool, error) {
	ev, ok, err := snap.Event(sessionID, h.Seq)
	if err != nil {
		return h, false, fmt.Errorf("read event %d of %q: %w", h.Seq, sessionID, err)
	}
	if !ok {
		return h, false, nil
	}
	h.EventRecord = ev.Record
	return h, true, nil
}

// matchesNothing reports whether a list clause with no values is present.
func matchesNothing(fs []dshq.Filter) bool {
	for _, f := range fs {
		if !f.IsRange() && f.Kind != dshq.FilterText && len(f.Values) == 0 {
			return true
		}
	}
	return false
}

// tooManyResults is the failure of a cursor continuing past the stored hits
// of a truncated search.
func (e *Engine) tooManyResults(endpoint string, meta searchMeta) error {
	n := cmp.Or(meta.MaxResults, e.maxResults)
	return dshq.Errorf(dshq.CodeReplyTooLarge,
		"%s matched more than %d results, and only the first %d can be paged as of the first page; narrow the query or add filters",
		endpoint, n, n)
}

// storeHits stores hits[from:] (HitKeys when meta.Keys is set, else a
// ranking) in chunks and the meta; it returns the id and the number of
// chunks. sessions are the result set's sessions (a session ranking names
// each once). The stored format (<id>.m, <id>.<chunk>) is this file's
// alone: later pages read it with storedRun, a partitioned service's
// merge with LoadRanking. A request's engine writes them after its
// snapshot (storeIO).
func (e *Engine) storeHits(ctx context.Context, hits any, from int, sessions []string, meta searchMeta) (string, int, error) {
	elems, err := encodeElems(hits)
	if err != nil {
		return "", 0, fmt.Errorf("store hits: %w", err)
	}
	var idb [12]byte // wire.Cursor accepts 24 hex digits as a name of stored hits
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	var chunk []byte
	for start := from; start < len(elems); {
		end, size := start, 2
		for end < len(elems) && (end == start || size+len(elems[end])+1 <= storedChunkBytes) {
			size += len(elems[end]) + 1
			end++
		}
		chunk = append(chunk[:0], '[')
		for i, el := range elems[start:end] {
			if i > 0 {
				chunk = append(chunk, ',')
			}
			chunk = append(chunk, el...)
		}
		chunk = append(chunk, ']')
		if err := e.put(ctx, chunkKey(id, len(meta.Starts)), slices.Clone(chunk)); err != nil {
			return "", 0, &dshq.Error{Code: dshq.CodeIndexFailed, Message: "store search results: " + err.Error(), Err: err}
		}
		meta.Starts = append(meta.Starts, int64(start))
		start = end
	}
	mb, _ := json.Marshal(storedMeta{searchMeta: meta, Sessions: appendJSONStrings(nil, sessions)})
	if err := e.put(ctx, id+".m", mb); err != nil {
		return "", 0, &dshq.Error{Code: dshq.CodeIndexFailed, Message: "store search results: " + err.Error(), Err: err}
	}
	return id, len(meta.Starts), nil
}

// chunkKey is the store key of chunk i of the stored results id.
func chunkKey(id string, i int) string { return fmt.Sprintf("%s.%d", id, i) }

// LoadRanking reads the ranking a shard stored for sessions.rank, id of
// chunks chunks (wire.SessionRanking's Stored and Chunks), from store.
// Failures are SESSION_QUERY_STALE_CURSOR when it expired,
// SESSION_QUERY_INVALID_CURSOR when it is unreadable, else
// SESSION_QUERY_INDEX_FAILED.
func LoadRanking(ctx context.Context, store CursorStore, id string, chunks int) ([]wire.RankedSession, error) {
	var out []wire.RankedSession
	for i := range chunks {
		var chunk []wire.RankedSession
		if err := loadStored(ctx, store, chunkKey(id, i), &chunk); err != nil {
			return nil, err
		}
		out = append(out, chunk...)
	}
	return out, nil
}

// storedMeta is searchMeta as storeHits writes it: the sessions already
// encoded.
type storedMeta struct {
	searchMeta
	Sessions json.RawMessage `json:"sessions"`
}

// encodeElems returns the JSON of each element of hits: HitKeys are
// written directly (a first page stores up to 10 000 of them), other hits
// through encoding/json.
func encodeElems(hits any) ([]json.RawMessage, error) {
	if ks, ok := hits.([]HitKey); ok {
		buf := make([]byte, 0, len(ks)*48)
		ends := make([]int, len(ks))
		for i, k := range ks {
			buf = appendHitKey(buf, k)
			ends[i] = len(buf)
		}
		out := make([]json.RawMessage, len(ks))
		for i, start := 0, 0; i < len(ks); i++ {
			out[i], start = buf[start:ends[i]:ends[i]], ends[i]
		}
		return out, nil
	}
	var all []json.RawMessage
	b, err := json.Marshal(hits)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	return all, nil
}

// appendHitKey appends k's JSON, as encoding/json writes it.
func appendHitKey(dst []byte, k HitKey) []byte {
	dst = append(dst, `{"s":`...)
	dst = appendJSONString(dst, k.SessionID)
	dst = append(dst, `,"q":`...)
	dst = strconv.AppendInt(dst, k.Seq, 10)
	if k.Gen != 0 {
		dst = append(dst, `,"g":`...)
		dst = strconv.AppendUint(dst, k.Gen, 10)
	}
	if k.Live {
		dst = append(dst, `,"l":true`...)
	}
	return append(dst, '}')
}

// appendJSONStrings appends the JSON array of ss (never null).
func appendJSONStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

// appendJSONString appends s as a JSON string: printable ASCII without a
// quote, backslash or HTML character is written as is, anything else
// through encoding/json (which escapes it and replaces invalid UTF-8).
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// continueSearch serves a later page from the stored keys through build.
// It is stale when a session the results count was reclassified (or
// invalidated, or is gone) after the first page, or when the stored hits
// expired. When checks, build makes the check of the counted sessions
// itself (SessionHitter).
func continueSearch[T any](ctx context.Context, e *Engine, snap Snapshot, req *wire.Request, c *wire.Cursor, empty any, build buildFunc[T], checks bool) ([]T, string, error) {
	if c.Store == "" || c.Position > c.Bound {
		return nil, "", dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: offset out of range")
	}
	var meta searchMeta
	if err := e.load(ctx, c.Store+".m", &meta); err != nil {
		return nil, "", err
	}
	if c.Position == c.Bound {
		if meta.Truncated {
			return nil, "", e.tooManyResults(req.Endpoint, meta)
		}
		return nil, "", dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: offset out of range")
	}
	if !checks {
		if err := checkCounted(snap, meta.Sessions, c.Generation); err != nil {
			return nil, "", err
		}
	}
	if !meta.Keys {
		return nil, "", dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: its stored results are unreadable")
	}
	keys, err := storedRun[HitKey](ctx, e, c, meta, req.Limit)
	if err != nil {
		return nil, "", err
	}
	built, answered, err := build(ctx, snap, keys, &laterPage{counted: meta.Sessions, since: c.Generation})
	if err != nil {
		return nil, "", err
	}
	items, used := fitPage(e, built[:answered], empty)
	if len(items) == 0 {
		return nil, "", tooLargeItem(req.Endpoint)
	}
	pos := c.Position + int64(used)
	if pos < c.Bound || meta.Truncated {
		return items, c.At(pos), nil
	}
	return items, "", nil
}

// checkCounted fails with SESSION_QUERY_STALE_CURSOR when a session of
// ids, the sessions a first page at generation since counted, was
// reclassified after it, or is invalid or gone. At since itself nothing
// was reclassified since, and the first page counted no invalid or missing
// session.
func checkCounted(snap Snapshot, ids []string, since uint64) error {
	if snap.Generation() <= since {
		return nil
	}
	for _, id := range ids {
		info, ok, err := snap.Session(id)
		if err != nil {
			return fmt.Errorf("read session %q: %w", id, err)
		}
		if !ok || info.ReclassifiedAt > since || info.InvalidFrom >= 0 {
			return staleCursor()
		}
	}
	return nil
}

// storedRun loads up to limit stored elements from the cursor's offset.
func storedRun[E any](ctx context.Context, e *Engine, c *wire.Cursor, meta searchMeta, limit int) ([]E, error) {
	k := sort.Search(len(meta.Starts), func(i int) bool { return meta.Starts[i] > c.Position }) - 1
	if k < 0 {
		return nil, dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: offset out of range")
	}
	var out []E
	for pos := c.Position; k < len(meta.Starts) && len(out) < limit; k++ {
		var chunk []E
		if err := e.load(ctx, chunkKey(c.Store, k), &chunk); err != nil {
			return nil, err
		}
		for i := pos - meta.Starts[k]; i >= 0 && i < int64(len(chunk)) && len(out) < limit; i++ {
			out = append(out, chunk[i])
			pos++
		}
	}
	return out, nil
}
