// Package failover holds what dshq's NATS clients need to ride out a
// JetStream cluster's failovers without adding waits of their own: a
// per-connection Watch that interrupts requests whose answer can no longer
// come (the connection dropped, or a stream elected a new leader) and wakes
// retries at once when one would now succeed, and reads from a stream's
// leader for the lookups that must see everything acknowledged (a direct
// get may be answered by a follower that has not stored it yet).
package failover

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ErrInterrupted is the cause of an attempt context cancelled because its
// answer can no longer come: the connection dropped (a reply routed to the
// old server is lost) or a stream elected a leader (a request in flight on
// a leader that stepped down gets no answer). The attempt should be retried
// at once.
var ErrInterrupted = errors.New("interrupted by a reconnect or a leader change")

// StreamLeaderElected is the subject of the advisory a JetStream cluster
// publishes when stream (or a key-value bucket's stream, KV_<bucket>)
// elects a leader.
func StreamLeaderElected(stream string) string {
	return "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream
}

// ConsumerLeaderElected is the subject of the advisory a JetStream cluster
// publishes when a consumer of stream elects a leader.
func ConsumerLeaderElected(stream, consumer string) string {
	return "$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED." + stream + "." + consumer
}

// Watch follows one connection for the events after which a request in
// flight will not be answered, or a retry would now be: the connection
// dropping or coming back, and the leader elections of the streams its
// users follow. It interrupts the attempts in flight and wakes the retries
// waiting for their next attempt, so that a failover costs what the cluster
// takes to recover and nothing of the client's timeouts and backoff. One
// Watch serves every user of a connection; its goroutine ends when the
// connection is closed.
type Watch struct {
	nc *nats.Conn

	mu         sync.Mutex // guards the fields below
	wake       chan struct{}
	inflight   map[uint64]context.CancelCauseFunc
	next       uint64
	advisories map[string]bool // the advisory subjects followed
	announce   map[string]int  // subjects published after every reconnect, by registrations
}

var (
	watchesMu sync.Mutex // guards watches
	watches   = map[*nats.Conn]*Watch{}
)

// For returns nc's Watch (starting it on first use), following the
// advisories on subjects as well (StreamLeaderElected,
// ConsumerLeaderElected). Without permission to subscribe to them (the
// server then reports a permissions violation) it still follows the
// connection, and retries fall back on their backoff.
func For(nc *nats.Conn, advisories ...string) *Watch {
	watchesMu.Lock()
	defer watchesMu.Unlock()
	w := watches[nc]
	if w == nil {
		w = &Watch{nc: nc, wake: make(chan struct{}), inflight: map[uint64]context.CancelCauseFunc{}, advisories: map[string]bool{}, announce: map[string]int{}}
		ch := nc.StatusChanged(nats.CONNECTED, nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
		if nc.IsClosed() {
			nc.RemoveStatusListener(ch)
			return w
		}
		watches[nc] = w
		go w.follow(ch)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range advisories {
		if w.advisories[s] {
			continue
		}
		if _, err := nc.Subscribe(s, func(*nats.Msg) { w.interrupt() }); err == nil {
			w.advisories[s] = true
		}
	}
	return w
}

// follow reacts to the connection's status changes until it is closed.
func (w *Watch) follow(ch chan nats.Status) {
	for st := range ch {
		switch st {
		case nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED:
			w.interrupt()
		case nats.CONNECTED:
			w.wakeUp()
			w.announceAll()
		}
		if st == nats.CLOSED || w.nc.IsClosed() {
			watchesMu.Lock()
			if watches[w.nc] == w {
				delete(watches, w.nc)
			}
			watchesMu.Unlock()
			w.nc.RemoveStatusListener(ch)
			return
		}
	}
}

// Attempt returns the context of one attempt: done after timeout, when ctx
// is, or when interrupted (cause ErrInterrupted, see Interrupted); release
// must be called when the attempt ends.
func (w *Watch) Attempt(ctx context.Context, timeout time.Duration) (actx context.Context, release func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	tctx, tcancel := context.WithTimeout(cctx, timeout)
	w.mu.Lock()
	id := w.next
	w.next++
	w.inflight[id] = cancel
	w.mu.Unlock()
	return tctx, func() {
		w.mu.Lock()
		delete(w.inflight, id)
		w.mu.Unlock()
		tcancel()
		cancel(nil)
	}
}

// Changed returns a channel closed at the next event (a reconnect, a
// leader election, the connection dropping): a retry waiting on it tries
// again at once, a request waiting on it for its reply sends it again.
func (w *Watch) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wake
}

// interrupt cancels every attempt in flight and wakes every waiting retry.
func (w *Watch) interrupt() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, cancel := range w.inflight {
		cancel(ErrInterrupted)
		delete(w.inflight, id)
	}
	close(w.wake)
	w.wake = make(chan struct{})
}

// wakeUp wakes every waiting retry.
func (w *Watch) wakeUp() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.wake)
	w.wake = make(chan struct{})
}

// Interrupted reports whether the attempt context actx (from Attempt) was
// interrupted.
func Interrupted(actx context.Context) bool {
	return errors.Is(context.Cause(actx), ErrInterrupted)
}

// Announce publishes an empty message on subject now and after every
// reconnect of the connection, until stop is called. A service announces
// itself so: a client waiting for a reply that follows the subject (For)
// sends its request again at once, since a request in flight to the
// service when its connection dropped is lost.
func (w *Watch) Announce(subject string) (stop func()) {
	w.mu.Lock()
	w.announce[subject]++
	w.mu.Unlock()
	_ = w.nc.Publish(subject, nil)
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.announce[subject]--; w.announce[subject] <= 0 {
				delete(w.announce, subject)
			}
		})
	}
}

func (w *Watch) announceAll() {
	w.mu.Lock()
	subjects := make([]string, 0, len(w.announce))
	for s := range w.announce {
		subjects = append(subjects, s)
	}
	w.mu.Unlock()
	for _, s := range subjects {
		_ = w.nc.Publish(s, nil)
	}
}
