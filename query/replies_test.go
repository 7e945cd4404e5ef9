package query

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

type tripResult struct {
	msg *nats.Msg
	err error
}

// goRoundTrip runs roundTrip on its own goroutine; the result arrives on
// the channel returned (ctx's end ends it).
func goRoundTrip(ctx context.Context, nc *nats.Conn, subject, moved string, body []byte, gone <-chan struct{}) <-chan tripResult {
	out := make(chan tripResult, 1)
	go func() {
		m, err := roundTrip(ctx, nc, subject, moved, body, nil, gone)
		out <- tripResult{m, err}
	}()
	return out
}

// holdRequests subscribes subject on nc and hands the test every request
// that arrives there, unanswered.
func holdRequests(t *testing.T, nc *nats.Conn, subject string) <-chan *nats.Msg {
	t.Helper()
	c := make(chan *nats.Msg, 512)
	sub, err := nc.ChanSubscribe(subject, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

// echo answers every request on subject with its body.
func echo(t *testing.T, nc *nats.Conn, subject string) {
	t.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}

func next[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func wantReply(t *testing.T, r tripResult, body string) {
	t.Helper()
	if r.err != nil || string(r.msg.Data) != body {
		var got []byte
		if r.msg != nil {
			got = r.msg.Data
		}
		t.Fatalf("reply %q, %v; want %q", got, r.err, body)
	}
}

// waitForInMsgs waits until nc has received more than n messages: its
// request's no-responders statuses, where nothing else is sent to nc.
func waitForInMsgs(t *testing.T, nc *nats.Conn, n uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for nc.Stats().InMsgs <= n {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the no-responders status")
		}
		time.Sleep(time.Millisecond) // poll interval
	}
}

func poolIn(nc *nats.Conn) *inboxPool {
	inboxesMu.Lock()
	defer inboxesMu.Unlock()
	return inboxes[nc]
}

func idleInboxes(nc *nats.Conn) int {
	p := poolIn(nc)
	if p == nil {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func TestRoundTrip(t *testing.T) {
	s := testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed, Listen: "127.0.0.1:0"})
	svc := s.Conn(t)

	t.Run("concurrent requests each get their own reply", func(t *testing.T) {
		client := s.Conn(t)
		echo(t, svc, "t.echo")
		ctx := ctxT(t)
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := range 32 {
			wg.Go(func() {
				body := fmt.Sprintf("request %d", i)
				m, err := roundTrip(ctx, client, "t.echo", "t.echo.moved", []byte(body), nil, nil)
				if err == nil && string(m.Data) != body {
					err = fmt.Errorf("request %q got the reply %q", body, m.Data)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("a late reply to a request that ended is dropped", func(t *testing.T) {
		client := s.Conn(t)
		held := holdRequests(t, svc, "t.late")
		ctx1, cancel1 := context.WithCancel(ctxT(t))
		first := goRoundTrip(ctx1, client, "t.late", "t.late.moved", []byte("1"), nil)
		m1 := next(t, held, "the first request")
		cancel1()
		if r := next(t, first, "the first request's end"); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("the first request, cancelled: %v; want context.Canceled", r.err)
		}
		second := goRoundTrip(ctxT(t), client, "t.late", "t.late.moved", []byte("2"), nil)
		m2 := next(t, held, "the second request")
		if m1.Reply == m2.Reply {
			t.Fatalf("both requests were sent with the reply subject %s", m1.Reply)
		}
		// The late reply reaches the client first, on the same connection.
		if err := m1.Respond([]byte("late")); err != nil {
			t.Fatal(err)
		}
		if err := m2.Respond([]byte("second")); err != nil {
			t.Fatal(err)
		}
		wantReply(t, next(t, second, "the second reply"), "second")
	})

	t.Run("a request is sent again when a service instance announces itself on moved", func(t *testing.T) {
		client := s.Conn(t)
		held := holdRequests(t, svc, "t.moved")
		done := goRoundTrip(ctxT(t), client, "t.moved", "t.moved.announce", []byte("q"), nil)
		next(t, held, "the request")
		if err := svc.Publish("t.moved.announce", nil); err != nil {
			t.Fatal(err)
		}
		again := next(t, held, "the request sent again")
		if err := again.Respond([]byte("answer")); err != nil {
			t.Fatal(err)
		}
		wantReply(t, next(t, done, "the reply"), "answer")
	})

	t.Run("a request is sent again when its connection comes back", func(t *testing.T) {
		client := s.Dial(t)
		held := holdRequests(t, svc, "t.reconnect")
		done := goRoundTrip(ctxT(t), client, "t.reconnect", "t.reconnect.moved", []byte("q"), nil)
		next(t, held, "the request")
		if err := client.ForceReconnect(); err != nil {
			t.Fatal(err)
		}
		again := next(t, held, "the request sent again")
		if err := again.Respond([]byte("answer")); err != nil {
			t.Fatal(err)
		}
		wantReply(t, next(t, done, "the reply"), "answer")
	})

	t.Run("a request that finds no service is sent again until one answers", func(t *testing.T) {
		client := s.Conn(t)
		before := client.Stats().InMsgs
		done := goRoundTrip(ctxT(t), client, "t.starting", "t.starting.moved", []byte("q"), nil)
		waitForInMsgs(t, client, before)
		echo(t, svc, "t.starting")
		wantReply(t, next(t, done, "the reply"), "q")
	})

	t.Run("a request that finds no service for noRespondersFor fails with ErrNoResponders", func(t *testing.T) {
		r := next(t, goRoundTrip(ctxT(t), s.Conn(t), "t.nobody", "t.nobody.moved", []byte("q"), nil), "the request's end")
		if !errors.Is(r.err, nats.ErrNoResponders) {
			t.Fatalf("a request nobody answers: %v; want nats.ErrNoResponders", r.err)
		}
	})

	t.Run("a request whose context ends while no service answers fails with ErrNoResponders", func(t *testing.T) {
		client := s.Conn(t)
		before := client.Stats().InMsgs
		ctx, cancel := context.WithCancel(ctxT(t))
		done := goRoundTrip(ctx, client, "t.nobody", "t.nobody.moved", []byte("q"), nil)
		// The second status: the request was sent again after the
		// first one's pause, so roundTrip has seen that no service answers.
		waitForInMsgs(t, client, before+1)
		cancel()
		if r := next(t, done, "the request's end"); !errors.Is(r.err, nats.ErrNoResponders) {
			t.Fatalf("a request nobody answers, cancelled: %v; want nats.ErrNoResponders", r.err)
		}
	})

	t.Run("a request to a replica taken for gone fails with errReplicaGone", func(t *testing.T) {
		held := holdRequests(t, svc, "t.gone")
		gone := make(chan struct{})
		done := goRoundTrip(ctxT(t), s.Conn(t), "t.gone", "t.gone.moved", []byte("q"), gone)
		next(t, held, "the request")
		close(gone)
		if r := next(t, done, "the request's end"); !errors.Is(r.err, errReplicaGone) {
			t.Fatalf("a request whose replica is gone: %v; want errReplicaGone", r.err)
		}
	})

	t.Run("requests reuse their connection's inboxes, and it keeps at most maxIdleInboxes", func(t *testing.T) {
		client := s.Conn(t)
		echo(t, svc, "t.reuse")
		ctx := ctxT(t)
		if _, err := roundTrip(ctx, client, "t.reuse", "t.reuse.moved", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		subs := client.NumSubscriptions()
		for range 100 {
			if _, err := roundTrip(ctx, client, "t.reuse", "t.reuse.moved", nil, nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if n, idle := client.NumSubscriptions(), idleInboxes(client); n != subs || idle != 1 {
			t.Fatalf("after 101 requests one at a time: %d subscriptions (%d after the first), %d idle inboxes; want %d and 1", n, subs, idle, subs)
		}

		held := holdRequests(t, svc, "t.many")
		const many = maxIdleInboxes + 20
		results := make([]<-chan tripResult, many)
		for i := range results {
			results[i] = goRoundTrip(ctx, client, "t.many", "t.reuse.moved", []byte("q"), nil)
		}
		// Every request is held until all of them arrived, so all are in
		// flight at once, each on an inbox of its own: answering each as
		// it arrived let a late starter take an inbox back from an early
		// one under load (247 inboxes for 276 requests in a loaded run).
		requests := make([]*nats.Msg, 0, many)
		for range many {
			requests = append(requests, next(t, held, "a request"))
		}
		for _, m := range requests {
			if err := m.Respond([]byte("a")); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range results {
			wantReply(t, next(t, r, "a reply"), "a")
		}
		if n, idle := client.NumSubscriptions(), idleInboxes(client); idle != maxIdleInboxes || n != subs-1+maxIdleInboxes {
			t.Fatalf("after %d requests at once: %d subscriptions, %d idle inboxes; want %d and %d", many, n, idle, subs-1+maxIdleInboxes, maxIdleInboxes)
		}
	})

	t.Run("a closed connection's inboxes are forgotten", func(t *testing.T) {
		client := s.Conn(t)
		echo(t, svc, "t.close")
		if _, err := roundTrip(ctxT(t), client, "t.close", "t.close.moved", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		if poolIn(client) == nil {
			t.Fatal("no inboxes kept after a request")
		}
		client.Close()
		if poolIn(client) != nil {
			t.Fatal("the inboxes of a closed connection are still kept")
		}
		if _, err := roundTrip(ctxT(t), client, "t.close", "t.close.moved", nil, nil, nil); !errors.Is(err, nats.ErrConnectionClosed) {
			t.Fatalf("a request on a closed connection: %v; want nats.ErrConnectionClosed", err)
		}
		if poolIn(client) != nil {
			t.Fatal("a request on a closed connection left inboxes kept")
		}
	})
}
