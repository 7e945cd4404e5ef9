package bus

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// TestAnImportOfAStoredLogWritesNothing imports a log, then the same log
// again: the second import is present and writes nothing at all, not even
// the session's lease (which would turn it live for a moment in the feed).
func TestAnImportOfAStoredLogWritesNothing(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	hdr := dshq.HeaderRecord{Header: header("present"), FormatVersion: dshq.FormatVersion2}
	events := []dshq.Event{ev(t, 0, "turn/start", map[string]any{"turn": "t1"})}
	if res, err := s.Import(ctx, hdr, events); err != nil || res.Stored != 2 {
		t.Fatalf("first import: %+v, %v", res, err)
	}
	js, err := jetstream.New(e.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	last := func() (uint64, uint64) {
		t.Helper()
		var seqs [2]uint64
		for i, name := range []string{s.opts.stream.Name, "KV_" + s.opts.stream.LeaseBucket} {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			seqs[i] = st.CachedInfo().State.LastSeq
		}
		return seqs[0], seqs[1]
	}
	log, leases := last()
	res, err := s.Import(ctx, hdr, events)
	if err != nil || res.Stored != 0 || res.AlreadyPresent != 2 {
		t.Fatalf("second import: %+v, %v", res, err)
	}
	if l2, k2 := last(); l2 != log || k2 != leases {
		t.Fatalf("the second import wrote: stream %d → %d, lease bucket %d → %d", log, l2, leases, k2)
	}
}
