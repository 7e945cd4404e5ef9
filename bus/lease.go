package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/dshq/dshq/record"
)

// LeaseKey returns the write-lease key of a session's subject token. It is
// the token itself, except that the leading "~" of an encoded token becomes
// "=" because key-value keys may not contain "~"; plain tokens never contain
// "=" or "~", so the mapping stays injective.
func LeaseKey(token string) string {
	if strings.HasPrefix(token, "~") {
		return "=" + token[1:]
	}
	return token
}

// ParseLeaseKey returns the session id of a lease key of the untenanted
// namespace (the inverse of LeaseKey of its subject token), for watchers of
// the lease bucket. A tenant's key (<tenant>.<key>) is refused: see
// ParseTenantLeaseKey.
func ParseLeaseKey(key string) (string, error) {
	if strings.HasPrefix(key, "=") {
		key = "~" + key[1:]
	}
	return record.ParseSubjectToken(key)
}

// LeaseValue is the JSON value of a write lease.
type LeaseValue struct {
	// SessionID is the leased session.
	SessionID string `json:"sessionId"`
	// Owner identifies the handle holding the lease (unique per acquisition).
	Owner string `json:"owner"`
	// AcquiredAt is the acquisition time, epoch ms.
	AcquiredAt int64 `json:"acquiredAt"`
	// Holder names who holds it for people (WithLeaseHolder: the machine
	// and program), absent when the Store was given none.
	Holder string `json:"holder,omitempty"`
	// Writer is the stable identity of the writer that holds it, when its
	// Store has one (WithWriter): a lease of that writer left by an earlier
	// process is taken back at once by the next.
	Writer string `json:"writer,omitempty"`
}

// lease is one held write lease. Its heartbeat goroutine is started by
// acquireLease and stopped by release.
type lease struct {
	kv    leaseKV
	key   string
	value []byte
	ttl   time.Duration
	// retry, when set, retries a release's transient failures.
	retry func(context.Context, func(context.Context) error) error
	// unsettled, when set, is called when a release fails: the key may
	// still hold the value.
	unsettled func()
	// released, when set, is called once the lease is released (or found
	// lost): its Store no longer holds the key.
	released     func()
	releasedOnce sync.Once
	mark         uint64 // the Store's reservation of the key

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	beatMu sync.Mutex // serialises beats (heartbeat goroutine and ensure)

	mu       sync.Mutex // guards rev, lost, lastBeat
	rev      uint64
	lost     bool
	lastBeat time.Time
}

// newLeaseValue returns the value of one acquisition: unique, so an
// acquisition recognises its own key after a lost acknowledgement.
func newLeaseValue(id, holder, writer string) []byte {
	v, _ := json.Marshal(LeaseValue{SessionID: id, Owner: nuid.Next(), AcquiredAt: time.Now().UnixMilli(), Holder: holder, Writer: writer})
	return v
}

// heldBy reports whether a lease value names writer (never for "").
func heldBy(value []byte, writer string) bool {
	if writer == "" {
		return false
	}
	var lv LeaseValue
	return json.Unmarshal(value, &lv) == nil && lv.Writer == writer
}

// acquireLease creates the lease key with value v, or adopts it when it
// already holds v (a retried create whose first attempt was stored). A key
// held by anyone else is ErrKeyExists. The heartbeat starts on success.
//
// A key held under another value by the same writer (non-empty: a lease an
// earlier process of this writer left, see WithWriter) is taken over at its
// revision.
func acquireLease(ctx context.Context, kv leaseKV, key string, v []byte, ttl time.Duration, writer string) (*lease, error) {
	rev, err := claim(ctx, kv, key, v, writer)
	if err != nil {
		return nil, err
	}
	l := &lease{kv: kv, key: key, value: v, ttl: ttl, rev: rev, lastBeat: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.heartbeat()
	return l, nil
}

// errLeaseInFlight wraps a refusal of a lease write while another write of
// the key is in flight on the bucket's leader (the constant wrong last
// sequence of a replicated stream): not a refusal by a holder, it is
// retried.
var errLeaseInFlight = errors.New("another write of the lease key is in flight")

// errLeaseChanged: the lease key changed between a refused write and the
// read of what it holds; the claim is tried again.
var errLeaseChanged = errors.New("the lease key changed during the claim")

// claim creates key with value v and returns its revision; a key that
// already holds v is ours (adopted); a deleted or lapsed key is taken at
// its revision; one holding anything else is ErrKeyExists. What the key
// holds after a refused create is read from the bucket's leader where the
// Store may (leaseKV.entry): a follower may not have stored the write that
// made it ours or freed it.
func claim(ctx context.Context, kv leaseKV, key string, v []byte, writer string) (uint64, error) {
	rev, err := kv.create(ctx, key, v)
	if inFlight(err) {
		return 0, inFlightError(key, err)
	}
	if err == nil || !(errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err)) {
		return rev, err
	}
	e, err := kv.entry(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, errLeaseChanged
	case err != nil:
		return 0, err
	case bytes.Equal(e.Value(), v) && e.Operation() == jetstream.KeyValuePut:
		return e.Revision(), nil
	case e.Operation() != jetstream.KeyValuePut, heldBy(e.Value(), writer):
		// Deleted, purged or lapsed: free; or this writer's, left by its
		// earlier process: taken back. Either at the revision read.
		rev, err := kv.update(ctx, key, v, e.Revision())
		switch {
		case inFlight(err):
			return 0, inFlightError(key, err)
		case isWrongLastSequence(err):
			return 0, errLeaseChanged
		}
		return rev, err
	}
	return 0, jetstream.ErrKeyExists
}

// inFlight reports the constant wrong last sequence (10164) of a replicated
// stream: another write of the subject is between its proposal and its
// application on the leader.
func inFlight(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}

// inFlightError is err, a lease write refused as in flight, without the
// jetstream.ErrKeyExists that nats.go wraps it in.
func inFlightError(key string, err error) error {
	var apiErr *jetstream.APIError
	errors.As(err, &apiErr)
	return fmt.Errorf("lease %s: %w (%w)", key, errLeaseInFlight, apiErr)
}

// heartbeat rewrites the key every ttl/3 so it never ages out while held.
// It ends when the lease is lost or released.
func (l *lease) heartbeat() {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if !l.beat() {
			return
		}
	}
}

// beat rewrites the key at its known revision. When the key changed: if it
// still holds our value (a rewrite whose acknowledgement was lost), its
// revision is adopted; if it lapsed, it is re-created; if another writer
// holds it, the lease is lost. Transient failures leave it for the next
// beat. It returns false once the lease is lost.
func (l *lease) beat() bool {
	l.beatMu.Lock()
	defer l.beatMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	nrev, err := l.kv.update(ctx, l.key, l.value, rev)
	if err != nil && isWrongLastSequence(err) {
		nrev, err = claim(ctx, l.kv, l.key, l.value, "")
		if errors.Is(err, jetstream.ErrKeyExists) {
			l.markLost()
			return false
		}
	}
	if err != nil {
		return true
	}
	l.mu.Lock()
	l.rev, l.lastBeat = nrev, time.Now()
	l.mu.Unlock()
	return true
}

// check reports whether the lease is still held as far as this process
// knows: not taken over, and refreshed within the TTL.
func (l *lease) check() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && time.Since(l.lastBeat) < l.ttl
}

// release stops the heartbeat and deletes the key if it still holds our
// value, retrying transient failures when retry is set.
func (l *lease) release(ctx context.Context) error {
	l.halt()
	if l.released != nil {
		defer l.releasedOnce.Do(l.released)
	}
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.mu.Unlock()
	if lost {
		return nil
	}
	del := func(ctx context.Context) error {
		err := l.kv.deleteAt(ctx, l.key, rev)
		if !isWrongLastSequence(err) {
			return err
		}
		// The key moved on: taken over, a retried delete that was
		// applied, or a beat whose reply was lost (it holds our value).
		e, err := l.kv.entry(ctx, l.key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return nil
		case err != nil:
			return err
		case e.Operation() != jetstream.KeyValuePut || !bytes.Equal(e.Value(), l.value):
			return nil
		}
		rev = e.Revision()
		return errLeaseChanged
	}
	var err error
	if l.retry != nil {
		err = l.retry(ctx, del)
	} else {
		err = del(ctx)
	}
	if err != nil {
		if l.unsettled != nil {
			l.unsettled()
		}
		return fmt.Errorf("release lease %s: %w", l.key, err)
	}
	return nil
}

// markLost records that another writer holds the session.
func (l *lease) markLost() {
	l.mu.Lock()
	l.lost = true
	l.mu.Unlock()
}

// halt stops the heartbeat goroutine and waits for it to end.
func (l *lease) halt() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// isWrongLastSequence reports a write refused because the key (subject)
// holds another revision. The constant form (10164) is not one: see
// inFlight.
func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
	}
	return false
}

// ensure reports whether the lease is held, refreshing it synchronously when
// the heartbeat has not succeeded within the TTL (after an outage the key
// may have lapsed; it is re-created unless another writer holds it).
func (l *lease) ensure(ctx context.Context) bool {
	if l == nil {
		return false
	}
	if l.check() {
		return true
	}
	l.mu.Lock()
	lost := l.lost
	l.mu.Unlock()
	if lost {
		return false
	}
	l.beat()
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost
}
