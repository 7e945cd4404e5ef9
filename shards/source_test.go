package shards_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
	"github.com/dshq/dshq/shards"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// nShards is how many shards the stack partitions its corpus into.
const nShards = 3

// stack is one corpus projected whole (a local engine: what one index
// answers) and partitioned into nShards shards, each a projector served as
// a replica of its shard, with a Source over them.
type stack struct {
	env   *testenv.Env
	src   *shards.Source
	whole *engine.Engine
	ids   []string
	// created is each session's createdAt.
	created map[string]int64
	rt      *roundTrips
}

// roundTrips counts the requests that reach the shards, by shard token and
// endpoint: a plain subscriber on the conn that asks them, beside the
// replicas' services, sees every request they answer.
type roundTrips struct {
	nc   *nats.Conn
	msgs chan *nats.Msg
	n    map[string]int
}

// countRoundTrips subscribes to every shard's endpoints.
func countRoundTrips(t *testing.T, nc *nats.Conn) *roundTrips {
	r := &roundTrips{nc: nc, msgs: make(chan *nats.Msg, 4096), n: map[string]int{}}
	sub, err := nc.ChanSubscribe("dsh.proj.*.v1.>", r.msgs)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

// drain counts the requests received so far: after a flush of the conn
// that sent them, every one is in the channel.
func (r *roundTrips) drain() {
	_ = r.nc.Flush()
	for {
		select {
		case m := <-r.msgs:
			tok := strings.Split(m.Subject, ".")
			endpoint := strings.Join(tok[4:], ".")
			if tok[4] == "replica" {
				endpoint = strings.Join(tok[6:], ".")
			}
			if endpoint != "status" {
				r.n[tok[2]+" "+endpoint]++
			}
		default:
			return
		}
	}
}

func (r *roundTrips) reset() {
	r.drain()
	r.n = map[string]int{}
}

// count returns the requests of endpoint to shard token ("" for any).
func (r *roundTrips) count(token, endpoint string) int {
	r.drain()
	total := 0
	for k, v := range r.n {
		t, e, _ := strings.Cut(k, " ")
		if e == endpoint && (token == "" || t == token) {
			total += v
		}
	}
	return total
}

// sessionLog is a session's log: a header (with a parent when not "") and
// one user message of text.
func sessionLog(id, parent string, created int64, text string) []byte {
	p := ""
	if parent != "" {
		p = fmt.Sprintf(`,"parentSession":%q`, parent)
	}
	return fmt.Appendf(nil, `{"type":"session","version":2,"id":%q,"createdAt":%d,"cwd":"/w","isSeeded":false%s}
{"type":"user/message","seq":0,"time":%d,"data":{"id":"m","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":%q}]},"surfaceOp":"append"}
`, id, created, p, created+1, text)
}

// startStack writes 24 sessions (createdAt in pairs, so that ties are
// broken by id; a lineage root → child → grandchild whose levels lie on
// different shards; "needle" said 1 to 3 times) and projects them.
func startStack(t *testing.T) *stack {
	t.Helper()
	env := testenv.Start(t)
	st := &stack{env: env, created: map[string]int64{}}
	for i := range 24 {
		id, parent := fmt.Sprintf("s%02d", i), ""
		switch id {
		case "s01":
			parent = "s00"
		case "s02":
			parent = "s01"
		}
		created := int64(1000 + i/2)
		env.PublishLog(t, sessionLog(id, parent, created, strings.Repeat("needle ", 1+i%3)+fmt.Sprintf("hay %d", i)))
		st.ids, st.created[id] = append(st.ids, id), created
	}
	whole := env.StartProjector(t)
	st.whole = engine.New(shardhost.Local(whole))
	ps := []*projection.Projector{whole}
	for i := range nShards {
		ps = append(ps, serveShard(t, env, i))
	}
	for _, p := range ps {
		testenv.WaitGeneration(t, p, env.Last())
	}
	st.rt = countRoundTrips(t, env.Conn)
	src, err := shards.New(env.Conn, nShards, shards.BindKVCursorStore(env.JS), shards.ReadCursorKey(env.JS))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	st.src = src
	return st
}

// serveShard runs the projector of shard i of nShards and serves it as a
// replica of its shard.
func serveShard(t *testing.T, env *testenv.Env, i int) *projection.Projector {
	t.Helper()
	durable := dshq.ShardDurable(i, nShards)
	p := env.StartProjector(t, projection.WithDurable(durable), projection.WithPartition(i, nShards))
	ctx := context.Background()
	eng, err := shardhost.NewShardEngine(ctx, env.JS, p)
	if err != nil {
		t.Fatal(err)
	}
	status := func() query.ReplicaStatus {
		pr := p.Progress()
		return query.ReplicaStatus{Lineage: p.Lineage(), Generation: pr.Generation, CatchingUp: pr.CatchingUp, Shards: nShards}
	}
	stop, err := shardhost.ServeReplica(ctx, env.Conn, dshq.ShardToken(i, nShards), durable, eng, status, query.WithLogger(testenv.Quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return p
}

// view runs fn with a snapshot of the shards at the stream's last
// generation, the round trips counted from its start.
func (st *stack) view(t *testing.T, fn func(t *testing.T, snap engine.Snapshot)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitTimeout)
	defer cancel()
	err := st.src.View(ctx, st.env.Last(), func(snap engine.Snapshot) error {
		st.rt.reset()
		fn(t, snap)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func token(id string) string { return dshq.ShardToken(dshq.ShardOf(id, nShards), nShards) }

func TestSource(t *testing.T) {
	st := startStack(t)
	t.Run("the corpus lies on every shard", func(t *testing.T) {
		on := map[int]bool{}
		for _, id := range st.ids {
			on[dshq.ShardOf(id, nShards)] = true
		}
		if len(on) != nShards || dshq.ShardOf("s00", nShards) == dshq.ShardOf("s01", nShards) {
			t.Fatalf("fixture: shards %v; s00 and s01 on one shard", on)
		}
	})
	t.Run("a point lookup asks only the session's shard, once", func(t *testing.T) {
		st.view(t, func(t *testing.T, snap engine.Snapshot) {
			for _, id := range []string{"s00", "s05", "s13", "nope"} {
				st.rt.reset()
				info, ok, err := snap.Session(id)
				if err != nil || ok != (id != "nope") || (ok && info.Header.Header.ID != id) {
					t.Fatalf("Session(%s) = %+v, %v, %v", id, info.Header.Header, ok, err)
				}
				if n, mine := st.rt.count("", wire.EndpointSessionsStat), st.rt.count(token(id), wire.EndpointSessionsStat); n != 1 || mine != 1 {
					t.Fatalf("Session(%s): %d stat requests, %d to its shard %s", id, n, mine, token(id))
				}
			}
		})
	})
	t.Run("a lookup of many ids asks each shard that holds one, once", func(t *testing.T) {
		st.view(t, func(t *testing.T, snap engine.Snapshot) {
			ids := []string{"s00", "s03", "s07", "s11", "missing"}
			got, err := snap.Lookup(ids)
			if err != nil || len(got) != 4 || got["s07"].Header.Header.ID != "s07" {
				t.Fatalf("Lookup = %v, %v", got, err)
			}
			shardsOf := map[string]bool{}
			for _, id := range ids {
				shardsOf[token(id)] = true
			}
			for i := range nShards {
				tok := dshq.ShardToken(i, nShards)
				if want, n := map[bool]int{true: 1, false: 0}[shardsOf[tok]], st.rt.count(tok, wire.EndpointSessionsTitles); n != want {
					t.Errorf("shard %s: %d titles requests, want %d", tok, n, want)
				}
			}
		})
	})
	t.Run("the list is the k-way merge of the shards' pages, paged", func(t *testing.T) {
		want := slices.Clone(st.ids)
		slices.SortFunc(want, func(a, b string) int { return cmp.Or(cmp.Compare(st.created[b], st.created[a]), cmp.Compare(a, b)) })
		st.view(t, func(t *testing.T, snap engine.Snapshot) {
			var got []string
			var after []byte
			pages := 0
			for more := true; more; pages++ {
				more = false
				n := 0
				for info, err := range snap.Sessions(engine.Scan{After: after, AsOf: snap.Generation(), Limit: 5}) {
					if errors.Is(err, engine.ErrMore) {
						more = true
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					if after != nil && bytes.Compare(info.OrderKey, after) <= 0 {
						t.Fatalf("%s is not after the previous page", info.Header.Header.ID)
					}
					got, after, n = append(got, info.Header.Header.ID), info.OrderKey, n+1
				}
				if n > 5 {
					t.Fatalf("page %d holds %d sessions, over the limit 5", pages, n)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("merged list\n%v\nwant\n%v", got, want)
			}
			if pages != 5 {
				t.Fatalf("%d pages of 5 for 24 sessions", pages)
			}
		})
	})
	t.Run("the children of a whole level are asked of each shard once", func(t *testing.T) {
		st.view(t, func(t *testing.T, snap engine.Snapshot) {
			kids, err := snap.Children([]string{"s00", "s01", "s02", "s09"})
			if err != nil {
				t.Fatal(err)
			}
			if len(kids["s00"]) != 1 || kids["s00"][0].Header.Header.ID != "s01" || len(kids["s01"]) != 1 ||
				kids["s01"][0].Header.Header.ID != "s02" || len(kids["s02"]) != 0 || len(kids["s09"]) != 0 {
				t.Fatalf("children %v", kids)
			}
			for i := range nShards {
				if n := st.rt.count(dshq.ShardToken(i, nShards), wire.EndpointSessionsChildren); n != 1 {
					t.Errorf("shard %d: %d children requests", i, n)
				}
			}
		})
	})
	t.Run("a lineage trace asks the children a level at a time", func(t *testing.T) {
		eng := engine.New(st.src, engine.WithCursorStore(shards.BindKVCursorStore(st.env.JS)), engine.WithCursorKeyFunc(shards.ReadCursorKey(st.env.JS)))
		req, err := wire.DecodeRequest(wire.EndpointSessionsTrace, []byte(`{"sessionId":"s00"}`))
		if err != nil {
			t.Fatal(err)
		}
		st.rt.reset()
		got, err := eng.Run(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := st.whole.Run(context.Background(), req)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("trace over the shards\n%s\nwhole\n%s (%v)", got, want, err)
		}
		// Three levels below s00 (s01, s02, none): each asked of every shard.
		if n := st.rt.count("", wire.EndpointSessionsChildren); n != 3*nShards {
			t.Fatalf("%d children requests for 3 levels of %d shards", n, nShards)
		}
	})
	t.Run("a session ranking sums the statistics, ranks on every shard and merges", func(t *testing.T) {
		st.view(t, func(t *testing.T, snap engine.Snapshot) {
			r, err := snap.Index().RankSessionKeys(context.Background(), engine.SearchQuery{Phrase: "needle", Limit: engine.MaxSearchResults})
			if err != nil {
				t.Fatal(err)
			}
			for _, ep := range []string{wire.EndpointCorpusStats, wire.EndpointSessionsRank} {
				for i := range nShards {
					if n := st.rt.count(dshq.ShardToken(i, nShards), ep); n != 1 {
						t.Errorf("shard %d: %d %s requests", i, n, ep)
					}
				}
			}
			var got []string
			for _, k := range r.Keys {
				got = append(got, k.SessionID)
			}
			if want := wholeRanking(t, st.whole); !slices.Equal(got, want) {
				t.Fatalf("merged ranking\n%v\nwhole\n%v", got, want)
			}
			stats, err := snap.Index().CorpusStats(context.Background(), "needle")
			if err != nil {
				t.Fatal(err)
			}
			st.rt.reset()
			if _, err := snap.Index().RankSessionKeys(context.Background(), engine.SearchQuery{Phrase: "needle", Limit: 10, Stats: &stats}); err != nil {
				t.Fatal(err)
			}
			if n := st.rt.count("", wire.EndpointCorpusStats); n != 0 {
				t.Fatalf("statistics given, yet %d corpus.stats requests", n)
			}
		})
	})
	t.Run("a shard that is not there fails the view with its name", func(t *testing.T) {
		src, err := shards.New(st.env.Conn, nShards+1, shards.BindKVCursorStore(st.env.JS), shards.ReadCursorKey(st.env.JS))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = src.View(ctx, 0, func(engine.Snapshot) error { t.Fatal("a view without its shards"); return nil })
		var de *dshq.Error
		if !errors.As(err, &de) || de.Code != dshq.CodePersistenceFailed || !strings.Contains(de.Message, dshq.ShardToken(0, nShards+1)) {
			t.Fatalf("err = %v, want %s naming shard %s", err, dshq.CodePersistenceFailed, dshq.ShardToken(0, nShards+1))
		}
	})
}

// wholeRanking is the session order of one index over the whole corpus:
// its first page of sessions.search for "needle".
func wholeRanking(t *testing.T, whole *engine.Engine) []string {
	t.Helper()
	req, err := wire.DecodeRequest(wire.EndpointSessionsSearch, []byte(`{"query":"needle","limit":100}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := whole.Run(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var page dshq.SessionSearchPage
	if err := json.Unmarshal(out, &page); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range page.Items {
		ids = append(ids, h.Header.ID)
	}
	return ids
}
