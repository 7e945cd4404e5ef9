package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

func TestMain(m *testing.M) {
	// Bleve starts its analysis workers once per process, at package init.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// pipe is the real pipeline: an embedded nats-server with JetStream, the
// projector (bbolt + Bleve) with the shard engine, and the query service.
type pipe struct {
	t      testing.TB
	e      *embedded.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	leases jetstream.KeyValue
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
	listen      string
	engineOpts  []Option
	maxPayload  int32
	serviceOpts []query.ServiceOption
	localShard  bool // the service calls the engine in process
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newPipe(t testing.TB, cfgs ...func(*pipeConfig)) *pipe {
	t.Helper()
	var cfg pipeConfig
	for _, c := range cfgs {
		c(&cfg)
	}
	ctx := context.Background()
	e, err := embedded.Start(ctx, embedded.Config{Dir: t.TempDir(), Sync: embedded.SyncRelaxed, Listen: cfg.listen})
	if err != nil {
		t.Fatalf("start embedded: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	nc, err := e.InProcessConn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	sc := bus.StreamConfig{LeaseTTL: time.Minute}
	if _, err := bus.EnsureStream(ctx, js, sc); err != nil {
		t.Fatalf("ensure stream: %v", err)
	}
	leases, err := bus.EnsureLeaseBucket(ctx, js, sc)
	if err != nil {
		t.Fatalf("ensure lease bucket: %v", err)
	}
	proj, err := projection.Open(ctx, js, t.TempDir(), projection.WithLogger(quiet()))
	if err != nil {
		t.Fatalf("open projector: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- proj.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("projector run: %v", err)
		}
		if err := proj.Close(); err != nil {
			t.Errorf("close projector: %v", err)
		}
	})
	engine, err := NewShardEngine(ctx, js, proj, cfg.engineOpts...)
	if err != nil {
		t.Fatal(err)
	}
	stopShard, err := ServeShard(ctx, nc, dshq.DefaultShard, engine, query.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopShard() })
	opts := append([]query.ServiceOption{query.WithLogger(quiet())}, cfg.serviceOpts...)
	if cfg.localShard {
		opts = append(opts, query.WithLocalShard(engine))
	}
	stopSvc, err := query.Serve(ctx, nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stopSvc() })
	return &pipe{t: t, e: e, nc: nc, js: js, leases: leases, proj: proj, client: query.NewClient(nc), stopShard: stopShard, next: map[string]int64{}}
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
	tok, _ := record.SubjectToken(id)
	p.mu.Lock()
	key := record.LogKey(p.tenants[id], bus.LeaseKey(tok))
	p.mu.Unlock()
	ctx := context.Background()
	if live {
		v, _ := json.Marshal(bus.LeaseValue{SessionID: id, Owner: "test", AcquiredAt: 1})
		if _, err := p.leases.Put(ctx, key, v); err != nil {
			p.t.Fatal(err)
		}
	} else if err := p.leases.Delete(ctx, key); err != nil {
		p.t.Fatal(err)
	}
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
