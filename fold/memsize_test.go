package fold

import (
	"testing"
	"unsafe"
)

func TestMemSizeCountsTheDecodedSurface(t *testing.T) {
	for _, every := range []int{0, 20} {
		h, events := syntheticSession(t, 2000, every)
		r, err := Fold(h, events, Lenient)
		if err != nil {
			t.Fatal(err)
		}
		s := r.State
		enc := mustMarshal(t, s)
		size := s.MemSize()
		floor := int64(unsafe.Sizeof(*s)) + int64(len(s.nodes))*int64(unsafe.Sizeof(node{}))
		if size < floor {
			t.Fatalf("compact every %d: MemSize %d is below the struct and its %d nodes (%d)", every, size, len(s.nodes), floor)
		}
		if size < int64(len(enc)) {
			t.Fatalf("compact every %d: MemSize %d is below the encoded size %d", every, size, len(enc))
		}
		// A decoded copy holds the same data: its estimate is no larger
		// than the original's (whose slices may have spare capacity).
		if got := roundTrip(t, s).MemSize(); got > size {
			t.Fatalf("compact every %d: decoded copy's MemSize %d exceeds the original's %d", every, got, size)
		}
	}
}
