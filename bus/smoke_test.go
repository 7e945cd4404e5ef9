package bus

import (
	"slices"
	"testing"
)

func TestStore_AppendAndReadBack(t *testing.T) {
	e := startServer(t, EmbeddedConfig{})
	s := newStore(t, e)
	ctx := testCtx(t)
	h, err := s.Create(ctx, header("s1"))
	if err != nil {
		t.Fatal(err)
	}
	want := cmds(t, 0, 5)
	if _, err := h.Append(ctx, want[:1]); err != nil {
		t.Fatal(err)
	}
	last, err := h.Append(ctx, want[1:])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("last stream seq %d", last)
	got, err := h.Read(ctx, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rawOf(got), rawOf(want)) {
		t.Fatalf("got %v", rawOf(got))
	}
	mustClose(t, h)
	s2 := newStore(t, e)
	r, err := s2.Open(ctx, "s1", Read)
	if err != nil {
		t.Fatal(err)
	}
	got, err = r.Read(ctx, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rawOf(got), rawOf(want[2:4])) {
		t.Fatalf("got %v", rawOf(got))
	}
	w, err := s2.Open(ctx, "s1", Write)
	if err != nil {
		t.Fatal(err)
	}
	if w.NextSeq() != 5 {
		t.Fatalf("next seq %d", w.NextSeq())
	}
	mustClose(t, w)
	mustClose(t, r)
}
