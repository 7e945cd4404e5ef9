package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/internal/natsconn"
)

// defaultImportWait is how long dshq import waits for NATS (a server
// restarting, a stream's leader being elected) before it gives up.
const defaultImportWait = time.Minute

// maxImportWait bounds --wait: a write retried longer than the stream's
// duplicate window (2 minutes) could be stored twice.
const maxImportWait = 90 * time.Second

// gaveUpError ends an import whose server stayed away past --wait.
type gaveUpError struct {
	url   string
	wait  time.Duration
	cause error
	// lost: the connection stayed lost for wait (else a request's retries
	// ran out on a transient failure).
	lost bool
}

func (e *gaveUpError) Error() string {
	if e.lost {
		return fmt.Sprintf("NATS at %s stayed unreachable for %v: gave up (%v); run the same import again to continue where it stopped", e.url, e.wait, e.cause)
	}
	return fmt.Sprintf("NATS at %s did not answer through its retries: gave up (%v); run the same import again to continue where it stopped", e.url, e.cause)
}

func (e *gaveUpError) Unwrap() error { return e.cause }

// natsWaiter says on stderr when a command waits for NATS, and ends its
// context when the wait passes its bound: a connection lost for longer
// than wait, or a request retried over transient failures (a leader
// election) for longer than that.
type natsWaiter struct {
	stderr io.Writer
	url    string
	wait   time.Duration
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	timer *time.Timer // the bound of a lost connection
	said  time.Time   // when a retry was last told
}

// waitForNATS returns ctx ended with a *gaveUpError once nc stays
// disconnected for wait, and a waiter whose notice says that a request is
// retried; stop releases them (call it before nc closes).
func (g *globals) waitForNATS(ctx context.Context, nc *nats.Conn, wait time.Duration) (context.Context, *natsWaiter, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &natsWaiter{stderr: g.stderr, url: natsconn.Redacted(g.conn.URL), wait: wait, cancel: cancel}
	nc.SetDisconnectErrHandler(func(_ *nats.Conn, err error) { w.lost(err) })
	nc.SetReconnectHandler(func(*nats.Conn) { w.back() })
	stop := func() {
		nc.SetDisconnectErrHandler(nil)
		nc.SetReconnectHandler(nil)
		w.mu.Lock()
		if w.timer != nil {
			w.timer.Stop()
		}
		w.mu.Unlock()
		cancel(nil)
	}
	return withRetryNotice(ctx, w.notice), w, stop
}

func (w *natsWaiter) lost(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		return
	}
	if err == nil {
		err = errors.New("disconnected")
	}
	fmt.Fprintf(w.stderr, "dshq: waiting for NATS at %s… (the connection was lost: %v; giving up after %v)\n", w.url, err, w.wait)
	w.timer = time.AfterFunc(w.wait, func() { w.cancel(&gaveUpError{url: w.url, wait: w.wait, cause: err, lost: true}) })
}

func (w *natsWaiter) back() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer == nil {
		return
	}
	w.timer.Stop()
	w.timer = nil
	fmt.Fprintf(w.stderr, "dshq: NATS at %s is back: continuing\n", w.url)
}

// notice says that a request failed for a reason that passes and is
// retried (at most every 5 seconds): a leader election, a server restart.
func (w *natsWaiter) notice(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil || time.Since(w.said) < 5*time.Second {
		return // the lost connection was told already, or this retry was
	}
	w.said = time.Now()
	fmt.Fprintf(w.stderr, "dshq: waiting for NATS at %s to answer (a leader election or a restart?): %v; retrying for up to %v\n", w.url, oneLine(err.Error()), w.wait)
}

// gaveUp returns the error an import ends with when its wait for NATS
// passed its bound: the context's cause, or a transient failure the
// retries ran out on (nil when err is neither).
func (w *natsWaiter) gaveUp(ctx context.Context, err error) error {
	var gu *gaveUpError
	if errors.As(context.Cause(ctx), &gu) {
		return gu
	}
	if err != nil && ctx.Err() == nil && failover.Transient(err) {
		return &gaveUpError{url: w.url, wait: w.wait, cause: err}
	}
	return nil
}

type retryNoticeKey struct{}

// withRetryNotice returns ctx carrying fn, which openStore tells of the
// transient failures its requests retry.
func withRetryNotice(ctx context.Context, fn func(error)) context.Context {
	return context.WithValue(ctx, retryNoticeKey{}, fn)
}

// retryNotice returns the function withRetryNotice put in ctx, or one that
// does nothing.
func retryNotice(ctx context.Context) func(error) {
	if fn, ok := ctx.Value(retryNoticeKey{}).(func(error)); ok {
		return fn
	}
	return func(error) {}
}
