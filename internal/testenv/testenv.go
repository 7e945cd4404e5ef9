// Package testenv is the test stack: it starts, for one test, an embedded
// nats-server with JetStream (package testnats), the session stream and its
// lease bucket, a projector (bbolt and Bleve) and dsh-query, each stopped
// when the test ends, in the reverse order of their start; RunUntilReady
// runs a whole node (`dshq serve` as a library) the same way. A test asks
// for the layers it needs: Start gives the server and the stream;
// StartProjector (or OpenProjector and RunProjector) and ServeQuery add the
// rest; Publish, PublishLog and SetLease write as a harness does.
//
// The tests of the packages this stack is built from (bus, query,
// microhost, projection, feed) use its first layer, testnats, directly, and
// tenanttest adds the users of tenant mode to it. The query shard,
// dsh-tools and dsh-admin are served by their own packages' tests on top of
// this stack (engine's tests serve the engine under test, tools/toolstest
// the shard the tools read): this package cannot import what its users'
// internal tests build.
package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

// WaitTimeout bounds every wait of this package for the stack to catch up
// (generous: under -race on two loaded cores, indexing a 1 MiB event takes
// tens of seconds; a wait that succeeds returns at once).
const WaitTimeout = 2 * time.Minute

// Env is one test's stack.
type Env struct {
	// Server is the embedded nats-server.
	Server *testnats.Server
	// Conn is an in-process connection.
	Conn *nats.Conn
	// JS is Conn's JetStream context.
	JS jetstream.JetStream
	// Leases is the lease bucket (nil when Unprovisioned).
	Leases jetstream.KeyValue
	// Stream is the configuration the stream and bucket were made with.
	Stream bus.StreamConfig

	mu   sync.Mutex
	last uint64
}

type config struct {
	server embedded.Config
	stream bus.StreamConfig
	bare   bool
}

// Option configures Start.
type Option func(*config)

// Listen adds a loopback listener on a free port (Env.URL), for clients
// that dial, such as a command run in the test.
func Listen() Option { return func(c *config) { c.server.Listen = "127.0.0.1:0" } }

// StreamConfig provisions the stream and the lease bucket with cfg
// (default: bus's defaults).
func StreamConfig(cfg bus.StreamConfig) Option { return func(c *config) { c.stream = cfg } }

// Unprovisioned starts the server alone, for a test whose subject creates
// the stream itself.
func Unprovisioned() Option { return func(c *config) { c.bare = true } }

// Start starts the server (with the periodic sync: a test needs no
// power-loss durability) and, unless Unprovisioned, creates the session
// stream and the lease bucket, all stopped when t ends.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	c := config{server: embedded.Config{Sync: embedded.SyncRelaxed}}
	for _, o := range opts {
		o(&c)
	}
	e := &Env{Server: testnats.Start(t, c.server), Stream: c.stream}
	e.Conn = e.Server.Conn(t)
	e.JS = testnats.JetStream(t, e.Conn)
	if c.bare {
		return e
	}
	ctx := context.Background()
	if _, err := bus.EnsureStream(ctx, e.JS, c.stream); err != nil {
		t.Fatalf("ensure stream: %v", err)
	}
	kv, err := bus.EnsureLeaseBucket(ctx, e.JS, c.stream)
	if err != nil {
		t.Fatalf("ensure lease bucket: %v", err)
	}
	e.Leases = kv
	return e
}

// URL is the server's nats:// URL ("" without Listen).
func (e *Env) URL() string { return e.Server.ClientURL() }

// Quiet is the logger of the parts this package starts: a test reads what
// it asserts, not their logs.
func Quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// OpenProjector opens a projector on the stream in a directory of t's own
// (opts after a quiet logger), closed when t ends. It does not run: see
// RunProjector.
func (e *Env) OpenProjector(t testing.TB, opts ...projection.Option) *projection.Projector {
	t.Helper()
	p, err := projection.Open(context.Background(), e.JS, t.TempDir(), append([]projection.Option{projection.WithLogger(Quiet())}, opts...)...)
	if err != nil {
		t.Fatalf("open projector: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close projector: %v", err)
		}
	})
	return p
}

// RunProjector runs p until t ends, and fails t if it stops with an error
// of its own.
func (e *Env) RunProjector(t testing.TB, p *projection.Projector) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("projector run: %v", err)
		}
	})
}

// StartProjector opens a projector and runs it until t ends.
func (e *Env) StartProjector(t testing.TB, opts ...projection.Option) *projection.Projector {
	t.Helper()
	p := e.OpenProjector(t, opts...)
	e.RunProjector(t, p)
	return p
}

// ServeQuery serves dsh-query on Conn (opts after a quiet logger) until t
// ends and returns a client of it. It forwards to the shards, which the
// test serves.
func (e *Env) ServeQuery(t testing.TB, opts ...query.ServiceOption) *query.Client {
	t.Helper()
	stop, err := query.Serve(context.Background(), e.Conn, append([]query.ServiceOption{query.WithLogger(Quiet())}, opts...)...)
	if err != nil {
		t.Fatalf("serve dsh-query: %v", err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop dsh-query: %v", err)
		}
	})
	return query.NewClient(e.Conn)
}

// Publish publishes one record on subject and returns its stream sequence.
func (e *Env) Publish(t testing.TB, subject string, data []byte, opts ...jetstream.PublishOpt) uint64 {
	t.Helper()
	ack, err := e.JS.Publish(context.Background(), subject, data, opts...)
	if err != nil {
		t.Fatalf("publish on %s: %v", subject, err)
	}
	e.mu.Lock()
	e.last = max(e.last, ack.Sequence)
	e.mu.Unlock()
	return ack.Sequence
}

// Last is the highest stream sequence published through e: the generation
// a projector has applied once it holds everything published.
func (e *Env) Last() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// PublishLog publishes a JSONL session log (its header line first) on the
// session's subject as the harness SDK writes one: message ids <token>:h
// and <token>:<n>, each record expecting the subject's previous one. It
// returns the session id and the stream sequence of the last record.
func (e *Env) PublishLog(t testing.TB, jsonl []byte) (id string, last uint64) {
	t.Helper()
	return e.PublishTenantLog(t, "", jsonl)
}

// PublishTenantLog is PublishLog on tenant's log subject
// (dsh.log.<tenant>.<token>; "" for none).
func (e *Env) PublishTenantLog(t testing.TB, tenant string, jsonl []byte) (id string, last uint64) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(jsonl))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	var tok string
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var msgID string
		if n == 0 {
			h, err := record.ParseHeader(bytes.Clone(line))
			if err != nil {
				t.Fatalf("log header: %v", err)
			}
			id = h.Header.ID
			if tok, err = record.SubjectToken(id); err != nil {
				t.Fatal(err)
			}
			msgID = tok + ":h"
		} else {
			msgID = tok + ":" + strconv.Itoa(n-1)
		}
		last = e.Publish(t, dshq.LogSubjectPrefix+record.LogKey(tenant, tok), bytes.Clone(line),
			jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequencePerSubject(last))
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("publish log: no records")
	}
	return id, last
}

// SetLease holds (live) or releases the write lease of session id, of
// tenant ("" for none), as a harness does; the projector sees it shortly.
func (e *Env) SetLease(t testing.TB, tenant, id string, live bool) {
	t.Helper()
	tok, err := record.SubjectToken(id)
	if err != nil {
		t.Fatal(err)
	}
	key := record.LogKey(tenant, bus.LeaseKey(tok))
	ctx := context.Background()
	if !live {
		if err := e.Leases.Delete(ctx, key); err != nil {
			t.Fatalf("release lease %s: %v", key, err)
		}
		return
	}
	v, err := json.Marshal(bus.LeaseValue{SessionID: id, Owner: "test-" + tok, AcquiredAt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Leases.Put(ctx, key, v); err != nil {
		t.Fatalf("hold lease %s: %v", key, err)
	}
}

// WaitGeneration waits (at most WaitTimeout) until p has applied
// generation g.
func WaitGeneration(t testing.TB, p *projection.Projector, g uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	defer cancel()
	if err := p.WaitGeneration(ctx, g); err != nil {
		t.Fatalf("projection did not reach generation %d (at %d): %v", g, p.Generation(), err)
	}
}

// VerifyNoLeaks runs the package's tests (call it from TestMain) and fails
// when a goroutine outlives them, but for the nats-server's stragglers
// (testnats.Stragglers), Bleve's analysis workers (started at package init,
// they live for the process) and the extra ones the package names.
func VerifyNoLeaks(m *testing.M, extra ...goleak.Option) {
	testnats.VerifyNoLeaks(m, append([]goleak.Option{goleak.IgnoreAnyFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker")}, extra...)...)
}
