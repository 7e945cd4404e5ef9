package tools_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/tools"
)

func TestMain(m *testing.M) {
	// Bleve starts its analysis workers once per process, at package init.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// pipeline is the real stack: an embedded nats-server with JetStream, the
// projector (bbolt + Bleve) and the query service, reached through
// query.Client.
type pipeline struct {
	nc  *nats.Conn
	svc tools.Service
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newPipeline starts the stack, publishes the given corpus sessions, marks
// the live ones with a write lease and waits until all of it is projected.
func newPipeline(t testing.TB, ids []string) *pipeline {
	t.Helper()
	ctx := context.Background()
	e, err := bus.StartEmbedded(ctx, bus.EmbeddedConfig{Dir: t.TempDir(), Sync: bus.SyncRelaxed})
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
	cfg := bus.StreamConfig{LeaseTTL: time.Minute}
	if _, err := bus.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatalf("ensure stream: %v", err)
	}
	kv, err := bus.EnsureLeaseBucket(ctx, js, cfg)
	if err != nil {
		t.Fatalf("ensure lease bucket: %v", err)
	}
	var last uint64
	for _, id := range ids {
		last = publishLog(t, js, corpusFile(t, id))
		if liveSessions[id] {
			tok, _ := record.SubjectToken(id)
			v, _ := json.Marshal(bus.LeaseValue{SessionID: id, Owner: "test-" + id, AcquiredAt: 1})
			if _, err := kv.Create(ctx, bus.LeaseKey(tok), v); err != nil {
				t.Fatalf("lease %s: %v", id, err)
			}
		}
	}

	p, err := projection.Open(ctx, js, t.TempDir(), projection.WithLogger(quiet()))
	if err != nil {
		t.Fatalf("open projector: %v", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if err := p.Close(); err != nil {
			t.Errorf("close projector: %v", err)
		}
	})
	engine := query.NewEngine(query.FromProjector(p), query.WithSearcher(query.FromIndex(p.Index())))
	stopShard, err := query.ServeShard(ctx, nc, query.DefaultShard, engine, query.WithLogger(quiet()))
	if err != nil {
		t.Fatalf("serve shard: %v", err)
	}
	t.Cleanup(func() { _ = stopShard() })
	stopSvc, err := query.Serve(ctx, nc, query.WithLogger(quiet()))
	if err != nil {
		t.Fatalf("serve query: %v", err)
	}
	t.Cleanup(func() { _ = stopSvc() })

	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := p.WaitGeneration(wctx, last); err != nil {
		t.Fatalf("projection did not catch up: %v", err)
	}
	client := query.NewClient(nc)
	waitLive(t, wctx, client, ids)
	return &pipeline{nc: nc, svc: tools.FromQueryClient(client)}
}

// waitLive waits until the projection reports every leased session live.
func waitLive(t testing.TB, ctx context.Context, c *query.Client, ids []string) {
	t.Helper()
	want := 0
	for _, id := range ids {
		if liveSessions[id] {
			want++
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		p, err := c.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: []dshq.Filter{
			{Kind: dshq.FilterAvailability, Values: []*string{dshq.Str("live")}}}})
		if err == nil && len(p.Items) == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("live sessions not projected: last err %v", err)
		case <-tick.C:
		}
	}
}

// publishLog publishes a JSONL log on its subject with the contract's
// message ids and expected last subject sequences; it returns the stream
// sequence of the last record.
func publishLog(t testing.TB, js jetstream.JetStream, log []byte) uint64 {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	var (
		tok  string
		prev uint64
		n    int
	)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		msgID := ""
		if n == 0 {
			h, err := record.ParseHeader(bytes.Clone(line))
			if err != nil {
				t.Fatal(err)
			}
			if tok, err = record.SubjectToken(h.Header.ID); err != nil {
				t.Fatal(err)
			}
			msgID = tok + ":h"
		} else {
			msgID = tok + ":" + itoa(n-1)
		}
		ack, err := js.Publish(context.Background(), bus.SubjectPrefix+tok, bytes.Clone(line),
			jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequencePerSubject(prev))
		if err != nil {
			t.Fatalf("publish %s: %v", msgID, err)
		}
		prev = ack.Sequence
		n++
	}
	return prev
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// backends are the services the authorization suites run against.
var backends = []struct {
	name string
	open func(t testing.TB, ids []string) tools.Service
}{
	{"in-memory service", func(t testing.TB, ids []string) tools.Service { return newFake(t, ids) }},
	{"real pipeline", func(t testing.TB, ids []string) tools.Service { return newPipeline(t, ids).svc }},
}
