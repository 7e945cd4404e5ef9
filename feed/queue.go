package feed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultQueueMessages bounds the messages a Queue holds unpublished.
const DefaultQueueMessages = 100_000

// ErrQueueFull is returned by Queue.Enqueue when the queue holds its
// maximum of unpublished messages (the feed stream has been unreachable
// for long). The commit is not queued: the feed will miss it until the
// projector re-publishes it (see Publisher.Checkpoint).
var ErrQueueFull = errors.New("feed queue is full")

// ErrQueueClosed is returned by Queue.Enqueue after Close.
var ErrQueueClosed = errors.New("feed queue is closed")

// Queue publishes commits through a Publisher in the background, in the
// order they were enqueued, retrying each until it is published, so that
// the projector's commit hook never waits for the bus and a bus outage
// leaves no gap in the feed while the process lives. Its goroutine runs
// from NewQueue until Close.
type Queue struct {
	pub    *Publisher
	max    int
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{}

	// mu guards the fields below.
	mu      sync.Mutex
	pending []queued
	size    int // messages in pending
	closed  bool
	stats   QueueStats
	drained chan struct{} // closed and replaced whenever pending empties
}

// queued is one prepared commit.
type queued struct {
	out []outgoing
	gen uint64
}

// attemptTimeout bounds one publication attempt of a queued commit.
const attemptTimeout = 10 * time.Second

// QueueStats describes a Queue's progress.
type QueueStats struct {
	// Pending is the number of commits not yet published.
	Pending int
	// PendingMessages is the number of messages in them.
	PendingMessages int
	// Published is the generation of the last commit published (0 before
	// the first).
	Published uint64
	// Retries counts failed publication attempts that were retried.
	Retries int
	// Dropped counts commits refused because their generation regressed
	// (never published).
	Dropped int
	// LastError is the last publication error ("" if none).
	LastError string
}

// QueueOption configures NewQueue.
type QueueOption func(*Queue)

// WithQueueMessages bounds the unpublished messages (DefaultQueueMessages).
func WithQueueMessages(n int) QueueOption { return func(q *Queue) { q.max = n } }

// NewQueue starts a Queue on pub. Close stops it.
func NewQueue(pub *Publisher, opts ...QueueOption) *Queue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{pub: pub, max: DefaultQueueMessages, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}, 1), drained: make(chan struct{})}
	for _, o := range opts {
		o(q)
	}
	go q.run()
	return q
}

// Enqueue queues one commit's messages (as for Publisher.Publish) and
// returns at once. It fails with ErrQueueFull when the queue would exceed
// its bound, and ErrQueueClosed after Close. A malformed commit is refused
// at once (*dshq.Error wrapping ErrMalformed).
func (q *Queue) Enqueue(msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	out, gen, err := q.pub.prepare(msgs)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrQueueClosed
	}
	if q.size+len(msgs) > q.max {
		return fmt.Errorf("enqueue feed commit at generation %d (%d messages pending): %w", msgs[0].Generation, q.size, ErrQueueFull)
	}
	q.pending = append(q.pending, queued{out: out, gen: gen})
	q.size += len(out)
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// Stats returns the queue's progress.
func (q *Queue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.Pending, s.PendingMessages = len(q.pending), q.size
	return s
}

// Flush waits until every commit enqueued so far is published, or ctx
// ends (ctx.Err()).
func (q *Queue) Flush(ctx context.Context) error {
	for {
		q.mu.Lock()
		empty, ch := len(q.pending) == 0, q.drained
		q.mu.Unlock()
		if empty {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-q.done:
			return ErrQueueClosed
		}
	}
}

// Close stops accepting commits, waits (bounded by ctx) for the queued
// ones to be published, and stops the queue's goroutine. If ctx ends
// first, the rest is abandoned and Close says how many commits were not
// published.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	var err error
	select {
	case <-q.done:
	case <-ctx.Done():
		q.cancel()
		<-q.done
		s := q.Stats()
		err = fmt.Errorf("close feed queue: %d commits (%d messages) not published: %w", s.Pending, s.PendingMessages, ctx.Err())
	}
	q.cancel()
	return err
}

func (q *Queue) run() {
	defer close(q.done)
	for {
		c, ok := q.next()
		if !ok {
			return
		}
		err := q.publish(c)
		if err != nil && q.ctx.Err() != nil {
			return // abandoned by Close
		}
		q.mu.Lock()
		q.pending = q.pending[1:]
		q.size -= len(c.out)
		if err != nil {
			q.stats.Dropped++
			q.stats.LastError = err.Error()
		} else {
			q.stats.Published = c.gen
		}
		if len(q.pending) == 0 {
			close(q.drained)
			q.drained = make(chan struct{})
		}
		q.mu.Unlock()
	}
}

// next waits for the oldest pending commit; false when closed and empty,
// or abandoned.
func (q *Queue) next() (queued, bool) {
	for {
		q.mu.Lock()
		if len(q.pending) > 0 {
			c := q.pending[0]
			q.mu.Unlock()
			return c, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return queued{}, false
		}
		select {
		case <-q.wake:
		case <-q.ctx.Done():
			return queued{}, false
		}
	}
}

// publish publishes one commit, retrying until it is published, it is
// refused as regressed (returned), or the queue is abandoned.
func (q *Queue) publish(c queued) error {
	wait := 50 * time.Millisecond
	send := q.pub.publishOnce
	for {
		ctx, cancel := context.WithTimeout(q.ctx, attemptTimeout)
		err := q.pub.publishPrepared(ctx, c.out, c.gen, send)
		cancel()
		send = q.pub.publishRest // a failed attempt may have stored part of it
		if err == nil || errors.Is(err, ErrGenerationRegressed) || q.ctx.Err() != nil {
			return err
		}
		q.mu.Lock()
		q.stats.Retries++
		q.stats.LastError = err.Error()
		q.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-q.ctx.Done():
			t.Stop()
			return q.ctx.Err()
		}
		wait = min(2*wait, 2*time.Second)
	}
}
