package projection

import (
	"context"
	"testing"
	"time"
)

// TestAWatchCancelledWhileItStartsStillStops: a lease watch whose context
// ends while WatchAll subscribes is stopped without waiting for good. A
// loaded CI run hung in the drain of such a watch: nats.go had
// unsubscribed it (its context had ended) before WatchAll set the handler
// that closes Updates. Each round cancels the context at another moment
// around WatchAll, on a real bucket with a real server.
func TestAWatchCancelledWhileItStartsStillStops(t *testing.T) {
	e := newEnv(t)
	var ctxErrs, watches int
	for i := range 1000 {
		ctx, cancel := context.WithCancel(context.Background())
		delay := time.Duration(i%100) * 50 * time.Microsecond
		fired := make(chan struct{})
		timer := time.AfterFunc(delay, func() { cancel(); close(fired) })
		w, err := e.kv.WatchAll(ctx)
		if err != nil {
			ctxErrs++
			<-fired
			continue
		}
		watches++
		<-fired
		stopped := make(chan struct{})
		go func() { stopWatch(w); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(time.Minute): // a guard against a hang, not a timing bound
			t.Fatalf("round %d (cancelled after %v): the stop of the watch never returned", i, delay)
		}
		timer.Stop()
	}
	t.Logf("%d watches stopped, %d WatchAll calls ended by the cancel", watches, ctxErrs)
}
