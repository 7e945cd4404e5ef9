package bus

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// lossyLeases is the real lease bucket with replies lost on demand: a lost
// create or delete is applied by the server and then answered with a
// timeout (the request's context expired after the server applied it), a
// failing read or delete never reaches the server.
type lossyLeases struct {
	leaseKV
	mu sync.Mutex // guards the fields below
	// loseCreate loses the reply of the next create (it is applied).
	loseCreate bool
	// failReads fails every entry and get until cleared; onFailedRead is
	// called on each.
	failReads    bool
	onFailedRead func()
	// failDeletes fails every delete, without applying it, until cleared.
	failDeletes bool
	// onFailedDelete is called, with mu held, on the next failed delete.
	onFailedDelete func()
	// loseUpdate loses the reply of the next update (it is applied).
	loseUpdate bool
}

func (l *lossyLeases) update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	l.mu.Lock()
	lose := l.loseUpdate
	l.loseUpdate = false
	l.mu.Unlock()
	nrev, err := l.leaseKV.update(ctx, key, v, rev)
	if lose && err == nil {
		return 0, nats.ErrTimeout
	}
	return nrev, err
}

func (l *lossyLeases) create(ctx context.Context, key string, v []byte) (uint64, error) {
	l.mu.Lock()
	lose := l.loseCreate
	l.loseCreate = false
	l.mu.Unlock()
	rev, err := l.leaseKV.create(ctx, key, v)
	if lose && err == nil {
		return 0, nats.ErrTimeout
	}
	return rev, err
}

func (l *lossyLeases) readFails() bool {
	l.mu.Lock()
	fail, on := l.failReads, l.onFailedRead
	l.mu.Unlock()
	if fail && on != nil {
		on()
	}
	return fail
}

func (l *lossyLeases) entry(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if l.readFails() {
		return nil, nats.ErrTimeout
	}
	return l.leaseKV.entry(ctx, key)
}

func (l *lossyLeases) get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if l.readFails() {
		return nil, nats.ErrTimeout
	}
	return l.leaseKV.get(ctx, key)
}

func (l *lossyLeases) deleteAt(ctx context.Context, key string, rev uint64) error {
	l.mu.Lock()
	fail := l.failDeletes
	if fail && l.onFailedDelete != nil {
		l.onFailedDelete()
		l.onFailedDelete = nil
	}
	l.mu.Unlock()
	if fail {
		return nats.ErrTimeout
	}
	return l.leaseKV.deleteAt(ctx, key, rev)
}

// A writer whose own lease write went unanswered recognises the lease as its
// own on its next claim instead of refusing itself as another writer for the
// lease's TTL; another writer is still refused.
func TestLease_AWritersOwnUnansweredLeaseIsItsOwn(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	// A release's retries give up soon while its deletes fail.
	s := newStore(t, e, WithRetryMaxElapsed(300*time.Millisecond))
	other := newStore(t, e)
	lossy := &lossyLeases{leaseKV: s.kv}
	s.kv = lossy

	t.Run("a create whose reply was lost and whose follow-up reads failed", func(t *testing.T) {
		h, err := s.Create(ctx, header("lost-create"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Append(ctx, cmds(t, 0, 1)); err != nil {
			t.Fatal(err)
		}
		mustClose(t, h)
		// The claim of an Open is stored, its reply lost, and every read
		// that would tell whose it is fails until the Open gives up.
		octx, cancel := context.WithCancel(ctx)
		lossy.mu.Lock()
		lossy.loseCreate, lossy.failReads, lossy.onFailedRead = true, true, cancel
		lossy.mu.Unlock()
		if _, err := s.Open(octx, "lost-create", Write); err == nil {
			t.Fatal("the open succeeded with every read failing")
		}
		cancel()
		lossy.mu.Lock()
		lossy.failReads, lossy.onFailedRead = false, nil
		lossy.mu.Unlock()
		if _, err := other.Open(ctx, "lost-create", Write); err == nil {
			t.Fatal("another writer took the lease the first one stored")
		}
		h, err = s.Open(ctx, "lost-create", Write)
		if err != nil {
			t.Fatalf("the writer's next open: %v", err)
		}
		if _, err := h.Append(ctx, cmds(t, 1, 1)); err != nil {
			t.Fatalf("append: %v", err)
		}
		if _, err := s.Open(ctx, "lost-create", Write); err == nil {
			t.Fatal("a second handle of the same writer holds the lease too")
		}
		mustClose(t, h)
	})

	t.Run("a release that failed", func(t *testing.T) {
		h, err := s.Create(ctx, header("lost-release"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Append(ctx, cmds(t, 0, 1)); err != nil {
			t.Fatal(err)
		}
		lossy.mu.Lock()
		lossy.failDeletes = true
		lossy.mu.Unlock()
		err = h.Close(ctx)
		lossy.mu.Lock()
		lossy.failDeletes = false
		lossy.mu.Unlock()
		if err == nil {
			t.Fatal("the release succeeded with its deletes failing")
		}
		if _, err := other.Open(ctx, "lost-release", Write); err == nil {
			t.Fatal("another writer took the lease the first one still holds")
		}
		h, err = s.Open(ctx, "lost-release", Write)
		if err != nil {
			t.Fatalf("the writer's next open: %v", err)
		}
		if _, err := h.Append(ctx, cmds(t, 1, 1)); err != nil {
			t.Fatalf("append: %v", err)
		}
		mustClose(t, h)
		if h, err := other.Open(ctx, "lost-release", Write); err != nil {
			t.Fatalf("another writer after the release: %v", err)
		} else {
			mustClose(t, h)
		}
	})

	t.Run("a release after a beat whose reply was lost frees the key at once", func(t *testing.T) {
		h, err := s.Create(ctx, header("lost-beat"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Append(ctx, cmds(t, 0, 1)); err != nil {
			t.Fatal(err)
		}
		lossy.mu.Lock()
		lossy.loseUpdate = true
		lossy.mu.Unlock()
		h.lease.beat() // applied; the handle keeps the revision before it
		mustClose(t, h)
		if h, err := other.Open(ctx, "lost-beat", Write); err != nil {
			t.Fatalf("another writer after the release: %v", err)
		} else {
			mustClose(t, h)
		}
	})

	t.Run("a release whose delete fails once is retried", func(t *testing.T) {
		h, err := s.Create(ctx, header("retried-release"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Append(ctx, cmds(t, 0, 1)); err != nil {
			t.Fatal(err)
		}
		lossy.mu.Lock()
		lossy.failDeletes, lossy.onFailedDelete = true, func() {
			lossy.failDeletes = false // lossy.mu is held
		}
		lossy.mu.Unlock()
		mustClose(t, h)
		if h, err := other.Open(ctx, "retried-release", Write); err != nil {
			t.Fatalf("another writer after the release: %v", err)
		} else {
			mustClose(t, h)
		}
	})
}
