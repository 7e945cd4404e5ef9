package query

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
)

// WithShards makes the service ask a projection partitioned into n shards
// (docs/cluster.md, "Partitioned projectors"): dsh.proj.<i>of<n>.v1 for i
// in 0..n-1. A request of one session goes to the shard that holds it
// (dshq.ShardOf); lists, titles and lineages are asked of every shard
// and merged so that the reply is the one an unpartitioned projection
// gives. n < 2 is an unpartitioned projection. A partitioned service needs
// the deployment's cursor key (WithCursorKey): it issues the cursors of
// the lists it merges.
func WithShards(n int) ServiceOption { return func(c *serviceConfig) { c.shards = n } }

// WithCursorKey sets the deployment's cursor key, which a partitioned
// service (WithShards) needs to issue and read list cursors.
func WithCursorKey(k CursorKey) ServiceOption { return func(c *serviceConfig) { c.cursorKey = k } }

// WithCursorKeyFrom makes a partitioned service (WithShards) read the
// deployment's cursor key from the key bucket (dshq.KeyBucket, which the
// first projector creates) when it first needs it: until a projector has
// created it, lists fail with SESSION_QUERY_PERSISTENCE_FAILED.
func WithCursorKeyFrom(js jetstream.JetStream) ServiceOption {
	return func(c *serviceConfig) { c.keyJS = js }
}

// cursorKey returns the deployment's cursor key.
func (f *fanout) cursorKey(ctx context.Context) (CursorKey, error) {
	f.keyMu.Lock()
	defer f.keyMu.Unlock()
	if f.key != nil {
		return f.key, nil
	}
	fail := func(err error) error {
		return &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("the deployment's cursor key (%s in %s) cannot be read: %v", dshq.CursorKeyName, dshq.KeyBucket, err)}
	}
	kv, err := f.keyJS.KeyValue(ctx, dshq.KeyBucket)
	if err != nil {
		return nil, fail(err)
	}
	e, err := kv.Get(ctx, dshq.CursorKeyName)
	if err != nil {
		return nil, fail(err)
	}
	k := CursorKey(e.Value())
	if err := k.Check(); err != nil {
		return nil, fail(err)
	}
	f.key = k
	return k, nil
}

// fanout answers the query API over a partitioned projection.
type fanout struct {
	nc     *nats.Conn
	tokens []string
	tables []*replicaTable
	budget int

	keyJS jetstream.JetStream
	keyMu sync.Mutex // guards key
	key   CursorKey

	kvMu sync.Mutex // guards kv
	kv   jetstream.KeyValue
}

func newFanout(nc *nats.Conn, cfg serviceConfig) (*fanout, error) {
	if cfg.shards > dshq.MaxShards {
		return nil, fmt.Errorf("%d shards: at most %d", cfg.shards, dshq.MaxShards)
	}
	if cfg.cursorKey == nil && cfg.keyJS == nil {
		return nil, errors.New("a partitioned query service needs the deployment's cursor key (WithCursorKey or WithCursorKeyFrom)")
	}
	if cfg.cursorKey != nil {
		if err := cfg.cursorKey.Check(); err != nil {
			return nil, err
		}
	}
	f := &fanout{nc: nc, key: cfg.cursorKey, keyJS: cfg.keyJS, budget: ReplyBudget(nc)}
	for i := range cfg.shards {
		tok := dshq.ShardToken(i, cfg.shards)
		t, err := followReplicas(nc, tok)
		if err != nil {
			f.close()
			return nil, fmt.Errorf("follow the replicas of shard %s: %w", tok, err)
		}
		f.tokens, f.tables = append(f.tokens, tok), append(f.tables, t)
	}
	return f, nil
}

func (f *fanout) close() {
	for _, t := range f.tables {
		t.close()
	}
}

// answer is the service's Answer.
func (f *fanout) answer(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
	req, err := DecodeRequest(endpoint, body)
	if err != nil {
		return nil, err
	}
	wait := time.Duration(req.TimeoutMs)*time.Millisecond + 10*time.Second
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	switch endpoint {
	case EndpointSessionsList, EndpointSessionsFilter:
		return f.list(ctx, req, body)
	case EndpointSessionsTitles:
		return f.titles(ctx, req)
	case EndpointSessionsTrace:
		return f.trace(ctx, req)
	case EndpointSessionsSearch:
		return f.searchSessions(ctx, req, body)
	case EndpointUsageReport:
		return f.usageReport(ctx, req, body)
	case EndpointEventsSearch:
		if req.Cursor == "" {
			// A first page ranks: with the whole corpus's statistics.
			stats, err := f.corpusStats(ctx, req)
			if err != nil {
				return nil, err
			}
			ctx = withOutgoingHeader(ctx, nats.Header{CorpusStatsHeader: []string{string(stats)}})
		}
	}
	// One session's endpoint: its shard answers for it, as the whole
	// projection would (a session's records are all in its shard).
	return f.ask(ctx, dshq.ShardOf(req.SessionID, len(f.tokens)), endpoint, req, body)
}

// corpusStats asks every shard for its BM25 statistics of req's phrase
// and returns their sums (JSON): what one index of the whole corpus ranks
// with.
func (f *fanout) corpusStats(ctx context.Context, req *Request) ([]byte, error) {
	var (
		mu  sync.Mutex
		sum struct {
			Docs       uint64            `json:"docs"`
			TextLength uint64            `json:"textLength"`
			Terms      map[string]uint64 `json:"terms"`
		}
	)
	sum.Terms = map[string]uint64{}
	err := f.each(ctx, func(ctx context.Context, i int) error {
		m := consistency(req, 0)
		m["query"] = req.Query
		var out struct {
			Stats struct {
				Docs       uint64            `json:"docs"`
				TextLength uint64            `json:"textLength"`
				Terms      map[string]uint64 `json:"terms"`
			} `json:"stats"`
		}
		if err := f.askJSON(ctx, i, EndpointCorpusStats, m, &out); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		sum.Docs += out.Stats.Docs
		sum.TextLength += out.Stats.TextLength
		for t, n := range out.Stats.Terms {
			sum.Terms[t] += n
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(sum)
}

// ask sends a request of endpoint to a replica of shard i and returns its
// reply body, or its failure.
func (f *fanout) ask(ctx context.Context, i int, endpoint string, req *Request, body []byte) ([]byte, error) {
	return relay(ctx, f.nc, f.tables[i], f.tokens[i], endpoint, req, body, 0)
}

// askJSON asks shard i for endpoint with the request fields and decodes
// its reply into out.
func (f *fanout) askJSON(ctx context.Context, i int, endpoint string, fields map[string]any, out any) error {
	body, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	req, err := DecodeRequest(endpoint, body)
	if err != nil {
		return err
	}
	reply, err := f.ask(ctx, i, endpoint, req, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(reply, out); err != nil {
		return &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s: undecodable %s reply: %v", f.tokens[i], endpoint, err)}
	}
	return nil
}

// consistency returns the consistency fields of req for a sub-request.
func consistency(req *Request, minGen uint64) map[string]any {
	m := map[string]any{"timeoutMs": req.TimeoutMs}
	if g := max(req.MinGeneration, minGen); g > 0 {
		m["minGeneration"] = g
	}
	return m
}

// relay asks a replica of shard (forwardReplicas) and returns its answer
// (its failures as they are). wait, when not 0, is the bound ctx sets, named
// in the failure when it passes.
func relay(ctx context.Context, nc *nats.Conn, table *replicaTable, shard, endpoint string, req *Request, body []byte, wait time.Duration) ([]byte, error) {
	msg, err := forwardReplicas(ctx, nc, table, shard, endpoint, req, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s is not available", shard)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		within := "in time"
		if wait > 0 {
			within = "within " + wait.String()
		}
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s did not answer %s", shard, within)}
	case err != nil:
		return nil, &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
			Message: fmt.Sprintf("projection shard %s: %v", shard, err)}
	}
	if err := microhost.DecodeError(msg); err != nil {
		return nil, err
	}
	return msg.Data, nil
}

// point returns the generation every shard has reached (the least of the
// furthest replica of each), at least need, and the lineage they share: a
// merged list starts there. A shard with no replica known is missing: the
// answer would not be whole, so the request fails.
func (f *fanout) point(ctx context.Context, need uint64) (uint64, string, error) {
	gen := uint64(math.MaxUint64)
	lineage := ""
	for i, t := range f.tables {
		g, l, ok := t.furthest()
		if !ok {
			// A service that has just started has heard from no replica
			// yet: each announces itself every ReplicaStatusEvery.
			wait := time.NewTimer(replicaExpiry)
			select {
			case <-t.heard:
			case <-wait.C:
			case <-ctx.Done():
			}
			wait.Stop()
			g, l, ok = t.furthest()
		}
		if !ok {
			return 0, "", dshq.Errorf(dshq.CodePersistenceFailed, "projection shard %s is not available", f.tokens[i])
		}
		if i > 0 && l != lineage {
			return 0, "", dshq.Errorf(dshq.CodePersistenceFailed,
				"projection shards %s and %s are of different lineages (a shard is being rebuilt from another stream or by another version)", f.tokens[0], f.tokens[i])
		}
		gen, lineage = min(gen, g), l
	}
	return max(gen, need), lineage, nil
}

// furthest returns the generation and lineage of the replica furthest
// ahead; ok is false without replicas.
func (t *replicaTable) furthest() (gen uint64, lineage string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.reps {
		if !ok || e.st.Generation > gen {
			gen, lineage, ok = e.st.Generation, e.st.Lineage, true
		}
	}
	return gen, lineage, ok
}

// shardList is one shard's part of a merged list.
type shardList struct {
	items []dshq.SessionRecord
	next  string // the shard's nextCursor: it has more after items
}

// list answers sessions.list and sessions.filter: every shard is asked the
// same page (the cursor binds the first page's generation, which every
// shard has reached, and the last key returned), and the pages are merged
// in the list's order (createdAt desc, id asc), each shard asked again when
// its part runs out before the page is full: the page is the one an
// unpartitioned projection gives at that generation, its cursor the same.
func (f *fanout) list(ctx context.Context, req *Request, body []byte) ([]byte, error) {
	fields, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	key, err := f.cursorKey(ctx)
	if err != nil {
		return nil, err
	}
	cursor := req.Cursor
	if cursor == "" {
		gen, lineage, err := f.point(ctx, req.MinGeneration)
		if err != nil {
			return nil, err
		}
		cursor = NewCursor(key, req, gen, lineage).At(0)
	}
	parts := make([]shardList, len(f.tokens))
	gens := make([]uint64, len(f.tokens))
	fetch := func(i int, cur string) error {
		sub := make(map[string]json.RawMessage, len(fields)+1)
		for k, v := range fields {
			sub[k] = v
		}
		sub["cursor"], _ = json.Marshal(cur)
		b, _ := json.Marshal(sub)
		sr, err := DecodeRequest(req.Endpoint, b)
		if err != nil {
			return err
		}
		reply, err := f.ask(ctx, i, req.Endpoint, sr, b)
		if err != nil {
			return err
		}
		var page dshq.SessionPage
		if err := json.Unmarshal(reply, &page); err != nil {
			return &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
				Message: fmt.Sprintf("projection shard %s: undecodable %s reply: %v", f.tokens[i], req.Endpoint, err)}
		}
		parts[i] = shardList{items: page.Items, next: page.NextCursor}
		gens[i] = page.Generation
		return nil
	}
	if err := f.each(ctx, func(ctx context.Context, i int) error { return fetch(i, cursor) }); err != nil {
		return nil, err
	}
	withCursor := *req
	withCursor.Cursor = cursor
	c, err := DecodeCursor(key, &withCursor)
	if err != nil {
		return nil, err // the shards accepted it: cannot happen
	}
	// A later page is at the least generation of the shards that answered
	// it (each at least the first page's); the first is at the
	// generation its members were taken at (every shard past it).
	gen := slices.Min(gens)
	if req.Cursor == "" {
		gen = c.Generation
	}
	page := dshq.SessionPage{Items: []dshq.SessionRecord{}, Generation: gen}
	used := encodedLen(page) + listCursorReserve
	var lastKey []byte
	more := false
	for {
		if len(page.Items) == req.Limit {
			for _, p := range parts {
				more = more || len(p.items) > 0 || p.next != ""
			}
			break
		}
		best := -1
		var bestKey []byte
		for i := range parts {
			if len(parts[i].items) == 0 && parts[i].next != "" {
				// This shard's part ran out but it has more: its next
				// items may come before any other's.
				if err := fetch(i, parts[i].next); err != nil {
					return nil, err
				}
			}
			if len(parts[i].items) == 0 {
				continue
			}
			k := orderKey(parts[i].items[0])
			if best < 0 || bytes.Compare(k, bestKey) < 0 {
				best, bestKey = i, k
			}
		}
		if best < 0 {
			break
		}
		rec := parts[best].items[0]
		n := encodedLen(rec)
		if used+n+1 > f.budget {
			if len(page.Items) == 0 {
				return nil, dshq.Errorf(dshq.CodeReplyTooLarge, "%s: a single item is larger than the reply limit", req.Endpoint)
			}
			more = true
			break
		}
		used += n + 1
		page.Items = append(page.Items, rec)
		lastKey = bestKey
		parts[best].items = parts[best].items[1:]
	}
	if more {
		n := *c
		n.Key = lastKey
		page.NextCursor = n.At(0)
	}
	return EncodeReply(page)
}

// listCursorReserve is the room a list page keeps for its nextCursor, as
// the projection's own pages do.
const listCursorReserve = 2 << 10

// orderKey is a session's key in list order: createdAt descending, then
// id ascending (the projection's bycreated key, which list cursors carry).
func orderKey(r dshq.SessionRecord) []byte {
	v := uint64(r.Header.CreatedAt) ^ (1 << 63)
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(r.Header.ID)), math.MaxUint64-v)
	return append(k, r.Header.ID...)
}

// each runs fn for every shard at once and returns the first failure, in
// shard order.
func (f *fanout) each(ctx context.Context, fn func(ctx context.Context, i int) error) error {
	errs := make([]error, len(f.tokens))
	done := make(chan struct{})
	for i := range f.tokens {
		go func() {
			defer func() { done <- struct{}{} }()
			errs[i] = fn(ctx, i)
		}()
	}
	for range f.tokens {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// titles answers sessions.titles: each shard is asked for the ids it
// holds, the answers put back in the request's first-occurrence order.
func (f *fanout) titles(ctx context.Context, req *Request) ([]byte, error) {
	n := len(f.tokens)
	ids := make([][]string, n)
	seen := map[string]bool{}
	var order []string
	for _, id := range req.SessionIDs {
		if !seen[id] {
			seen[id] = true
			order = append(order, id)
			i := dshq.ShardOf(id, n)
			ids[i] = append(ids[i], id)
		}
	}
	results := map[string]dshq.TitleResult{}
	gens := make([]uint64, n)
	var mu sync.Mutex
	err := f.each(ctx, func(ctx context.Context, i int) error {
		if len(ids[i]) == 0 && !(len(order) == 0 && i == 0) {
			gens[i] = math.MaxUint64
			return nil
		}
		m := consistency(req, 0)
		m["sessionIds"] = append([]string{}, ids[i]...)
		var out dshq.SessionTitles
		if err := f.askJSON(ctx, i, EndpointSessionsTitles, m, &out); err != nil {
			return err
		}
		mu.Lock()
		for _, it := range out.Items {
			results[it.SessionID] = it
		}
		mu.Unlock()
		gens[i] = out.Generation
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := dshq.SessionTitles{Items: []dshq.TitleResult{}, Generation: slices.Min(gens)}
	for _, id := range order {
		out.Items = append(out.Items, results[id])
	}
	return f.bounded(req.Endpoint, out)
}

// bounded encodes a merged reply, refused as the projection refuses one
// over the reply budget.
func (f *fanout) bounded(endpoint string, v any) ([]byte, error) {
	b, err := EncodeReply(v)
	if err != nil {
		return nil, err
	}
	if len(b) > f.budget {
		return nil, dshq.Errorf(dshq.CodeReplyTooLarge, "%s reply would be %d bytes; the reply limit is %d bytes", endpoint, len(b), f.budget)
	}
	return b, nil
}

// stat returns session id's record from its shard; ok is false when no
// shard holds it.
func (f *fanout) stat(ctx context.Context, req *Request, id string) (dshq.SessionStat, bool, error) {
	m := consistency(req, 0)
	m["sessionId"] = id
	var st dshq.SessionStat
	err := f.askJSON(ctx, dshq.ShardOf(id, len(f.tokens)), EndpointSessionsStat, m, &st)
	if dshq.ErrorCode(err) == dshq.CodeSessionNotFound {
		return st, false, nil
	}
	return st, err == nil, err
}

// trace answers sessions.trace across the shards: the target and each
// ancestor from the shard that holds it, and the descendants a generation
// at a time, each shard asked for the children it holds
// (EndpointSessionsChildren). The reply is the unpartitioned projection's
// (docs/lineage.md#tracing-a-lineage).
func (f *fanout) trace(ctx context.Context, req *Request) ([]byte, error) {
	target, ok, err := f.stat(ctx, req, req.SessionID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, dshq.Errorf(dshq.CodeSessionNotFound, "session %s was not found", dshq.Quote(req.SessionID))
	}
	gen := target.Generation
	tr := dshq.LineageTrace{Target: target.Session, Ancestors: []dshq.SessionRecord{}}
	seen := map[string]bool{target.Session.Header.ID: true}
	for p := target.Session.Header.ParentSession; ; {
		if p == nil {
			root := tr.Target
			if n := len(tr.Ancestors); n > 0 {
				root = tr.Ancestors[n-1]
			}
			tr.Complete, tr.Root = true, &root
			break
		}
		if seen[*p] {
			return nil, dshq.Errorf(dshq.CodeInvalidLineage, "session lineage contains a cycle at %q", *p)
		}
		seen[*p] = true
		parent, ok, err := f.stat(ctx, req, *p)
		if err != nil {
			return nil, err
		}
		if !ok {
			tr.UnresolvedParentID = dshq.Str(*p)
			break
		}
		gen = min(gen, parent.Generation)
		tr.Ancestors = append(tr.Ancestors, parent.Session)
		p = parent.Session.Header.ParentSession
	}
	desc, g, err := f.descendants(ctx, req, target.Session.Header.ID)
	if err != nil {
		return nil, err
	}
	tr.Descendants, tr.Generation = desc, min(gen, g)
	return f.bounded(req.Endpoint, tr)
}

// descendants builds the forest under root as the projection does
// (siblings by createdAt asc, id asc; a forest whose records alone exceed
// four reply budgets refused early), asking every shard for the children
// of a whole generation of the forest at once.
func (f *fanout) descendants(ctx context.Context, req *Request, root string) ([]dshq.LineageNode, uint64, error) {
	children := map[string][]dshq.SessionRecord{}
	order := []string{root}
	seen := map[string]bool{root: true}
	size := 0
	gen := uint64(math.MaxUint64)
	for level := []string{root}; len(level) > 0; {
		kids := make([]map[string][]dshq.SessionRecord, len(f.tokens))
		gens := make([]uint64, len(f.tokens))
		err := f.each(ctx, func(ctx context.Context, i int) error {
			m := consistency(req, 0)
			m["sessionIds"] = level
			var out SessionChildren
			if err := f.askJSON(ctx, i, EndpointSessionsChildren, m, &out); err != nil {
				return err
			}
			kids[i] = map[string][]dshq.SessionRecord{}
			for _, it := range out.Items {
				kids[i][it.SessionID] = it.Children
			}
			gens[i] = out.Generation
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
		gen = min(gen, slices.Min(gens))
		var next []string
		for _, id := range level {
			var all []dshq.SessionRecord
			for i := range kids {
				all = append(all, kids[i][id]...)
			}
			slices.SortFunc(all, func(a, b dshq.SessionRecord) int {
				return cmp.Or(cmp.Compare(a.Header.CreatedAt, b.Header.CreatedAt), cmp.Compare(a.Header.ID, b.Header.ID))
			})
			kept := all[:0]
			for _, k := range all {
				if seen[k.Header.ID] {
					continue
				}
				seen[k.Header.ID] = true
				kept = append(kept, k)
				order = append(order, k.Header.ID)
				next = append(next, k.Header.ID)
				h := k.Header
				size += 150 + len(h.ID) + len(deref(h.Cwd)) + len(deref(h.ParentSession)) + len(deref(h.AgentPreset))
			}
			children[id] = kept
			if size > 4*f.budget {
				return nil, 0, dshq.Errorf(dshq.CodeReplyTooLarge, "lineage of session %q has more than %d descendants; its trace would exceed the reply limit of %d bytes", root, len(order)-1, f.budget)
			}
		}
		level = next
	}
	records := map[string]dshq.SessionRecord{}
	for _, kids := range children {
		for _, k := range kids {
			records[k.Header.ID] = k
		}
	}
	nodes := map[string]dshq.LineageNode{}
	for i := len(order) - 1; i >= 0; i-- {
		id := order[i]
		list := make([]dshq.LineageNode, 0, len(children[id]))
		for _, k := range children[id] {
			n := nodes[k.Header.ID]
			n.Session = records[k.Header.ID]
			list = append(list, n)
			delete(nodes, k.Header.ID)
		}
		nodes[id] = dshq.LineageNode{Descendants: list}
	}
	return nodes[root].Descendants, gen, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// EncodeReply encodes a reply as JSON without escaping <, > and &: a reply
// is not HTML, and the escapes would grow a raw event that holds them (up
// to six times) and change its bytes from those written. An event's raw
// record is therefore carried byte for byte. The projection's shard and a
// partitioned service's merges encode with it alike.
func EncodeReply(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func encodedLen(v any) int {
	b, _ := EncodeReply(v)
	return len(b)
}
