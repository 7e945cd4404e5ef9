package toolstest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

// Log is one session log to publish: the upstream JSONL layout, and whether
// a harness holds the session (a write lease makes it live).
type Log struct {
	JSONL []byte
	Live  bool
}

// Pipeline is the real stack: an embedded nats-server with JetStream, the
// projector (bbolt + Bleve) and the query service (dsh-query with its
// projection shard), all owned by the test and stopped at its cleanup.
type Pipeline struct {
	// Conn is an in-process connection to the server.
	Conn *nats.Conn
	// Client is the trusted query API client.
	Client *query.Client
	js     jetstream.JetStream
}

// Publish publishes one more log while the projector runs and returns the
// stream sequence of its last record (the generation that holds it).
func (p *Pipeline) Publish(t testing.TB, jsonl []byte) uint64 {
	t.Helper()
	_, seq := publishLog(t, p.js, jsonl)
	return seq
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// StartPipeline starts the stack, publishes logs as a harness would (message
// ids and expected last subject sequences per CONTRACT §2), leases the live
// ones, and waits until everything is projected and visible.
func StartPipeline(t testing.TB, logs []Log) *Pipeline {
	t.Helper()
	ctx := context.Background()
	e, err := embedded.Start(ctx, embedded.Config{Dir: t.TempDir(), Sync: embedded.SyncRelaxed})
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
	live := 0
	for _, l := range logs {
		id, seq := publishLog(t, js, l.JSONL)
		last = max(last, seq)
		if l.Live {
			live++
			tok, _ := record.SubjectToken(id)
			v, _ := json.Marshal(bus.LeaseValue{SessionID: id, Owner: "test-" + tok, AcquiredAt: 1})
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
	eng := engine.New(engine.FromProjector(p), engine.WithSearcher(engine.FromIndex(p.Index())))
	stopShard, err := engine.ServeShard(ctx, nc, dshq.DefaultShard, eng, query.WithLogger(quiet()))
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
	waitLive(t, wctx, client, live)
	return &Pipeline{Conn: nc, Client: client, js: js}
}

// waitLive waits until the projection reports want sessions live.
func waitLive(t testing.TB, ctx context.Context, c *query.Client, want int) {
	t.Helper()
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
			t.Fatalf("live sessions not projected (want %d): last err %v", want, err)
		case <-tick.C:
		}
	}
}

// publishLog publishes one JSONL log and returns its id and the stream
// sequence of its last record.
func publishLog(t testing.TB, js jetstream.JetStream, log []byte) (string, uint64) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24)
	var (
		id, tok string
		prev    uint64
		n       int
	)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var msgID string
		if n == 0 {
			h, err := record.ParseHeader(bytes.Clone(line))
			if err != nil {
				t.Fatal(err)
			}
			id = h.Header.ID
			if tok, err = record.SubjectToken(id); err != nil {
				t.Fatal(err)
			}
			msgID = tok + ":h"
		} else {
			msgID = tok + ":" + strconv.Itoa(n-1)
		}
		ack, err := js.Publish(context.Background(), dshq.LogSubjectPrefix+tok, bytes.Clone(line),
			jetstream.WithMsgID(msgID), jetstream.WithExpectLastSequencePerSubject(prev))
		if err != nil {
			t.Fatalf("publish %s: %v", msgID, err)
		}
		prev = ack.Sequence
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return id, prev
}
