// Package shards is the engine.Source of a partitioned projection: it asks
// the projection's shards (dsh.proj.<i>of<n>.v1, each a projector's engine
// behind shardhost.ServeShard) over NATS, so that one Engine answers the
// query API over the whole corpus by the rules it answers one projection
// by (docs/protocol.md, "Partitioned projections"). A request of one
// session is handed whole to the shard that holds it (dshq.ShardOf; the
// engine's Router); a point lookup goes to the session's shard; the list
// is a k-way merge of the shards' pages; the children of a whole level of
// a lineage are asked of every shard at once; a session search asks every
// shard for its statistics, ranks on each with their sums, and merges the
// rankings, the merge stored by the Engine as it stores its own. The
// dsh-query service of a partitioned projection is the wire (package
// query) over an Engine over this source.
package shards

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// Source is the engine.Source of a projection partitioned into shards. It
// is safe for concurrent use.
type Source struct {
	conns []*query.ShardConn
	// store reads the rankings a shard stores when they exceed a reply.
	store engine.CursorStore
	// key is the deployment's cursor key, which the shards' list cursors
	// are issued with.
	key func(ctx context.Context) (wire.CursorKey, error)
}

// New follows the replicas of the n shards of a partitioned projection on
// nc. store is the cursor bucket (BindKVCursorStore), key the deployment's
// cursor key (ReadCursorKey): the engine over the source is given the
// same. Close stops following the replicas.
func New(nc *nats.Conn, n int, store engine.CursorStore, key func(ctx context.Context) (wire.CursorKey, error)) (*Source, error) {
	if n < 2 || n > dshq.MaxShards {
		return nil, fmt.Errorf("%d shards: a partitioned projection has 2 to %d", n, dshq.MaxShards)
	}
	s := &Source{store: store, key: key}
	for i := range n {
		c, err := query.DialShard(nc, dshq.ShardToken(i, n))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.conns = append(s.conns, c)
	}
	return s, nil
}

// Close stops following the shards' replicas.
func (s *Source) Close() {
	for _, c := range s.conns {
		c.Close()
	}
}

// Searchable is true: every shard has an index.
func (s *Source) Searchable() bool { return true }

// View calls fn with a snapshot at the generation every shard has reached
// (the least of the furthest replica of each), at least minGeneration, of
// the lineage they share. A shard with no replica known is missing: the
// answer would not be whole, so the request fails.
func (s *Source) View(ctx context.Context, minGeneration uint64, fn func(engine.Snapshot) error) error {
	gen := uint64(math.MaxUint64)
	lineage := ""
	for i, c := range s.conns {
		g, l, ok := c.Furthest(ctx)
		if !ok {
			return dshq.Errorf(dshq.CodePersistenceFailed, "projection shard %s is not available", c.Token())
		}
		if i > 0 && l != lineage {
			return dshq.Errorf(dshq.CodePersistenceFailed,
				"projection shards %s and %s are of different lineages (a shard is being rebuilt from another stream or by another version)", s.conns[0].Token(), c.Token())
		}
		gen, lineage = min(gen, g), l
	}
	return fn(&snapshot{src: s, ctx: ctx, gen: max(gen, minGeneration), lineage: lineage, minGen: minGeneration, live: map[string]bool{}})
}

// Route hands a request of one session to the shard that holds it; the
// first page of an events.search ranks with the whole corpus's statistics.
func (s *Source) Route(ctx context.Context, req *wire.Request) ([]byte, error) {
	ctx, cancel := bound(ctx, req.TimeoutMs)
	defer cancel()
	var header nats.Header
	if req.Endpoint == wire.EndpointEventsSearch && req.Cursor == "" {
		st, err := s.corpusStats(ctx, req.Query, req.MinGeneration, req.TimeoutMs)
		if err != nil {
			return nil, err
		}
		header = statsHeader(st)
	}
	return s.conns[s.shardOf(req.SessionID)].Ask(ctx, req, req.Body, header)
}

func (s *Source) shardOf(id string) int { return dshq.ShardOf(id, len(s.conns)) }

// bound bounds ctx, when it has no deadline, by a request's wait and the
// time its answer takes to come back.
func bound(ctx context.Context, timeoutMs int) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond+10*time.Second)
}

func statsHeader(st dshq.CorpusStats) nats.Header {
	b, _ := json.Marshal(st)
	return nats.Header{wire.CorpusStatsHeader: []string{string(b)}}
}

// ask asks shard i for endpoint with the request fields (and the
// consistency fields minGeneration and timeoutMs) and decodes its reply
// into out.
func (s *Source) ask(ctx context.Context, i int, endpoint string, fields map[string]any, minGen uint64, timeoutMs int, header nats.Header, out any) error {
	fields["timeoutMs"] = timeoutMs
	if minGen > 0 {
		fields["minGeneration"] = minGen
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	req, err := wire.DecodeRequest(endpoint, body)
	if err != nil {
		return err
	}
	ctx, cancel := bound(ctx, timeoutMs)
	defer cancel()
	reply, err := s.conns[i].Ask(ctx, req, body, header)
	if err != nil {
		return err
	}
	return decodeReply(s.conns[i].Token(), endpoint, reply, out)
}

// decodeReply decodes shard token's reply to endpoint into out.
func decodeReply(token, endpoint string, reply []byte, out any) error {
	if err := json.Unmarshal(reply, out); err != nil {
		return &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s: undecodable %s reply: %v", token, endpoint, err)}
	}
	return nil
}

// each runs fn for every shard at once and returns the first failure, in
// shard order.
func (s *Source) each(fn func(i int) error) error {
	errs := make([]error, len(s.conns))
	var wg sync.WaitGroup
	for i := range s.conns {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// corpusStats asks every shard for its BM25 statistics of phrase and
// returns their sums: what one index of the whole corpus ranks with.
func (s *Source) corpusStats(ctx context.Context, phrase string, minGen uint64, timeoutMs int) (dshq.CorpusStats, error) {
	var (
		mu  sync.Mutex // guards sum
		sum = dshq.CorpusStats{Terms: map[string]uint64{}}
	)
	err := s.each(func(i int) error {
		var out wire.CorpusStatsReply
		if err := s.ask(ctx, i, wire.EndpointCorpusStats, map[string]any{"query": phrase}, minGen, timeoutMs, nil, &out); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		sum.Add(out.Stats)
		return nil
	})
	return sum, err
}

// snapshot is one request's view of the shards.
type snapshot struct {
	src *Source
	// ctx bounds the snapshot's requests (the engine's wait).
	ctx     context.Context
	gen     uint64
	lineage string
	minGen  uint64

	mu   sync.Mutex // guards live
	live map[string]bool
}

func (sn *snapshot) Generation() uint64 { return sn.gen }
func (sn *snapshot) Lineage() string    { return sn.lineage }

// timeoutMs is what is left of the snapshot's wait, for the shards'.
func (sn *snapshot) timeoutMs() int {
	d, ok := sn.ctx.Deadline()
	if !ok {
		return dshq.DefaultTimeoutMs
	}
	return int(min(max(time.Until(d).Milliseconds(), 1), dshq.MaxTimeoutMs))
}

func (sn *snapshot) ask(i int, endpoint string, fields map[string]any, header nats.Header, out any) error {
	return sn.src.ask(sn.ctx, i, endpoint, fields, sn.minGen, sn.timeoutMs(), header, out)
}

// info is a session's record as a dshq.SessionInfo (its liveness noted for
// IsLive): what the engine reads of a session another engine holds.
func (sn *snapshot) info(rec dshq.SessionRecord) dshq.SessionInfo {
	sn.mu.Lock()
	sn.live[rec.Header.ID] = rec.Live
	sn.mu.Unlock()
	return dshq.SessionInfo{Header: dshq.HeaderRecord{Header: rec.Header}, Tenant: rec.Tenant, OrderKey: orderKey(rec.Header),
		LastStepStart: -1, InvalidFrom: -1}
}

func (sn *snapshot) IsLive(id string) bool {
	sn.mu.Lock()
	defer sn.mu.Unlock()
	return sn.live[id]
}

// LiveSessions is nil: each shard resolves the availability of its own
// sessions, and its rankings say which are live.
func (sn *snapshot) LiveSessions() []string { return nil }

// Session asks the session's shard for its record.
func (sn *snapshot) Session(id string) (dshq.SessionInfo, bool, error) {
	var st dshq.SessionStat
	err := sn.ask(sn.src.shardOf(id), wire.EndpointSessionsStat, map[string]any{"sessionId": id}, nil, &st)
	if dshq.ErrorCode(err) == dshq.CodeSessionNotFound {
		return dshq.SessionInfo{}, false, nil
	}
	if err != nil {
		return dshq.SessionInfo{}, false, err
	}
	info := sn.info(st.Session)
	info.EventCount, info.Title = st.EventCount, st.Title
	info.Header.InheritedEventCount = st.InheritedEventCount
	if st.InvalidFromSeq != nil {
		info.InvalidFrom, info.InvalidReason = *st.InvalidFromSeq, st.InvalidReason
	}
	if st.LastStepStartSeq != nil {
		info.LastStepStart = *st.LastStepStartSeq
	}
	return info, true, nil
}

// Lookup asks each shard for the titles of the ids it holds, all at once.
func (sn *snapshot) Lookup(ids []string) (map[string]dshq.SessionInfo, error) {
	byShard := make([][]string, len(sn.src.conns))
	for _, id := range ids {
		i := sn.src.shardOf(id)
		byShard[i] = append(byShard[i], id)
	}
	var mu sync.Mutex // guards out
	out := make(map[string]dshq.SessionInfo, len(ids))
	err := sn.src.each(func(i int) error {
		if len(byShard[i]) == 0 {
			return nil
		}
		var titles dshq.SessionTitles
		if err := sn.ask(i, wire.EndpointSessionsTitles, map[string]any{"sessionIds": byShard[i]}, nil, &titles); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, it := range titles.Items {
			if it.Value != nil {
				out[it.SessionID] = dshq.SessionInfo{Header: dshq.HeaderRecord{Header: it.Value.Session}, Title: it.Value.Title,
					LastStepStart: -1, InvalidFrom: -1}
			}
		}
		return nil
	})
	return out, err
}

// Children asks every shard for the children it holds of ids, at once.
func (sn *snapshot) Children(ids []string) (map[string][]dshq.SessionInfo, error) {
	var mu sync.Mutex // guards out
	out := map[string][]dshq.SessionInfo{}
	err := sn.src.each(func(i int) error {
		var kids wire.SessionChildren
		if err := sn.ask(i, wire.EndpointSessionsChildren, map[string]any{"sessionIds": ids}, nil, &kids); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, it := range kids.Items {
			for _, k := range it.Children {
				out[it.SessionID] = append(out[it.SessionID], sn.info(k))
			}
		}
		return nil
	})
	return out, err
}

// part is one shard's part of a merged list.
type part struct {
	items []dshq.SessionRecord
	next  string // the shard's nextCursor: it has more after items
}

// Sessions merges the shards' pages of sessions.filter in list order
// (createdAt desc, id asc): every shard is asked the same page (a cursor
// of the scan's generation and key), and asked again when its part runs
// out and it has more, before the page is full; past the scan's limit,
// ErrMore says that more follow without asking.
func (sn *snapshot) Sessions(scan engine.Scan) iter.Seq2[dshq.SessionInfo, error] {
	return func(yield func(dshq.SessionInfo, error) bool) {
		key, err := sn.src.key(sn.ctx)
		if err != nil {
			yield(dshq.SessionInfo{}, err)
			return
		}
		filters := scan.Filters
		if filters == nil {
			filters = []dshq.Filter{}
		}
		fields := func() map[string]any { return map[string]any{"filters": filters, "limit": scan.Limit} }
		// The shards' cursors: a first page's of the scan's generation,
		// continued after the scan's key.
		body, _ := json.Marshal(fields())
		sub, err := wire.DecodeRequest(wire.EndpointSessionsFilter, body)
		if err != nil {
			yield(dshq.SessionInfo{}, err)
			return
		}
		c := wire.NewCursor(key, sub, scan.AsOf, sn.lineage)
		c.Key = scan.After
		first := c.At(0)
		parts := make([]part, len(sn.src.conns))
		fetch := func(i int, cursor string) error {
			f := fields()
			f["cursor"] = cursor
			var page dshq.SessionPage
			if err := sn.ask(i, wire.EndpointSessionsFilter, f, nil, &page); err != nil {
				return err
			}
			parts[i] = part{items: page.Items, next: page.NextCursor}
			return nil
		}
		if err := sn.src.each(func(i int) error { return fetch(i, first) }); err != nil {
			yield(dshq.SessionInfo{}, err)
			return
		}
		for n := 0; ; n++ {
			if n == scan.Limit {
				for _, p := range parts {
					if len(p.items) > 0 || p.next != "" {
						yield(dshq.SessionInfo{}, engine.ErrMore)
						return
					}
				}
				return
			}
			best := -1
			var bestKey []byte
			for i := range parts {
				if len(parts[i].items) == 0 && parts[i].next != "" {
					// This shard's part ran out but it has more: its next
					// items may come before any other's.
					if err := fetch(i, parts[i].next); err != nil {
						yield(dshq.SessionInfo{}, err)
						return
					}
				}
				if len(parts[i].items) == 0 {
					continue
				}
				k := orderKey(parts[i].items[0].Header)
				if best < 0 || bytes.Compare(k, bestKey) < 0 {
					best, bestKey = i, k
				}
			}
			if best < 0 {
				return
			}
			rec := parts[best].items[0]
			parts[best].items = parts[best].items[1:]
			if !yield(sn.info(rec), nil) {
				return
			}
		}
	}
}

// orderKey is a session's key in list order: createdAt descending, then
// id ascending (the projection's bycreated key, which list cursors carry).
func orderKey(h dshq.Header) []byte {
	v := uint64(h.CreatedAt) ^ (1 << 63)
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(h.ID)), math.MaxUint64-v)
	return append(k, h.ID...)
}

// errRouted: the engine hands every request that reads a session's events
// to the session's shard (Source.Route), never to these.
var errRouted = errors.New("a partitioned projection's events are read by the shard that holds them")

func (sn *snapshot) Event(string, int64) (dshq.StoredEvent, bool, error) {
	return dshq.StoredEvent{}, false, errRouted
}

func (sn *snapshot) Events(string, int64) iter.Seq2[dshq.StoredEvent, error] {
	return func(yield func(dshq.StoredEvent, error) bool) { yield(dshq.StoredEvent{}, errRouted) }
}

func (sn *snapshot) SurfaceSeqs(string) ([]int64, error)        { return nil, errRouted }
func (sn *snapshot) Closers(string) ([]dshq.StoredEvent, error) { return nil, errRouted }

func (sn *snapshot) Index() engine.Index { return shardsIndex{sn} }

// shardsIndex is the index of the whole corpus: every shard's.
type shardsIndex struct{ sn *snapshot }

func (x shardsIndex) CorpusStats(ctx context.Context, phrase string) (dshq.CorpusStats, error) {
	return x.sn.src.corpusStats(ctx, phrase, x.sn.minGen, x.sn.timeoutMs())
}

// RankSessionKeys asks every shard for its session ranking with the
// corpus's statistics (sessions.rank) and merges them in the order one
// index gives (score desc, then the best event's time desc, then session
// id asc), cut to the shards' max results. Each shard checked its keys
// against its snapshot: the ranking is Exact.
func (x shardsIndex) RankSessionKeys(ctx context.Context, q engine.SearchQuery) (engine.Ranked, error) {
	sn := x.sn
	st := q.Stats
	if st == nil {
		sum, err := x.CorpusStats(ctx, q.Phrase)
		if err != nil {
			return engine.Ranked{}, err
		}
		st = &sum
	}
	header := statsHeader(*st)
	rankings := make([]wire.SessionRanking, len(sn.src.conns))
	err := sn.src.each(func(i int) error {
		f := map[string]any{"query": q.Phrase}
		if q.SessionFilters != nil {
			f["sessionFilters"] = q.SessionFilters
		}
		if q.EventFilters != nil {
			f["eventFilters"] = q.EventFilters
		}
		r := &rankings[i]
		if err := sn.src.ask(ctx, i, wire.EndpointSessionsRank, f, sn.minGen, sn.timeoutMs(), header, r); err != nil {
			return err
		}
		if r.Stored == "" {
			return nil
		}
		stored, err := engine.LoadRanking(ctx, sn.src.store, r.Stored, r.Chunks)
		r.Keys = append(r.Keys, stored...)
		return err
	})
	if err != nil {
		return engine.Ranked{}, err
	}
	var all []wire.RankedSession
	out := engine.Ranked{MaxResults: math.MaxInt, Exact: true, Generation: sn.gen}
	for _, r := range rankings {
		all = append(all, r.Keys...)
		out.More = out.More || r.More
		out.MaxResults = min(out.MaxResults, r.MaxResults)
	}
	slices.SortFunc(all, func(a, b wire.RankedSession) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(b.Time, a.Time), cmp.Compare(a.SessionID, b.SessionID))
	})
	if len(all) > out.MaxResults {
		all, out.More = all[:out.MaxResults], true
	}
	for _, k := range all {
		if !k.Drop {
			out.Keys = append(out.Keys, engine.HitKey{SessionID: k.SessionID, Seq: k.Seq, Gen: k.Gen, Live: k.Live, Score: k.Score, Time: k.Time})
		}
	}
	return out, nil
}

// RankEventKeys is never asked: an events.search is routed whole.
func (x shardsIndex) RankEventKeys(context.Context, engine.SearchQuery) (engine.Ranked, error) {
	return engine.Ranked{}, errRouted
}

// LoadHits is never asked: the shards build their hits (SessionHits).
func (x shardsIndex) LoadHits(context.Context, string, []engine.HitKey, int) ([]dshq.EventSearchHit, error) {
	return nil, errRouted
}

// SessionHits asks every shard for the hits of its keys (sessions.hits),
// and for a later page the stale check of its counted sessions since the
// first page's generation. A shard answers a prefix of its keys, as many
// as fit its reply: the answered run ends before the first key past it.
func (x shardsIndex) SessionHits(ctx context.Context, phrase string, keys []engine.HitKey, counted []string, since uint64) ([]*dshq.SessionSearchHit, int, error) {
	sn := x.sn
	n := len(sn.src.conns)
	byShard := make([][]engine.HitKey, n)
	checkBy := make([][]string, n)
	for _, k := range keys {
		i := sn.src.shardOf(k.SessionID)
		byShard[i] = append(byShard[i], k)
	}
	for _, id := range counted {
		i := sn.src.shardOf(id)
		checkBy[i] = append(checkBy[i], id)
	}
	hits := make([][]*dshq.SessionSearchHit, n)
	err := sn.src.each(func(i int) error {
		f := map[string]any{"query": phrase, "keys": append([]engine.HitKey{}, byShard[i]...),
			"sessionIds": append([]string{}, checkBy[i]...), "since": since}
		var out wire.SessionHits
		if err := sn.src.ask(ctx, i, wire.EndpointSessionsHits, f, sn.minGen, sn.timeoutMs(), nil, &out); err != nil {
			return err
		}
		hits[i] = out.Items
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	built := make([]*dshq.SessionSearchHit, len(keys))
	next := make([]int, n)
	for j, k := range keys {
		i := sn.src.shardOf(k.SessionID)
		if next[i] >= len(hits[i]) {
			return built, j, nil
		}
		built[j] = hits[i][next[i]]
		next[i]++
	}
	return built, len(keys), nil
}
