package bus

import (
	"errors"
	"strings"
	"testing"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// TestLeaseHolderIsNamedToTheRefusedWriter: a Store's leases carry its
// holder's name; a second writer's refusal names it, Lease reads it, and a
// released lease is gone.
func TestLeaseHolderIsNamedToTheRefusedWriter(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	a := newStore(t, e, WithLeaseHolder("laptop-a (dshq watch)"))
	b := newStore(t, e, WithLeaseHolder("desk-b (dshq watch)"))
	h, err := a.Create(ctx, header("held"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Append(ctx, cmds(t, 0, 1)); err != nil {
		t.Fatal(err)
	}
	_, err = b.Open(ctx, "held", Write)
	if !errors.Is(err, ErrAlreadyOwned) || !strings.Contains(err.Error(), "already owned by another writer (held by laptop-a (dshq watch) since ") {
		t.Fatalf("second writer: %v", err)
	}
	v, err := b.Lease(ctx, "held")
	if err != nil || v == nil || v.Holder != "laptop-a (dshq watch)" || v.SessionID != "held" {
		t.Fatalf("lease: %+v %v", v, err)
	}
	mustClose(t, h)
	if v, err := b.Lease(ctx, "held"); err != nil || v != nil {
		t.Fatalf("released lease: %+v %v", v, err)
	}
	// A Store without a holder names none (the message as before).
	c := newStore(t, e)
	hc, err := c.Open(ctx, "held", Write)
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, hc)
	if _, err := b.Open(ctx, "held", Write); !errors.Is(err, ErrAlreadyOwned) || strings.Contains(err.Error(), "held by") {
		t.Fatalf("unnamed holder: %v", err)
	}
}
