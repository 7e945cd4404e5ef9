package testenv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// ReadyTimeout bounds how long RunUntilReady waits for its part to be
// ready, and for it to stop.
const ReadyTimeout = 60 * time.Second

// Running is a part a test runs in a goroutine of its own (a whole node, as
// `dshq serve` runs it), with the information it reported when ready.
type Running[I any] struct {
	// Info is what the part reported when it became ready.
	Info   I
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
	waited bool
}

// RunUntilReady runs run(ctx, ready) in a goroutine and returns once run
// calls ready, failing t if run returns first or is not ready within
// ReadyTimeout. When t ends the part is cancelled and waited for, and an
// error it ends with fails t, unless the test took that error through Stop
// or Wait.
//
// Use it for node.Run: testenv.RunUntilReady(t, func(ctx context.Context,
// ready func(node.Info)) error { return node.Run(ctx, cfg, ready) }).
func RunUntilReady[I any](t testing.TB, run func(ctx context.Context, ready func(I)) error) *Running[I] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running[I]{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan I, 1)
	go func() { r.done <- run(ctx, func(i I) { ready <- i }) }()
	t.Cleanup(func() {
		waited := r.waited
		if err := r.Stop(t); err != nil && !waited && !errors.Is(err, context.Canceled) {
			t.Errorf("stopped with %v", err)
		}
	})
	select {
	case r.Info = <-ready:
	case err := <-r.done:
		r.done <- err
		t.Fatalf("did not start: %v", err)
	case <-time.After(ReadyTimeout):
		t.Fatalf("not ready after %v", ReadyTimeout)
	}
	return r
}

// Stop cancels the part and returns the error run ended with.
func (r *Running[I]) Stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	return r.Wait(t)
}

// Wait waits (at most ReadyTimeout) for run to return on its own or after
// Stop, and returns its error.
func (r *Running[I]) Wait(t testing.TB) error {
	t.Helper()
	r.once.Do(func() {
		select {
		case r.err = <-r.done:
		case <-time.After(ReadyTimeout):
			t.Fatalf("did not stop within %v", ReadyTimeout)
		}
	})
	r.waited = true
	return r.err
}

// Exited reports, without waiting, whether run has returned, and its error.
func (r *Running[I]) Exited() (exited bool, err error) {
	select {
	case err := <-r.done:
		r.done <- err // for Wait
		return true, err
	default:
		return false, nil
	}
}
