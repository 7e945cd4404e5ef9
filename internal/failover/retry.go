package failover

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// The bounds of a key-value operation's retries (the search cursor
// bucket's): through a leader election of its stream (4-9 s after the loss
// of a server) and a margin, each attempt bounded.
const (
	KVRetryFor = 15 * time.Second
	KVAttempt  = 2 * time.Second
)

// Retry runs op until it succeeds, fails other than transiently (Transient)
// or retryFor passes. Each attempt is bounded by attempt and interrupted by
// a reconnect of nc or a leader election of stream, after which the next
// attempt starts at once; a transient failure waits 20 ms, doubling up to
// 250 ms, or until such a change.
func Retry(ctx context.Context, nc *nats.Conn, stream string, retryFor, attempt time.Duration, op func(ctx context.Context) error) error {
	watch := For(nc, StreamLeaderElected(stream))
	deadline := time.Now().Add(retryFor)
	pause := 20 * time.Millisecond
	for {
		changed := watch.Changed()
		actx, release := watch.Attempt(ctx, attempt)
		err := op(actx)
		cut := Interrupted(actx)
		release()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case !cut && !Transient(err), time.Now().After(deadline):
			return err
		case cut:
			continue
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-changed:
		case <-ctx.Done():
		}
		t.Stop()
		pause = min(2*pause, 250*time.Millisecond)
	}
}
