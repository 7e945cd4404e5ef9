// Package lifecycle is the restart loop of dshq's processes: after a NATS
// connection closed for good, node (dshq serve, bin/projector) and
// bin/query connect again with the same pacing, through
// cenkalti/backoff/v4's exponential backoff.
package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Restart pacing after a connection closed for good.
const (
	// FirstWait is the wait before the first attempt.
	FirstWait = 250 * time.Millisecond
	// MaxWait caps the doubling waits.
	MaxWait = 30 * time.Second
	// ReconnectFor bounds how long a process tries to connect again.
	ReconnectFor = time.Minute
)

// Reconnect connects again after the connection closed for good (cause):
// it waits first (FirstWait when 0), calls connect, and while connect fails
// with an error retry accepts, waits twice as long (at most MaxWait) and
// calls it again, for at most ReconnectFor. Before each wait it calls
// waiting with the failure that caused it. It returns what connect
// returned and the last wait (a process whose new life ends soon doubles
// it next time); when ctx ends first, the zero T and no error.
func Reconnect[T any](ctx context.Context, first time.Duration, cause error, waiting func(cause error, wait time.Duration),
	connect func() (T, error), retry func(error) bool) (T, time.Duration, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = first
	if b.InitialInterval <= 0 {
		b.InitialInterval = FirstWait
	}
	b.Multiplier, b.RandomizationFactor, b.MaxInterval, b.MaxElapsedTime = 2, 0, MaxWait, 0
	b.Reset()
	deadline := time.Now().Add(ReconnectFor)
	var zero T
	for wait := b.NextBackOff(); ; wait = b.NextBackOff() {
		waiting(cause, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return zero, wait, nil
		case <-t.C:
		}
		v, err := connect()
		if err == nil {
			return v, wait, nil
		}
		if !retry(err) || time.Now().After(deadline) {
			return zero, wait, fmt.Errorf("connect again after the connection closed (%v): %w", cause, err)
		}
		cause = err
	}
}

// Sleep waits d, or until ctx ends (then it returns ctx.Err()): the one
// cancellable wait of the processes' retry loops.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
