package bus

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// testLeaseTTL is short so lapses happen within the test, and long enough
// that a heartbeat every TTL/3 is not starved on a loaded machine.
const testLeaseTTL = 2 * time.Second

func TestLease_TwoWritersRace(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	cfg := WithStreamConfig(StreamConfig{LeaseTTL: testLeaseTTL})
	s1, s2 := newStore(t, e, cfg), newStore(t, e, cfg)

	c, err := s1.Create(ctx, header("race"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, cmds(t, 0, 3)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, c)

	var (
		wg      sync.WaitGroup
		handles [2]*Handle
		errs    [2]error
	)
	for i, s := range []*Store{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			handles[i], errs[i] = s.Open(ctx, "race", Write)
		}()
	}
	wg.Wait()
	holderIdx := -1
	for i := range errs {
		switch {
		case errs[i] == nil && holderIdx == -1:
			holderIdx = i
		case errs[i] == nil:
			t.Fatal("both writers hold the session")
		default:
			wantKind(t, errs[i], ErrAlreadyOwned, `session "race" is already owned`)
		}
	}
	if holderIdx == -1 {
		t.Fatalf("no writer holds the session: %v", errs)
	}
	holder := handles[holderIdx]
	other := []*Store{s1, s2}[1-holderIdx]
	if _, err := holder.Append(ctx, cmds(t, 3, 2)); err != nil {
		t.Fatal(err)
	}

	t.Run("the heartbeat keeps the lease past its TTL", func(t *testing.T) {
		until := time.Now().Add(2 * testLeaseTTL)
		for time.Now().Before(until) {
			h, err := other.Open(ctx, "race", Write)
			if err == nil {
				mustClose(t, h)
			}
			wantKind(t, err, ErrAlreadyOwned, "already owned")
		}
	})

	// The holder freezes: its heartbeat stops, its lease is not released.
	holder.lease.halt()

	var taker *Handle
	t.Run("after the lease lapses the other writer takes over at the stored next seq", func(t *testing.T) {
		waitFor(t, 20*testLeaseTTL, "the lease to lapse", func() bool {
			h, err := other.Open(ctx, "race", Write)
			if err != nil && !errors.Is(err, ErrAlreadyOwned) {
				t.Fatal(err)
			}
			taker = h
			return err == nil
		})
		if taker.NextSeq() != 5 {
			t.Fatalf("next seq %d, want 5", taker.NextSeq())
		}
		if _, err := taker.Append(ctx, cmds(t, 5, 1)); err != nil {
			t.Fatal(err)
		}
	})
	defer mustClose(t, taker)

	t.Run("the frozen writer wakes up to ownership lost and stores nothing", func(t *testing.T) {
		before := streamMsgs(t, s1)
		_, err := holder.Append(ctx, cmds(t, 5, 1))
		wantKind(t, err, ErrOwnershipLost, "ownership lost")
		if got := streamMsgs(t, s1); got != before {
			t.Fatalf("stream changed %d → %d", before, got)
		}
		if err := holder.Close(ctx); err != nil {
			t.Fatalf("close after loss: %v", err)
		}
	})

	t.Run("the log holds exactly what the writers appended in order", func(t *testing.T) {
		r, err := s1.Open(ctx, "race", Read)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, r)
		got, err := r.Read(ctx, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		want := cmds(t, 0, 6)
		if len(got) != len(want) {
			t.Fatalf("read %d events, want %d", len(got), len(want))
		}
		for i := range got {
			if string(got[i].Raw) != string(want[i].Raw) {
				t.Fatalf("event %d: %s, want %s", i, got[i].Raw, want[i].Raw)
			}
		}
	})
}

func TestLease_LapseWithoutTakeoverIsRecovered(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e, WithStreamConfig(StreamConfig{LeaseTTL: testLeaseTTL}))
	w, err := s.Create(ctx, header("lapse"))
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, w)
	if _, err := w.Append(ctx, cmds(t, 0, 1)); err != nil {
		t.Fatal(err)
	}
	w.lease.halt()
	waitFor(t, 20*testLeaseTTL, "the lease key to lapse", func() bool {
		_, err := s.kv.get(ctx, LeaseKey("lapse"))
		return err != nil
	})
	if _, err := w.Append(ctx, cmds(t, 1, 1)); err != nil {
		t.Fatalf("append after an unclaimed lapse: %v", err)
	}
	if _, err := s.Open(ctx, "lapse", Write); !errors.Is(err, ErrAlreadyOwned) {
		t.Fatalf("lease not re-taken: %v", err)
	}
}

func TestLeaseKey_RoundTrips(t *testing.T) {
	for _, id := range []string{"plain-id_1", "a b", "日本語", "../x", "~tilde", "=eq"} {
		tok, err := subjectToken(id)
		if err != nil {
			t.Fatal(err)
		}
		key := LeaseKey(tok)
		if strings.Contains(key, "~") {
			t.Fatalf("lease key %q of %q holds a ~", key, id)
		}
		back, err := ParseLeaseKey(key)
		if err != nil || back != id {
			t.Fatalf("ParseLeaseKey(%q) = %q, %v; want %q", key, back, err, id)
		}
	}
	if _, err := ParseLeaseKey("bad key"); err == nil {
		t.Fatal("a key that is no token was accepted")
	}
}
