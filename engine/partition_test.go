package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bench"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/shardhost"
	"github.com/dshq/dshq/shards"
	"github.com/dshq/dshq/tools"
)

// partitionedStack is one stream projected twice: whole (shard "0", asked
// directly: what one shard answers) and partitioned into shards shards
// behind a partitioned query service (dsh.query.v1).
type partitionedStack struct {
	env        *testenv.Env
	whole      *query.Client
	parted     *query.Client
	projectors []*projection.Projector
	ids        []string
}

// partitionedMaxResults is the max search results of the engines of a
// partitioned stack: fewer than the sessions that match a common phrase.
const partitionedMaxResults = 30

// serveProjector opens and runs a projector of partition shard/shards and
// serves it as a replica of its shard, with more options.
func serveProjector(t *testing.T, env *testenv.Env, shard, shards int, more ...projection.Option) *projection.Projector {
	t.Helper()
	opts := append([]projection.Option{projection.WithDurable(dshq.ShardDurable(shard, shards))}, more...)
	if shards > 1 {
		opts = append(opts, projection.WithPartition(shard, shards))
	}
	p := env.StartProjector(t, opts...)
	ctx := context.Background()
	// Every engine of the stack, whole or a shard, pages at most
	// partitionedMaxResults results: a search matching more is cut where
	// one shard cuts it, so the merge's cut is compared too.
	eng, err := shardhost.NewShardEngine(ctx, env.JS, p, engine.WithMaxSearchResults(partitionedMaxResults))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := shardhost.ServeReplica(ctx, env.Conn, dshq.ShardToken(shard, shards), dshq.ShardDurable(shard, shards), eng,
		func() query.ReplicaStatus {
			pr := p.Progress()
			st := query.ReplicaStatus{Lineage: p.Lineage(), Generation: pr.Generation, CatchingUp: pr.CatchingUp}
			if shards > 1 {
				st.Shards = shards
			}
			return st
		}, query.WithLogger(testenv.Quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop shard: %v", err)
		}
	})
	return p
}

// writeCorpus writes the fixtures of testdata/ and a small generated
// corpus (forks and subagents included, so lineages cross shards) and
// returns the session ids.
func writeCorpus(t *testing.T, env *testenv.Env) []string {
	t.Helper()
	var ids []string
	files, _ := filepath.Glob("../testdata/logs/*.jsonl")
	files = append(files, "../testdata/sample.jsonl", "../testdata/fork.jsonl")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		vars := map[string]string{"cwd": "/work/" + name, "sessionId": "fx-" + name}
		var lines [][]byte
		for _, l := range bytes.Split(b, []byte("\n")) {
			lines = append(lines, record.Substitute(l, vars))
		}
		h, err := record.ParseHeader(bytes.Clone(lines[0]))
		if err != nil || slices.Contains(ids, h.Header.ID) {
			continue // a fixture of a bad header, or of a session already written
		}
		id, _ := env.PublishLog(t, bytes.Join(lines, []byte("\n")))
		ids = append(ids, id)
	}
	ids = append(ids, writeSkewedTerms(t, env)...)
	c, err := bench.GenerateCorpus(bench.CorpusConfig{Sessions: 60, Turns: 2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := bus.NewStore(ctx, env.Conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Sessions {
		var opts []bus.CreateOption
		if s.Header.IsSeeded {
			opts = append(opts, bus.WithInheritedEventCount(s.Inherited))
		}
		h, err := store.Create(ctx, s.Header, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range s.Batches {
			if _, err := h.Append(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.Header.ID)
	}
	return ids
}

func startPartitioned(t *testing.T, shards int) *partitionedStack {
	t.Helper()
	env := testenv.Start(t)
	st := &partitionedStack{env: env}
	st.ids = writeCorpus(t, env)
	st.projectors = append(st.projectors, serveProjector(t, env, 0, 1))
	for i := range shards {
		st.projectors = append(st.projectors, serveProjector(t, env, i, shards))
	}
	info, err := env.JS.Stream(context.Background(), dshq.SessionStream)
	if err != nil {
		t.Fatal(err)
	}
	last := info.CachedInfo().State.LastSeq
	for _, p := range st.projectors {
		testenv.WaitGeneration(t, p, last)
	}
	st.whole = query.NewClient(env.Conn, query.WithSubjectPrefix(dshq.ShardSubjectPrefix(dshq.DefaultShard)))
	st.parted = servePartitioned(t, env, shards)
	return st
}

// servePartitioned serves dsh-query as a partitioned projection's: the
// wire over an engine over its n shards.
func servePartitioned(t *testing.T, env *testenv.Env, n int) *query.Client {
	t.Helper()
	eng, src, err := shards.NewEngine(env.JS, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close) // after the service stops (cleanups run last first)
	return env.ServeQuery(t, query.WithEngine(eng))
}

// TestPartitionedAnswersLikeOneShard projects one corpus whole and
// partitioned into three shards and asks both every question of the
// endpoints a partitioned query service merges or routes: every reply
// (bodies and failures) must be byte for byte the same, cursors included.
func TestPartitionedAnswersLikeOneShard(t *testing.T) {
	st := startPartitioned(t, 3)
	ctx := context.Background()
	last := st.projectors[0].Generation()
	held := map[int]int{}
	for _, id := range st.ids {
		held[dshq.ShardOf(id, 3)]++
	}
	if len(held) != 3 {
		t.Fatalf("the corpus does not span the shards: %v", held)
	}
	asked, cut := 0, 0
	// askPair asks both the same question (each continuing its own
	// cursor, when given) and compares the replies.
	askPair := func(endpoint string, fields map[string]any, wantCursor, gotCursor string) (want, got []byte) {
		t.Helper()
		fields["minGeneration"] = last
		body := func(cursor string) []byte {
			f := maps.Clone(fields)
			if cursor != "" {
				f["cursor"] = cursor
			}
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		want, werr := st.whole.Raw(ctx, endpoint, body(wantCursor))
		got, gerr := st.parted.Raw(ctx, endpoint, body(gotCursor))
		asked++
		if endpoint == wire.EndpointSessionsSearch && dshq.ErrorCode(werr) == dshq.CodeReplyTooLarge {
			cut++ // paged to the max results
		}
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || dshq.ErrorCode(werr) != dshq.ErrorCode(gerr) {
			t.Fatalf("%s %s: partitioned failed with %v, one shard with %v", endpoint, body(gotCursor), gerr, werr)
		}
		if !bytes.Equal(withoutStoreName(t, want), withoutStoreName(t, got)) {
			t.Fatalf("%s %s:\npartitioned %s\none shard   %s", endpoint, body(gotCursor), got, want)
		}
		return want, got
	}
	ask := func(endpoint string, fields map[string]any) []byte {
		t.Helper()
		want, _ := askPair(endpoint, fields, "", "")
		return want
	}
	// page follows a paged endpoint to its end.
	page := func(endpoint string, fields map[string]any) {
		t.Helper()
		var wc, gc string
		for n := 0; ; n++ {
			want, got := askPair(endpoint, fields, wc, gc)
			wc, gc = replyCursor(want), replyCursor(got)
			if wc == "" {
				return
			}
			if n > 1000 {
				t.Fatalf("%s: no end of pages", endpoint)
			}
		}
	}
	for _, limit := range []int{1, 7, 100} {
		page(wire.EndpointSessionsList, map[string]any{"limit": limit})
	}
	page(wire.EndpointSessionsList, map[string]any{})
	for _, filters := range []string{
		`[]`,
		`[{"kind":"availability","values":["persisted"]}]`,
		`[{"kind":"parent","values":[null]}]`,
		fmt.Sprintf(`[{"kind":"id","values":[%q,%q,"nobody"]}]`, st.ids[0], st.ids[len(st.ids)-1]),
		`[{"kind":"created-at","from":1790000000000}]`,
	} {
		page(wire.EndpointSessionsFilter, map[string]any{"filters": json.RawMessage(filters), "limit": 5})
	}
	titles := append(slices.Clone(st.ids), "nobody", st.ids[0])
	ask(wire.EndpointSessionsTitles, map[string]any{"sessionIds": titles})
	ask(wire.EndpointSessionsTitles, map[string]any{"sessionIds": []string{}})
	for _, id := range append(slices.Clone(st.ids), "nobody") {
		ask(wire.EndpointSessionsTrace, map[string]any{"sessionId": id})
		ask(wire.EndpointSessionsStat, map[string]any{"sessionId": id})
		page(wire.EndpointSessionsRead, map[string]any{"sessionId": id, "limit": 50})
		page(wire.EndpointSessionsSurface, map[string]any{"sessionId": id, "limit": 50})
		page(wire.EndpointEventsList, map[string]any{"sessionId": id, "limit": 50})
		page(wire.EndpointEventsFilter, map[string]any{"sessionId": id, "filters": json.RawMessage(`[{"kind":"type","values":["user/message"]}]`), "limit": 3})
		ask(wire.EndpointEventsRead, map[string]any{"sessionId": id, "seq": 1, "before": 1, "after": 2})
		ask(wire.EndpointEventsTrace, map[string]any{"sessionId": id, "seq": 2})
	}
	// events.search ranks with the whole corpus's statistics: the same
	// scores and order as one shard, pages and cursors included.
	for _, id := range append(slices.Clone(st.ids), "nobody") {
		for _, q := range []string{"retry budget", "timeout", "重试 预算", "config parser", "the", "incident zeta00003", "nothing matches this"} {
			page(wire.EndpointEventsSearch, map[string]any{"sessionId": id, "query": q, "limit": 4})
		}
		page(wire.EndpointEventsSearch, map[string]any{"sessionId": id, "query": "kappa omega", "limit": 1})
		page(wire.EndpointEventsSearch, map[string]any{"sessionId": id, "query": "the", "limit": 2,
			"filters": json.RawMessage(`[{"kind":"type","values":["user/message","assistant/message"]}]`)})
	}
	// sessions.search ranks every shard's sessions with the whole
	// corpus's statistics and merges them: the same sessions in the same
	// order, hits, snippets, pages and cursors as one shard. "filler" and
	// "words" match sessions spread 6 : 20 over the shards with the same
	// text, which a shard's own statistics would rank by shard, not by
	// time and id.
	for _, q := range []string{"retry budget", "timeout", "重试 预算", "config parser", "the", "filler", "words",
		"kappa omega", "omega", "incident zeta00003", "nothing matches this"} {
		for _, limit := range []int{1, 3, 10, 50} {
			page(wire.EndpointSessionsSearch, map[string]any{"query": q, "limit": limit})
		}
	}
	for _, c := range []struct{ session, event string }{
		{`[]`, `[]`},
		{`[{"kind":"availability","values":["persisted"]}]`, `[]`},
		{`[{"kind":"availability","values":["live"]}]`, `[]`},
		{`[{"kind":"parent","values":[null]}]`, `[{"kind":"type","values":["user/message"]}]`},
		{fmt.Sprintf(`[{"kind":"id","values":[%q,%q,%q,"nobody"]}]`, st.ids[0], st.ids[len(st.ids)-1], skewedTarget), `[]`},
		{`[{"kind":"cwd","values":["/work/skew"]}]`, `[{"kind":"seq","from":0,"to":1}]`},
		{`[{"kind":"created-at","from":1790000000000}]`, `[]`},
		{`[]`, `[{"kind":"time","from":1700000000000,"to":1700000000001}]`},
		{`[{"kind":"id","values":[]}]`, `[]`},
	} {
		for _, q := range []string{"the", "filler", "retry"} {
			page(wire.EndpointSessionsSearch, map[string]any{"query": q, "limit": 4,
				"sessionFilters": json.RawMessage(c.session), "eventFilters": json.RawMessage(c.event)})
		}
	}
	if cut == 0 {
		t.Fatalf("no sessions.search matched more than the %d max results: the cut is not compared", partitionedMaxResults)
	}
	// Failures, alike: a bad cursor, another request's cursor, a cursor
	// past the end.
	sb := ask(wire.EndpointSessionsSearch, map[string]any{"query": "the", "limit": 2})
	sc := replyCursor(sb)
	if sc == "" {
		t.Fatalf("sessions.search: no cursor: %s", sb)
	}
	ask(wire.EndpointSessionsSearch, map[string]any{"query": "the", "limit": 2, "cursor": sc + "x"})
	ask(wire.EndpointSessionsSearch, map[string]any{"query": "words", "limit": 2, "cursor": sc})
	ask(wire.EndpointSessionsSearch, map[string]any{"query": "the", "limit": 2, "cursor": json.RawMessage(`7`)})

	// A cursor of one endpoint, or of another request, is refused alike.
	b := ask(wire.EndpointSessionsList, map[string]any{"limit": 2})
	var p dshq.SessionPage
	if err := json.Unmarshal(b, &p); err != nil || p.NextCursor == "" {
		t.Fatalf("no cursor: %s", b)
	}
	ask(wire.EndpointSessionsList, map[string]any{"limit": 3, "cursor": p.NextCursor})
	ask(wire.EndpointSessionsFilter, map[string]any{"filters": json.RawMessage(`[]`), "limit": 2, "cursor": p.NextCursor})
	ask(wire.EndpointSessionsList, map[string]any{"limit": 2, "cursor": p.NextCursor + "x"})
	t.Logf("%d questions, the same answers (sessions per shard %v)", asked, held)

	// The five tools, over each, answer alike.
	wholeTools, err := tools.New(tools.FromQueryClient(st.whole))
	if err != nil {
		t.Fatal(err)
	}
	partTools, err := tools.New(tools.FromQueryClient(st.parted))
	if err != nil {
		t.Fatal(err)
	}
	calls, failed := 0, 0
	for _, caller := range st.ids {
		for _, c := range []struct{ name, args string }{
			{"session_trace", `{}`},
			{"session_event_trace", `{"seq":2}`},
			{"session_event_read", `{"seq":1,"before":1,"after":1}`},
			{"session_event_search", `{"query":"retry budget"}`},
			{"session_event_search", fmt.Sprintf(`{"query":"the","session_id":%q}`, st.ids[len(st.ids)-1])},
			{"session_search", `{"query":"retry budget"}`},
			{"session_search", `{"query":"filler"}`},
		} {
			want, err := wholeTools.Call(ctx, tools.AsSession(caller), c.name, json.RawMessage(c.args))
			if err != nil {
				t.Fatal(err)
			}
			got, err := partTools.Call(ctx, tools.AsSession(caller), c.name, json.RawMessage(c.args))
			if err != nil {
				t.Fatal(err)
			}
			calls++
			if want.IsError {
				failed++
			}
			if got != want {
				t.Fatalf("%s %s as %s:\npartitioned %+v\none shard   %+v", c.name, c.args, caller, got, want)
			}
		}
	}
	if failed > calls/2 {
		t.Fatalf("%d of %d tool calls failed on one shard: the comparison would say little", failed, calls)
	}
	t.Logf("%d tool calls, the same results (%d of them failures, alike)", calls, failed)

	// A later page of sessions.search is stale once a session it counts
	// is reclassified (each shard checks the sessions it holds), and goes
	// on when none is: alike.
	fillerWant := ask(wire.EndpointSessionsSearch, map[string]any{"query": "filler", "limit": 2})
	fillerGot, err := st.parted.Raw(ctx, wire.EndpointSessionsSearch, []byte(fmt.Sprintf(`{"query":"filler","limit":2,"minGeneration":%d}`, last)))
	if err != nil {
		t.Fatal(err)
	}
	retryWant := ask(wire.EndpointSessionsSearch, map[string]any{"query": "retry budget", "limit": 2})
	retryGot, err := st.parted.Raw(ctx, wire.EndpointSessionsSearch, []byte(fmt.Sprintf(`{"query":"retry budget","limit":2,"minGeneration":%d}`, last)))
	if err != nil {
		t.Fatal(err)
	}
	var filler dshq.SessionSearchPage
	if err := json.Unmarshal(fillerWant, &filler); err != nil || filler.NextCursor == "" {
		t.Fatalf("filler: %s", fillerWant)
	}
	// The last of the counted sessions, which no first page shows.
	victim := ""
	for i := 0; victim == ""; i++ {
		id := fmt.Sprintf("skew-%d", i)
		if id != filler.Items[0].Header.ID && id != filler.Items[1].Header.ID && dshq.ShardOf(id, 3) != 0 {
			victim = id
		}
	}
	store, err := bus.NewStore(ctx, st.env.Conn)
	if err != nil {
		t.Fatal(err)
	}
	h, err := store.Open(ctx, victim, bus.Write)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := record.ParseEvent([]byte(`{"type":"user/message","seq":1,"time":1700000000001,"data":{"id":"m-r","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"filler summary"}]},"surfaceOp":{"op":"replace","start":0,"end":0},"sourceEventSeqs":[0]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Append(ctx, []dshq.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := st.env.JS.Stream(ctx, dshq.SessionStream)
	if err != nil {
		t.Fatal(err)
	}
	last = info.CachedInfo().State.LastSeq
	for _, p := range st.projectors {
		testenv.WaitGeneration(t, p, last)
	}
	askPair(wire.EndpointSessionsSearch, map[string]any{"query": "filler", "limit": 2}, replyCursor(fillerWant), replyCursor(fillerGot))
	askPair(wire.EndpointSessionsSearch, map[string]any{"query": "retry budget", "limit": 2}, replyCursor(retryWant), replyCursor(retryGot))
	_, err = st.parted.Raw(ctx, wire.EndpointSessionsSearch, []byte(fmt.Sprintf(`{"query":"filler","limit":2,"cursor":%q}`, replyCursor(fillerGot))))
	if dshq.ErrorCode(err) != dshq.CodeStaleCursor {
		t.Fatalf("a later page after a reclassification: %v, want %s", err, dshq.CodeStaleCursor)
	}

	// The merge the service stored expires: its later pages are stale.
	first, err := st.parted.Raw(ctx, wire.EndpointSessionsSearch, []byte(`{"query":"the","limit":2}`))
	if err != nil {
		t.Fatal(err)
	}
	text, _, _ := strings.Cut(replyCursor(first), ".")
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		t.Fatal(err)
	}
	var cur struct {
		Store string `json:"s"`
	}
	if err := json.Unmarshal(raw, &cur); err != nil || cur.Store == "" {
		t.Fatalf("cursor %s: %v", raw, err)
	}
	kv, err := st.env.JS.KeyValue(ctx, dshq.CursorBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, cur.Store+".m"); err != nil {
		t.Fatal(err)
	}
	_, err = st.parted.Raw(ctx, wire.EndpointSessionsSearch, []byte(fmt.Sprintf(`{"query":"the","limit":2,"cursor":%q}`, replyCursor(first))))
	if dshq.ErrorCode(err) != dshq.CodeStaleCursor || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("a later page of an expired merge: %v, want %s", err, dshq.CodeStaleCursor)
	}
}

// TestPartitionedShardMissing: a partitioned query service whose shard is
// not there fails every request it needs that shard for with a typed
// error, never answering a part as the whole.
func TestPartitionedShardMissing(t *testing.T) {
	env := testenv.Start(t)
	ids := writeCorpus(t, env)
	var ps []*projection.Projector
	for i := range 2 { // of 3: shard 2 is missing
		ps = append(ps, serveProjector(t, env, i, 3))
	}
	info, err := env.JS.Stream(context.Background(), dshq.SessionStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		testenv.WaitGeneration(t, p, info.CachedInfo().State.LastSeq)
	}
	c := servePartitioned(t, env, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var missing string
	for _, id := range ids {
		if dshq.ShardOf(id, 3) == 2 {
			missing = id
			break
		}
	}
	for _, q := range []struct{ endpoint, body string }{
		{wire.EndpointSessionsList, `{}`},
		{wire.EndpointSessionsTitles, fmt.Sprintf(`{"sessionIds":[%q]}`, missing)},
		{wire.EndpointSessionsStat, fmt.Sprintf(`{"sessionId":%q}`, missing)},
		{wire.EndpointSessionsTrace, fmt.Sprintf(`{"sessionId":%q}`, ids[0])},
		{wire.EndpointSessionsSearch, `{"query":"the"}`},
	} {
		_, err := c.Raw(ctx, q.endpoint, []byte(q.body))
		var de *dshq.Error
		if !errors.As(err, &de) || de.Code != dshq.CodePersistenceFailed || !bytes.Contains([]byte(de.Message), []byte("2of3")) {
			t.Errorf("%s with shard 2of3 missing: %v, want %s naming the shard", q.endpoint, err, dshq.CodePersistenceFailed)
		}
	}
}

func replyCursor(reply []byte) string {
	var p struct {
		NextCursor string `json:"nextCursor"`
	}
	_ = json.Unmarshal(reply, &p)
	return p.NextCursor
}

// withoutStoreName returns reply with its nextCursor, when the cursor of a
// search names the stored hits its later pages read ("s": 96 random bits,
// different for every search, on one shard as on many), replaced by the
// cursor's content less that name and the MAC over it.
func withoutStoreName(t *testing.T, reply []byte) []byte {
	t.Helper()
	c := replyCursor(reply)
	text, _, ok := strings.Cut(c, ".")
	if !ok {
		return reply
	}
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		t.Fatalf("cursor %q: %v", c, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("cursor %q: %v", c, err)
	}
	if _, ok := fields["s"]; !ok {
		return reply
	}
	delete(fields, "s")
	canon, _ := json.Marshal(fields) // sorted keys
	return bytes.Replace(reply, []byte(c), canon, 1)
}

// skewedTarget is the session of writeSkewedTerms whose two events rank
// one way with its shard's statistics and the other with the corpus's.
const skewedTarget = "skew-target"

// writeSkewedTerms writes sessions whose terms are spread unevenly over
// the 3 shards: skewedTarget (in shard 0 of 3) holds "kappa omega kappa"
// and "omega kappa omega"; its shard holds "kappa" in 6 more sessions, the
// other shards "omega" in 20. With shard 0's statistics "omega" is the
// rarer term (the second event ranks first for "kappa omega"); with the
// corpus's "kappa" is (the first event does).
func writeSkewedTerms(t *testing.T, env *testenv.Env) []string {
	t.Helper()
	if dshq.ShardOf(skewedTarget, 3) != 0 {
		t.Fatalf("%s is not in shard 0 of 3", skewedTarget)
	}
	msg := func(seq int, text string) string {
		return fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":%q}]},"surfaceOp":"append"}`,
			seq, 1_700_000_000_000+int64(seq), seq, text)
	}
	write := func(id string, texts ...string) {
		lines := []string{fmt.Sprintf(`{"type":"session","version":2,"id":%q,"createdAt":1700000000000,"cwd":"/work/skew","isSeeded":false}`, id)}
		for i, text := range texts {
			lines = append(lines, msg(i, text))
		}
		env.PublishLog(t, []byte(strings.Join(lines, "\n")))
	}
	ids := []string{skewedTarget}
	write(skewedTarget, "kappa omega kappa", "omega kappa omega")
	local, remote := 0, 0
	for i := 0; local < 6 || remote < 20; i++ {
		id := fmt.Sprintf("skew-%d", i)
		switch shard := dshq.ShardOf(id, 3); {
		case shard == 0 && local < 6:
			write(id, "kappa filler words")
			local++
		case shard != 0 && remote < 20:
			write(id, "omega filler words")
			remote++
		default:
			continue
		}
		ids = append(ids, id)
	}
	return ids
}
