package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/shardhost"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// pipe is the real pipeline: the test stack (testenv: an embedded
// nats-server with JetStream, the projector, dsh-query) with the engine
// under test serving the shard.
type pipe struct {
	t      testing.TB
	env    *testenv.Env
	nc     *nats.Conn
	js     jetstream.JetStream
	proj   *projection.Projector
	client *query.Client
	// stopShard stops the shard service on NATS (the engine stays).
	stopShard func() error

	mu   sync.Mutex // guards next, last and tenants
	next map[string]int64
	last uint64
	// tenants names the tenant of a session published on
	// dsh.log.<tenant>.<token> (inTenant); others are on dsh.log.<token>.
	tenants map[string]string
}

// inTenant makes the session id's records go to its tenant's log subject.
func (p *pipe) inTenant(tenant string, ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tenants == nil {
		p.tenants = map[string]string{}
	}
	for _, id := range ids {
		p.tenants[id] = tenant
	}
}

type pipeConfig struct {
	listen      bool // a loopback listener (pipe.env.URL)
	engineOpts  []engine.Option
	serviceOpts []query.ServiceOption
	localShard  bool // the service calls the engine in process
}

func quiet() *slog.Logger { return testenv.Quiet() }

func newPipe(t testing.TB, cfgs ...func(*pipeConfig)) *pipe {
	t.Helper()
	var cfg pipeConfig
	for _, c := range cfgs {
		c(&cfg)
	}
	ctx := context.Background()
	opts := []testenv.Option{testenv.StreamConfig(bus.StreamConfig{LeaseTTL: time.Minute})}
	if cfg.listen {
		opts = append(opts, testenv.Listen())
	}
	env := testenv.Start(t, opts...)
	proj := env.StartProjector(t)
	engine, err := shardhost.NewShardEngine(ctx, env.JS, proj, cfg.engineOpts...)
	if err != nil {
		t.Fatal(err)
	}
	stopShard, err := shardhost.ServeShard(ctx, env.Conn, dshq.DefaultShard, engine, query.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopShard() })
	serviceOpts := cfg.serviceOpts
	if cfg.localShard {
		serviceOpts = append(serviceOpts, query.WithEngine(engine))
	}
	client := env.ServeQuery(t, serviceOpts...)
	return &pipe{t: t, env: env, nc: env.Conn, js: env.JS, proj: proj, client: client, stopShard: stopShard, next: map[string]int64{}}
}

// publish publishes raw records on a session's subject; it returns the
// stream sequence of the last one.
func (p *pipe) publish(id string, lines ...string) uint64 {
	p.t.Helper()
	tok, err := record.SubjectToken(id)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	subject := dshq.LogSubjectPrefix + record.LogKey(p.tenants[id], tok)
	p.mu.Unlock()
	var seq uint64
	for _, l := range lines {
		ack, err := p.js.Publish(context.Background(), subject, []byte(l))
		if err != nil {
			p.t.Fatalf("publish %s: %v", id, err)
		}
		seq = ack.Sequence
	}
	p.mu.Lock()
	p.last = max(p.last, seq)
	p.mu.Unlock()
	return seq
}

type hdr struct {
	createdAt int64
	cwd       string
	parent    string
}

// session publishes a header record.
func (p *pipe) session(id string, h hdr) uint64 {
	p.t.Helper()
	m := map[string]any{"type": "session", "version": 2, "id": id, "createdAt": h.createdAt, "isSeeded": false}
	if h.cwd != "" {
		m["cwd"] = h.cwd
	}
	if h.parent != "" {
		m["parentSession"] = h.parent
	}
	b, _ := json.Marshal(m)
	return p.publish(id, string(b))
}

// events publishes events built by ev (their seqs are assigned in order).
func (p *pipe) events(id string, evs ...evSpec) uint64 {
	p.t.Helper()
	lines := make([]string, len(evs))
	p.mu.Lock()
	for i, e := range evs {
		lines[i] = e.line(p.next[id])
		p.next[id]++
	}
	p.mu.Unlock()
	return p.publish(id, lines...)
}

// evSpec builds one event line for a seq.
type evSpec struct {
	typ     string
	time    int64
	data    string
	extra   string // more envelope members, e.g. `"surfaceOp":"append"`
	rawLine string // a complete line (seq not substituted)
}

func (e evSpec) line(seq int64) string {
	if e.rawLine != "" {
		return e.rawLine
	}
	s := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s`, e.typ, seq, e.time, e.data)
	if e.extra != "" {
		s += "," + e.extra
	}
	return s + "}"
}

func userMsg(time int64, text string) evSpec {
	b, _ := json.Marshal(text)
	return evSpec{typ: dshq.TypeUserMessage, time: time, extra: `"surfaceOp":"append"`,
		data: fmt.Sprintf(`{"id":"m-%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":%s}]}`, time, b)}
}

func userReplace(time int64, text string, start, end int64, sources string) evSpec {
	b, _ := json.Marshal(text)
	return evSpec{typ: dshq.TypeUserMessage, time: time,
		extra: fmt.Sprintf(`"surfaceOp":{"op":"replace","start":%d,"end":%d},"sourceEventSeqs":%s`, start, end, sources),
		data:  fmt.Sprintf(`{"id":"m-r%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":%s}]}`, time, b)}
}

func plain(typ string, time int64, data string) evSpec {
	return evSpec{typ: typ, time: time, data: data}
}

// sync waits until the projection has applied everything published.
func (p *pipe) sync() uint64 {
	p.t.Helper()
	p.mu.Lock()
	g := p.last
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.proj.WaitGeneration(ctx, g); err != nil {
		p.t.Fatalf("projection did not reach %d: %v", g, err)
	}
	return g
}

// setLive holds or releases a session's lease and waits until the
// projection sees it.
func (p *pipe) setLive(id string, live bool) {
	p.t.Helper()
	p.mu.Lock()
	tenant := p.tenants[id]
	p.mu.Unlock()
	p.env.SetLease(p.t, tenant, id, live)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got bool
		_ = p.proj.View(ctx, 0, func(s projection.Snapshot) error { got = s.IsLive(id); return nil })
		if got == live {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("session %q did not become live=%v", id, live)
		}
		<-time.After(2 * time.Millisecond) // poll interval
	}
}

// wantErr asserts a *dshq.Error with code and message prefix.
func wantErr(t testing.TB, err error, code dshq.Code, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("succeeded; want %s %q", code, message)
	}
	var de *dshq.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *dshq.Error; want %s", err, err, code)
	}
	if de.Code != code || !strings.HasPrefix(de.Message, message) {
		t.Fatalf("error = %s %q; want %s %q", de.Code, de.Message, code, message)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
