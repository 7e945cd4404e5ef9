package query

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/query/wire"
)

// Partitioned sessions.search (docs/protocol.md, "Partitioned
// projections"): the service answers as one projection of the whole corpus
// does. A first page asks every shard for its session ranking with the
// corpus's BM25 statistics (sessions.rank), merges the rankings in the
// order one index gives (score desc, then the best event's time desc, then
// session id asc) cut to the shards' max results, asks the page's hits of
// the shards that hold them (sessions.hits) and, when more remain, stores
// the merged keys in the cursor bucket (dshq.CursorBucket) as a shard
// stores its own, so that later pages are answered from the first page's
// merge. A later page's stale check is made by every shard for the
// sessions it holds.

// storedKey is a ranked key as stored for later pages and sent to
// sessions.hits (the engine's HitKey).
type storedKey struct {
	SessionID string `json:"s"`
	Seq       int64  `json:"q"`
	Gen       uint64 `json:"g,omitempty"`
	Live      bool   `json:"l,omitempty"`
}

// storedSearch is the meta of a stored merge (the engine's searchMeta and
// the max results the truncation message names).
type storedSearch struct {
	Sessions   []string `json:"sessions"`
	Starts     []int64  `json:"starts"`
	Truncated  bool     `json:"truncated,omitempty"`
	Keys       bool     `json:"keys,omitempty"`
	MaxResults int      `json:"maxResults,omitempty"`
}

// storedChunkBytes bounds one stored chunk of keys, as a shard's.
const storedChunkBytes = 256 << 10

// cursorKV returns the cursor bucket, which the projectors create.
func (f *fanout) cursorKV(ctx context.Context) (jetstream.KeyValue, error) {
	f.kvMu.Lock()
	defer f.kvMu.Unlock()
	if f.kv != nil {
		return f.kv, nil
	}
	js, err := jetstream.New(f.nc)
	if err == nil {
		f.kv, err = js.KeyValue(ctx, dshq.CursorBucket)
	}
	if err != nil {
		return nil, &dshq.Error{Code: dshq.CodeIndexFailed, Err: err, Message: "store search results: the cursor bucket cannot be opened: " + err.Error()}
	}
	return f.kv, nil
}

func (f *fanout) loadStored(ctx context.Context, key string, v any) error {
	kv, err := f.cursorKV(ctx)
	if err != nil {
		return err
	}
	var value []byte
	var e jetstream.KeyValueEntry
	err = failover.Retry(ctx, f.nc, "KV_"+dshq.CursorBucket, failover.KVRetryFor, failover.KVAttempt, func(ctx context.Context) error {
		var err error
		e, err = kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil // answered: looked up on the leader below
		}
		return err
	})
	if err == nil && e == nil {
		err = jetstream.ErrKeyNotFound
	}
	if err == nil {
		value = e.Value()
	} else if errors.Is(err, jetstream.ErrKeyNotFound) {
		// The replica that answered may not hold it yet: its leader is
		// asked before it counts as expired (as a shard's cursor store does).
		m, lerr := failover.LastMsg(ctx, f.nc, "KV_"+dshq.CursorBucket, "$KV."+dshq.CursorBucket+"."+key)
		switch {
		case errors.Is(lerr, jetstream.ErrMsgNotFound),
			lerr == nil && (m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != ""):
			return dshq.Errorf(dshq.CodeStaleCursor, "cursor is stale because its stored results expired")
		case lerr == nil:
			value, err = m.Data, nil
		default:
			err = lerr
		}
	}
	if err != nil {
		return &dshq.Error{Code: dshq.CodeIndexFailed, Message: "load search results: " + err.Error(), Err: err}
	}
	if err := json.Unmarshal(value, v); err != nil {
		return dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: its stored results are unreadable")
	}
	return nil
}

// storeKeys stores keys[from:] in chunks and meta, and returns the name.
func (f *fanout) storeKeys(ctx context.Context, keys []storedKey, from int, meta storedSearch) (string, error) {
	kv, err := f.cursorKV(ctx)
	if err != nil {
		return "", err
	}
	put := func(k string, v []byte) error {
		if err := failover.Retry(ctx, f.nc, "KV_"+dshq.CursorBucket, failover.KVRetryFor, failover.KVAttempt, func(ctx context.Context) error {
			_, err := kv.Put(ctx, k, v)
			return err
		}); err != nil {
			return &dshq.Error{Code: dshq.CodeIndexFailed, Message: "store search results: " + err.Error(), Err: err}
		}
		return nil
	}
	var idb [12]byte // a cursor accepts 24 hex digits as a name of stored hits
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	meta.Keys = true
	for start := from; start < len(keys); {
		var chunk bytes.Buffer
		chunk.WriteByte('[')
		end := start
		for end < len(keys) {
			b, _ := json.Marshal(keys[end])
			if end > start && chunk.Len()+len(b)+2 > storedChunkBytes {
				break
			}
			if end > start {
				chunk.WriteByte(',')
			}
			chunk.Write(b)
			end++
		}
		chunk.WriteByte(']')
		if err := put(fmt.Sprintf("%s.%d", id, len(meta.Starts)), chunk.Bytes()); err != nil {
			return "", err
		}
		meta.Starts = append(meta.Starts, int64(start))
		start = end
	}
	mb, _ := json.Marshal(meta)
	if err := put(id+".m", mb); err != nil {
		return "", err
	}
	return id, nil
}

// searchSessions answers sessions.search over the shards, in one shard's
// order of checks (docs/search.md#request-validation-order): cursor, then
// the compile budget, then the index.
func (f *fanout) searchSessions(ctx context.Context, req *wire.Request, body []byte) ([]byte, error) {
	key, err := f.cursorKey(ctx)
	if err != nil {
		return nil, err
	}
	if req.Cursor != "" {
		return f.continueSessions(ctx, req, key)
	}
	if err := wire.CheckSearchBudget(req); err != nil {
		return nil, err
	}
	_, lineage, err := f.point(ctx, 0)
	if err != nil {
		return nil, err
	}
	fields, err := wire.DecodeObject(body)
	if err != nil {
		return nil, err
	}
	stats, err := f.corpusStats(ctx, req)
	if err != nil {
		return nil, err
	}
	sctx := withOutgoingHeader(ctx, nats.Header{wire.CorpusStatsHeader: []string{string(stats)}})
	rankings := make([]wire.SessionRanking, len(f.tokens))
	err = f.each(ctx, func(_ context.Context, i int) error {
		m := consistency(req, 0)
		m["query"] = req.Query
		for _, k := range []string{"sessionFilters", "eventFilters"} {
			if v, ok := fields[k]; ok {
				m[k] = v
			}
		}
		r := &rankings[i]
		if err := f.askJSON(sctx, i, wire.EndpointSessionsRank, m, r); err != nil {
			return err
		}
		for c := range r.Chunks {
			var chunk []wire.RankedSession
			if err := f.loadStored(ctx, fmt.Sprintf("%s.%d", r.Stored, c), &chunk); err != nil {
				return err
			}
			r.Keys = append(r.Keys, chunk...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var all []wire.RankedSession
	truncated := false
	maxResults := math.MaxInt
	gen := uint64(math.MaxUint64)
	for _, r := range rankings {
		all = append(all, r.Keys...)
		truncated = truncated || r.More
		maxResults, gen = min(maxResults, r.MaxResults), min(gen, r.Generation)
	}
	slices.SortFunc(all, func(a, b wire.RankedSession) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(b.Time, a.Time), cmp.Compare(a.SessionID, b.SessionID))
	})
	if len(all) > maxResults {
		all, truncated = all[:maxResults], true
	}
	keys := make([]storedKey, 0, len(all))
	sessions := []string{}
	for _, k := range all {
		if !k.Drop {
			keys = append(keys, storedKey{SessionID: k.SessionID, Seq: k.Seq, Gen: k.Gen, Live: k.Live})
			sessions = append(sessions, k.SessionID)
		}
	}
	page := dshq.SessionSearchPage{Items: []dshq.SessionSearchHit{}, Generation: gen}
	items, used, _, err := f.searchPage(ctx, req, page, keys[:min(len(keys), req.Limit)], nil, 0, req.MinGeneration)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 && len(keys) > 0 {
		return nil, dshq.Errorf(dshq.CodeReplyTooLarge, "%s: a single item is larger than the reply limit", req.Endpoint)
	}
	page.Items = items
	if used < len(keys) || truncated {
		id, err := f.storeKeys(ctx, keys, used, storedSearch{Sessions: sessions, Truncated: truncated, MaxResults: maxResults})
		if err != nil {
			return nil, err
		}
		c := wire.NewCursor(key, req, gen, lineage)
		c.Store, c.Bound = id, int64(len(keys))
		page.NextCursor = c.At(int64(used))
	}
	return wire.EncodeReply(page)
}

// continueSessions serves a later page from the stored merge.
func (f *fanout) continueSessions(ctx context.Context, req *wire.Request, key wire.CursorKey) ([]byte, error) {
	c, err := wire.DecodeCursor(key, req)
	if err != nil {
		return nil, err
	}
	_, lineage, err := f.point(ctx, 0)
	if err != nil {
		return nil, err
	}
	if c.Epoch != lineage {
		return nil, dshq.Errorf(dshq.CodeStaleCursor, "cursor is stale because the projection was rebuilt from another stream or by another version")
	}
	if err := wire.CheckSearchBudget(req); err != nil {
		return nil, err
	}
	if c.Store == "" || c.Position > c.Bound {
		return nil, dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: offset out of range")
	}
	var meta storedSearch
	if err := f.loadStored(ctx, c.Store+".m", &meta); err != nil {
		return nil, err
	}
	if c.Position == c.Bound {
		if meta.Truncated {
			return nil, dshq.Errorf(dshq.CodeReplyTooLarge,
				"%s matched more than %d results, and only the first %d can be paged as of the first page; narrow the query or add filters",
				req.Endpoint, meta.MaxResults, meta.MaxResults)
		}
		return nil, dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: offset out of range")
	}
	if !meta.Keys {
		return nil, dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: its stored results are unreadable")
	}
	// The stored run from the cursor's position, up to a page.
	k := sort.Search(len(meta.Starts), func(i int) bool { return meta.Starts[i] > c.Position }) - 1
	if k < 0 {
		return nil, dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: offset out of range")
	}
	var keys []storedKey
	for pos := c.Position; k < len(meta.Starts) && len(keys) < req.Limit; k++ {
		var chunk []storedKey
		if err := f.loadStored(ctx, fmt.Sprintf("%s.%d", c.Store, k), &chunk); err != nil {
			return nil, err
		}
		for i := pos - meta.Starts[k]; i >= 0 && i < int64(len(chunk)) && len(keys) < req.Limit; i++ {
			keys = append(keys, chunk[i])
			pos++
		}
	}
	page := dshq.SessionSearchPage{Items: []dshq.SessionSearchHit{}}
	items, used, gen, err := f.searchPage(ctx, req, page, keys, meta.Sessions, c.Generation, max(req.MinGeneration, c.Generation))
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, dshq.Errorf(dshq.CodeReplyTooLarge, "%s: a single item is larger than the reply limit", req.Endpoint)
	}
	page.Items, page.Generation = items, gen
	if pos := c.Position + int64(used); pos < c.Bound || meta.Truncated {
		page.NextCursor = c.At(pos)
	}
	return wire.EncodeReply(page)
}

// searchPage asks every shard for the hits of its keys (and, for a later
// page, the stale check of its sessions since the first page's
// generation) and returns the hits that fit a page in order, how many
// keys they used (a key that no longer resolves is passed over, as on one
// shard) and the least generation of the shards' answers. A shard answers
// a prefix of its keys, as many as fit its reply: the page, which holds
// those and more, ends before the first key past it.
func (f *fanout) searchPage(ctx context.Context, req *wire.Request, page dshq.SessionSearchPage, keys []storedKey, check []string,
	since, minGen uint64) ([]dshq.SessionSearchHit, int, uint64, error) {
	n := len(f.tokens)
	byShard := make([][]storedKey, n)
	checkBy := make([][]string, n)
	for _, k := range keys {
		i := dshq.ShardOf(k.SessionID, n)
		byShard[i] = append(byShard[i], k)
	}
	for _, id := range check {
		i := dshq.ShardOf(id, n)
		checkBy[i] = append(checkBy[i], id)
	}
	hits := make([][]*dshq.SessionSearchHit, n)
	gens := make([]uint64, n)
	var mu sync.Mutex
	err := f.each(ctx, func(ctx context.Context, i int) error {
		m := consistency(req, minGen)
		m["query"] = req.Query
		m["keys"] = append([]storedKey{}, byShard[i]...)
		m["sessionIds"] = append([]string{}, checkBy[i]...)
		m["since"] = since
		var out wire.SessionHits
		if err := f.askJSON(ctx, i, wire.EndpointSessionsHits, m, &out); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		hits[i], gens[i] = out.Items, out.Generation
		return nil
	})
	if err != nil {
		return nil, 0, 0, err
	}
	gen := slices.Min(gens)
	page.Generation = gen
	used := wire.EncodedLen(page) + listCursorReserve
	next := make([]int, n)
	items := []dshq.SessionSearchHit{}
	taken := 0
	for _, k := range keys {
		i := dshq.ShardOf(k.SessionID, n)
		if next[i] >= len(hits[i]) {
			break
		}
		h := hits[i][next[i]]
		next[i]++
		if h != nil {
			sz := wire.EncodedLen(*h)
			if used+sz+1 > f.budget {
				break
			}
			used += sz + 1
			items = append(items, *h)
		}
		taken++
	}
	return items, taken, gen, nil
}
