package bus

import (
	"errors"
	"testing"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// TestAWriterTakesBackItsOwnLease leaves a session's lease behind (a
// process killed while writing): a Store of the same writer identity opens
// the session for writing at once, one of another identity (or of none) is
// refused, and a Store never takes a lease from its own handle.
func TestAWriterTakesBackItsOwnLease(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	dead := newStore(t, e, WithWriter("watch@h/1"))
	w, err := dead.Create(ctx, header("kept"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, cmds(t, 0, 2)); err != nil {
		t.Fatal(err)
	}
	w.lease.halt() // the process dies: its lease stays for the TTL

	for _, other := range []Option{WithWriter("watch@h/2"), WithWriter("")} {
		if _, err := newStore(t, e, other).Open(ctx, "kept", Write); !errors.Is(err, ErrAlreadyOwned) {
			t.Errorf("another writer's open: %v, want ErrAlreadyOwned", err)
		}
	}
	again := newStore(t, e, WithWriter("watch@h/1"))
	h, err := again.Open(ctx, "kept", Write)
	if err != nil {
		t.Fatalf("the same writer's open: %v", err)
	}
	if _, err := again.Open(ctx, "kept", Write); !errors.Is(err, ErrAlreadyOwned) {
		t.Errorf("a second handle of the same Store: %v, want ErrAlreadyOwned", err)
	}
	if _, err := h.Append(ctx, cmds(t, 2, 1)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, h)
	if h, err = again.Open(ctx, "kept", Write); err != nil {
		t.Fatalf("an open after the close: %v", err)
	}
	mustClose(t, h)
}
