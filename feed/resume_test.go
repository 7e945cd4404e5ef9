package feed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dshq/dshq"
)

// published is the ground truth of what a test published: every message
// in publication order, with the commit it belonged to.
type published struct {
	mu   sync.Mutex
	msgs []Message
	// dataEnd[g] is the number of messages published through the data
	// commit of generation g.
	dataEnd map[uint64]int
	last    uint64 // the last data generation published
	// changed is closed and replaced on every add.
	changed chan struct{}
}

func newPublished() *published {
	return &published{dataEnd: map[uint64]int{}, changed: make(chan struct{})}
}

// through waits until the data commit of generation g is recorded and
// returns the messages published through it.
func (p *published) through(ctx context.Context, t *testing.T, g uint64) []Message {
	t.Helper()
	for {
		p.mu.Lock()
		n, ok := p.dataEnd[g]
		msgs, ch := p.msgs[:n:n], p.changed
		p.mu.Unlock()
		if ok {
			return msgs
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("generation %d was never recorded as published", g)
		}
	}
}

func (p *published) add(gen uint64, msgs []Message, data bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(p.msgs, msgs...)
	if data {
		p.dataEnd[gen] = len(p.msgs)
		p.last = gen
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *published) lastGen() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// commitAt builds the data commit of generation g: one to three events of
// sessions in two workspaces, so that commits have varied sizes; the first
// is always in workspace /ws/a.
func commitAt(t testing.TB, g uint64) []Message {
	var msgs []Message
	for i := range int(g%3) + 1 {
		cwd := "/ws/a"
		if i > 0 && (int(g)+i)%2 == 1 {
			cwd = "/ws/b"
		}
		msgs = append(msgs, eventMsg(t, g, cwd, fmt.Sprintf("s-%d", i), int64(g)))
	}
	return msgs
}

// publishRange publishes data commits from..to, and after every fourth a
// lease-only commit at the same generation.
func publishRange(ctx context.Context, t testing.TB, pub *Publisher, truth *published, from, to uint64) error {
	for g := from; g <= to; g++ {
		msgs := commitAt(t, g)
		if err := pub.Publish(ctx, msgs); err != nil {
			return err
		}
		truth.add(g, msgs, true)
		if g%4 == 0 {
			lease := []Message{leaseMsg(t, g, "/ws/a", "s-0", g%8 == 0)}
			if err := pub.Publish(ctx, lease); err != nil {
				return err
			}
			truth.add(g, lease, false)
		}
	}
	return nil
}

// readThrough reads sub until it has the last message of the data commit
// of generation target (commitAt) that f selects, and returns what it
// read.
func readThrough(ctx context.Context, t *testing.T, sub *Subscription, target uint64, f Filter) []Message {
	t.Helper()
	var lastOfTarget string
	for _, m := range commitAt(t, target) {
		if f.Workspace == "" || m.Workspace == f.Workspace {
			lastOfTarget = identity(t, m)
		}
	}
	var got []Message
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("next after %d messages (last %+v): %v", len(got), lastOf(got), err)
		}
		got = append(got, m)
		if identity(t, m) == lastOfTarget {
			return got
		}
		if m.Generation > target {
			t.Fatalf("read past generation %d without seeing its last message", target)
		}
	}
}

func expectSame(t *testing.T, label string, got, want []Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d messages, want %d", label, len(got), len(want))
	}
	for i := range got {
		if g, w := identity(t, got[i]), identity(t, want[i]); g != w {
			t.Fatalf("%s: message %d is\n%s\nwant\n%s", label, i, g, w)
		}
	}
}

func TestResumeFromEveryGenerationDeliversExactlyTheSuffix(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	truth := newPublished()
	const initial, rounds, perStep = 16, 3, 2
	if err := publishRange(ctx, t, pub, truth, 1, initial); err != nil {
		t.Fatal(err)
	}

	// A publisher publishes perStep more commits each time it is poked; the
	// test pokes it just before each subscription starts, so publication
	// races the catch-up and the hand-off to live.
	poke := make(chan struct{}, rounds*(initial+1))
	pubErr := make(chan error, 1)
	go func() {
		next := uint64(initial + 1)
		for range poke {
			if err := publishRange(ctx, t, pub, truth, next, next+perStep-1); err != nil {
				pubErr <- err
				return
			}
			next += perStep
		}
		pubErr <- nil
	}()
	defer func() {
		close(poke)
		if err := <-pubErr; err != nil {
			t.Errorf("publisher: %v", err)
		}
	}()

	wsA := wsOf("/ws/a")
	for round := 0; round < rounds; round++ {
		// Odd rounds tail one workspace: the search then jumps over
		// messages of the other.
		f := Filter{}
		if round%2 == 1 {
			f.Workspace = wsA
		}
		for g := uint64(0); g <= initial; g++ {
			target := truth.lastGen() + perStep
			poke <- struct{}{}
			sub, err := Tail(ctx, js, f, AfterGeneration(g))
			if err != nil {
				t.Fatalf("tail after %d: %v", g, err)
			}
			got := readThrough(ctx, t, sub, target, f)
			sub.Stop()

			var want []Message
			for _, m := range truth.through(ctx, t, target) {
				if key(m.Generation, m.Kind) > 2*g && (f.Workspace == "" || m.Workspace == f.Workspace) {
					want = append(want, m)
				}
			}
			expectSame(t, fmt.Sprintf("round %d, after generation %d (through %d)", round, g, target), got, want)
		}
	}
}

func TestResumeAfterEveryPositionDeliversExactlyTheRest(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	truth := newPublished()
	if err := publishRange(ctx, t, pub, truth, 1, 16); err != nil {
		t.Fatal(err)
	}
	all := truth.msgs
	for p := 0; p <= len(all); p++ {
		sub, err := Tail(ctx, js, Filter{}, AfterPosition(uint64(p)))
		if err != nil {
			t.Fatalf("tail after position %d: %v", p, err)
		}
		var got []Message
		for len(got) < len(all)-p {
			m, err := sub.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Position != uint64(p+len(got)+1) {
				t.Fatalf("after position %d: message %d has position %d", p, len(got), m.Position)
			}
			if want := uint64(len(all)) - m.Position; m.Pending != want {
				t.Fatalf("after position %d: message at %d has %d pending, want %d", p, m.Position, m.Pending, want)
			}
			got = append(got, m)
		}
		sub.Stop()
		expectSame(t, fmt.Sprintf("after position %d", p), got, all[p:])
	}
}

func TestLiveStartSeesOnlyLaterMessages(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	truth := newPublished()
	if err := publishRange(ctx, t, pub, truth, 1, 5); err != nil {
		t.Fatal(err)
	}
	sub, err := Tail(ctx, js, Filter{}, Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	before := len(truth.msgs)
	if err := publishRange(ctx, t, pub, truth, 6, 7); err != nil {
		t.Fatal(err)
	}
	got := readThrough(ctx, t, sub, 7, Filter{})
	expectSame(t, "live", got, truth.through(ctx, t, 7)[before:])
}

func TestStoppedSubscriptionReturnsErrClosed(t *testing.T) {
	_, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	sub, err := Tail(ctx, js, Filter{}, Oldest())
	if err != nil {
		t.Fatal(err)
	}
	sub.Stop()
	if _, err := sub.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("next after stop: %v, want ErrClosed", err)
	}
}

func lastOf(ms []Message) any {
	if len(ms) == 0 {
		return nil
	}
	m := ms[len(ms)-1]
	return struct {
		Gen  uint64
		Kind Kind
		Pos  uint64
	}{m.Generation, m.Kind, m.Position}
}

func TestSubscribeCallsFnInOrderUntilItFails(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	truth := newPublished()
	if err := publishRange(ctx, t, pub, truth, 1, 6); err != nil {
		t.Fatal(err)
	}
	enough := errors.New("enough")
	var got []Message
	err := Subscribe(ctx, js, Filter{}, AfterGeneration(2), func(m Message) error {
		got = append(got, m)
		if m.Generation == 6 && m.Kind == KindEvent && identity(t, m) == identity(t, commitAt(t, 6)[len(commitAt(t, 6))-1]) {
			return enough
		}
		return nil
	})
	if !errors.Is(err, enough) {
		t.Fatalf("subscribe returned %v, want fn's error", err)
	}
	var want []Message
	for _, m := range truth.through(ctx, t, 6) {
		if key(m.Generation, m.Kind) > 4 {
			want = append(want, m)
		}
	}
	expectSame(t, "subscribe", got, want)

	// With nothing to deliver, Subscribe returns when its context ends.
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	err = Subscribe(cctx, js, Filter{}, Live(), func(Message) error { return nil }, WithSubscribeStream(dshq.FeedStream))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("subscribe returned %v, want the context's deadline", err)
	}
}
