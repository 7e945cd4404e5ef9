package feed

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dshq/dshq"
)

func TestQueuePublishesCommitsInOrder(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	q := NewQueue(pub)
	truth := newPublished()
	for g := uint64(1); g <= 60; g++ {
		c := commitAt(t, g)
		if err := q.Enqueue(c); err != nil {
			t.Fatal(err)
		}
		truth.add(g, c, true)
	}
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if s := q.Stats(); s.Pending != 0 || s.Published != 60 {
		t.Fatalf("stats after flush: %+v", s)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(commitAt(t, 61)); !errors.Is(err, ErrQueueClosed) {
		t.Fatalf("enqueue after close: %v, want ErrQueueClosed", err)
	}
	sub, err := Tail(ctx, js, Filter{}, Oldest())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	expectSame(t, "queued", readN(t, sub, len(truth.msgs)), truth.msgs)
}

func TestQueueRetriesThroughAnOutage(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	q := NewQueue(pub)
	defer q.Close(ctx)
	if err := js.DeleteStream(ctx, dshq.FeedStream); err != nil {
		t.Fatal(err)
	}
	var want []Message
	for g := uint64(1); g <= 3; g++ {
		c := commitAt(t, g)
		if err := q.Enqueue(c); err != nil {
			t.Fatal(err)
		}
		want = append(want, c...)
	}
	// Wait until a publication has failed, then bring the stream back.
	deadline := time.Now().Add(20 * time.Second)
	for q.Stats().Retries == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no publication failed while the stream was gone")
		}
		waitCtx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		_ = q.Flush(waitCtx)
		cancel()
	}
	if _, err := EnsureStream(ctx, js, StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	sub, err := Tail(ctx, js, Filter{}, Oldest())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	expectSameCommits(t, "after the outage", readN(t, sub, len(want)), want)
}

// expectSameCommits is expectSame with each commit's messages in any
// order: an attempt that failed after the stream stored part of a commit
// (here: the stream came back between its two messages, so the first got
// no responder and the second was stored) is retried with the rest, which
// then follows the part stored (TestPartlyPublishedCommitIsCompletedByRepublishing;
// docs/protocol.md#52-messages). Commits stay in generation order.
func expectSameCommits(t *testing.T, label string, got, want []Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d messages, want %d", label, len(got), len(want))
	}
	byCommit := func(ms []Message) [][]string {
		var out [][]string
		for i, m := range ms {
			if i == 0 || m.Generation != ms[i-1].Generation {
				out = append(out, nil)
			}
			out[len(out)-1] = append(out[len(out)-1], identity(t, m))
		}
		for _, c := range out {
			slices.Sort(c)
		}
		return out
	}
	g, w := byCommit(got), byCommit(want)
	if !slices.EqualFunc(g, w, slices.Equal[[]string]) {
		t.Fatalf("%s: commits\n%q\nwant\n%q", label, g, w)
	}
}

func TestQueueRefusesWhenFullAndCloseAbandonsTheRest(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	if err := js.DeleteStream(ctx, dshq.FeedStream); err != nil {
		t.Fatal(err)
	}
	q := NewQueue(pub, WithQueueMessages(5))
	var err error
	var g uint64
	for g = 1; err == nil; g++ {
		err = q.Enqueue(commitAt(t, g))
	}
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("enqueue: %v, want ErrQueueFull", err)
	}
	if s := q.Stats(); s.PendingMessages > 5 {
		t.Fatalf("the queue holds %d messages, more than its bound 5", s.PendingMessages)
	}
	bad := commitAt(t, g)
	bad[0].Kind = "bogus"
	if err := q.Enqueue(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("enqueue of a malformed commit: %v, want ErrMalformed", err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := q.Close(closeCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close with the stream gone: %v, want the deadline", err)
	}
}
