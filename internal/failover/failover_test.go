package failover

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

func TestMain(m *testing.M) { testnats.VerifyNoLeaks(m) }

// startServer starts a test's server with a loopback listener (testnats).
func startServer(t *testing.T) *testnats.Server {
	t.Helper()
	return testnats.Start(t, embedded.Config{Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed})
}

// connect dials s, reconnecting at once and forever.
func connect(t *testing.T, s *testnats.Server) *nats.Conn {
	t.Helper()
	return s.Dial(t, nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
}

func waitDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// An attempt in flight is interrupted, and waiting retries are woken, when
// a followed advisory arrives (a leader election) and when the connection
// drops; other attempts keep their timeout.
func TestWatch_InterruptsAttemptsOnElectionAndDisconnect(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	subject := StreamLeaderElected("S")
	w := For(nc, subject)
	if For(nc) != w {
		t.Fatal("a second For on the same connection returned another Watch")
	}
	if err := nc.Flush(); err != nil { // the advisory subscription is in place
		t.Fatal(err)
	}

	changed := w.Changed()
	actx, release := w.Attempt(context.Background(), time.Minute)
	other, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Publish(subject, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	waitDone(t, actx.Done(), "the attempt to be interrupted by the advisory")
	waitDone(t, changed, "the retries to be woken by the advisory")
	if !Interrupted(actx) || !Transient(context.Cause(actx)) {
		t.Fatalf("cause %v: want ErrInterrupted, transient", context.Cause(actx))
	}
	release()

	unrelated, release2 := w.Attempt(context.Background(), 20*time.Millisecond)
	<-unrelated.Done()
	if Interrupted(unrelated) || !errors.Is(unrelated.Err(), context.DeadlineExceeded) {
		t.Fatalf("an attempt timing out by itself: cause %v", context.Cause(unrelated))
	}
	release2()

	changed = w.Changed()
	actx, release = w.Attempt(context.Background(), time.Minute)
	defer release()
	s.NATSServer().Shutdown() // the connection drops and reconnects
	waitDone(t, actx.Done(), "the attempt to be interrupted by the disconnect")
	waitDone(t, changed, "the retries to be woken by the disconnect")
	if !Interrupted(actx) {
		t.Fatalf("cause %v, want ErrInterrupted", context.Cause(actx))
	}
}

// The Watch's goroutine ends with its connection.
func TestWatch_EndsWithTheConnection(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	w := For(nc)
	nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		watchesMu.Lock()
		_, ok := watches[nc]
		watchesMu.Unlock()
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watch of a closed connection is still registered")
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	if For(nc) == w {
		t.Fatal("For on a closed connection returned the old Watch")
	}
}

// Range delivers a subject's messages in order across several direct get
// batches, stops when fn declines, and the leader reads find what is
// stored.
func TestRange_AndLeaderReads(t *testing.T) {
	s := startServer(t)
	nc := connect(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.>"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	var want []uint64
	for i := range 700 {
		subj := "r.other"
		if i%2 == 0 {
			subj = "r.mine"
		}
		ack, err := js.Publish(ctx, subj, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if subj == "r.mine" {
			want = append(want, ack.Sequence)
		}
	}
	last, err := LastMsg(ctx, nc, "R", "r.mine")
	if err != nil || last.Sequence != want[len(want)-1] {
		t.Fatalf("LastMsg: %v, %v; want sequence %d", last, err, want[len(want)-1])
	}
	first, err := FirstMsg(ctx, nc, "R", "r.mine", want[3]+1)
	if err != nil || first.Sequence != want[4] || string(first.Data) != "8" {
		t.Fatalf("FirstMsg: %+v, %v; want sequence %d", first, err, want[4])
	}
	if _, err := LastMsg(ctx, nc, "R", "r.none"); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("LastMsg of an empty subject: %v, want ErrMsgNotFound", err)
	}
	var got []uint64
	err = Range(ctx, nc, "R", "r.mine", 1, last.Sequence, func(m Msg) (bool, error) {
		got = append(got, m.Seq)
		if m.Subject != "r.mine" {
			t.Errorf("message %d on %q", m.Seq, m.Subject)
		}
		return true, nil
	})
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Range: %v; got %d messages, want %d", err, len(got), len(want))
	}
	got = nil
	err = Range(ctx, nc, "R", "r.mine", 1, last.Sequence, func(m Msg) (bool, error) {
		got = append(got, m.Seq)
		return len(got) < 300, nil
	})
	if err != nil || len(got) != 300 {
		t.Fatalf("Range declined at 300: %v, %d messages", err, len(got))
	}
}

// A publish or request while the connection is down and its reconnect
// buffer is full fails with nats.ErrReconnectBufExceeded: the server went
// away, as with ErrDisconnected, so it is transient. Before, dshq import
// took it for a fault of the file it was importing and refused every file
// after it, without waiting for the server (issue 24, item 7: 32 of 40
// files of 2.7 MB refused 10 s after a SIGKILL of dshq serve).
func TestAFullReconnectBufferIsTransient(t *testing.T) {
	s := startServer(t)
	nc := s.Dial(t, nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond), nats.ReconnectBufSize(1024),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	down := nc.StatusChanged(nats.RECONNECTING)
	defer nc.RemoveStatusListener(down)
	s.NATSServer().Shutdown()
	select {
	case <-down:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for the connection to be reconnecting")
	}
	// The first publish fills the buffer past its limit; the next is refused.
	var err error
	for i := 0; i < 2 && err == nil; i++ {
		err = nc.Publish("x", make([]byte, 4096))
	}
	if !errors.Is(err, nats.ErrReconnectBufExceeded) {
		t.Fatalf("two publishes of 4 KiB with a 1 KiB reconnect buffer while down: %v, want %v", err, nats.ErrReconnectBufExceeded)
	}
	if !Transient(fmt.Errorf("import session %q: %w", "s-1", err)) {
		t.Errorf("Transient(%v) = false", err)
	}
}
