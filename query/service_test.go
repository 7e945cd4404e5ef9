package query

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/query/wire"
)

func TestMain(m *testing.M) { testnats.VerifyNoLeaks(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// conn starts an in-process server (no JetStream use) and connects to it.
func conn(t *testing.T) *nats.Conn {
	t.Helper()
	return testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed}).Conn(t)
}

func serve(t *testing.T, nc *nats.Conn, opts ...ServiceOption) {
	t.Helper()
	stop, err := Serve(context.Background(), nc, append([]ServiceOption{WithLogger(quiet())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
}

// recorder is a shard that answers every request with reply (or err) and
// records what it was asked.
type recorder struct {
	reply string
	err   error

	mu       sync.Mutex // guards the fields below
	bodies   []string
	requests []*wire.Request
	budgets  []int
}

func (r *recorder) answer(_ context.Context, endpoint string, body []byte, _ nats.Header) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, endpoint+" "+string(body))
	return []byte(r.reply), r.err
}

// Answer makes a recorder a local Shard.
func (r *recorder) Answer(_ context.Context, req *wire.Request, maxReply int) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req)
	r.budgets = append(r.budgets, maxReply)
	return []byte(r.reply), r.err
}

func wantCode(t *testing.T, err error, code dshq.Code, message string) {
	t.Helper()
	var de *dshq.Error
	if !errors.As(err, &de) || de.Code != code || (message != "" && de.Message != message) {
		t.Fatalf("error %v (%T); want %s %q", err, err, code, message)
	}
}

func TestServe_ForwardsValidRequestsToTheShard(t *testing.T) {
	nc := conn(t)
	shard := &recorder{reply: `{"items":[],"generation":5}`}
	stop, err := ServeEndpoints(context.Background(), nc, Spec{Name: dshq.ShardService, QueueGroup: dshq.ShardQueueGroup(dshq.DefaultShard),
		Subject: func(ep string) string { return dshq.ShardSubject(dshq.DefaultShard, ep) }}, shard.answer, WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	serve(t, nc)
	client := NewClient(nc)
	ctx := ctxT(t)

	t.Run("a valid request reaches the shard as sent and its answer is relayed", func(t *testing.T) {
		page, err := client.ListSessions(ctx, dshq.SessionListRequest{Limit: 3})
		if err != nil || page.Generation != 5 {
			t.Fatalf("page %+v, %v", page, err)
		}
		shard.mu.Lock()
		defer shard.mu.Unlock()
		if len(shard.bodies) != 1 || shard.bodies[0] != wire.EndpointSessionsList+` {"limit":3}` {
			t.Fatalf("shard asked %q", shard.bodies)
		}
	})
	t.Run("an invalid request is refused before the shard is asked", func(t *testing.T) {
		_, err := client.Raw(ctx, wire.EndpointSessionsList, []byte(`{"limit":3,"bogus":1}`))
		wantCode(t, err, dshq.CodeInvalidRequest, "")
		shard.mu.Lock()
		defer shard.mu.Unlock()
		if len(shard.bodies) != 1 {
			t.Fatalf("shard asked %q", shard.bodies)
		}
	})
	t.Run("the shard's failure is relayed with its code and message", func(t *testing.T) {
		shard.mu.Lock()
		shard.err = dshq.Errorf(dshq.CodeSessionNotFound, "session %q was not found", "s\n1")
		shard.mu.Unlock()
		_, err := client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "s-1"})
		wantCode(t, err, dshq.CodeSessionNotFound, `session "s\n1" was not found`)
	})
}

func TestServe_NoShardAnswering(t *testing.T) {
	nc := conn(t)
	serve(t, nc, WithShardToken("9"))
	_, err := NewClient(nc).ListSessions(ctxT(t), dshq.SessionListRequest{})
	wantCode(t, err, dshq.CodePersistenceFailed, "projection shard 9 is not available")
}

func TestServe_LocalShard(t *testing.T) {
	nc := conn(t)
	shard := &recorder{reply: `{"items":[],"generation":7}`}
	serve(t, nc, WithEngine(shard))
	page, err := NewClient(nc).ListSessions(ctxT(t), dshq.SessionListRequest{Limit: 2}, WithMinGeneration(4))
	if err != nil || page.Generation != 7 {
		t.Fatalf("page %+v, %v", page, err)
	}
	shard.mu.Lock()
	defer shard.mu.Unlock()
	if len(shard.requests) != 1 {
		t.Fatalf("%d requests", len(shard.requests))
	}
	req := shard.requests[0]
	if req.Endpoint != wire.EndpointSessionsList || req.Limit != 2 || req.MinGeneration != 4 {
		t.Fatalf("the shard got %+v; want the decoded request", req)
	}
	if shard.budgets[0] != ReplyBudget(nc) || ReplyBudget(nc) != int(nc.MaxPayload())-wire.ReplyHeadroom {
		t.Fatalf("reply budget %d; the connection carries %d", shard.budgets[0], nc.MaxPayload())
	}
}
