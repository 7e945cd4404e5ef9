package projection

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
)

// Replicas of one stream — two projectors, each with its own directory and
// consumer — have the same lineage, so cursors mean the same on both, while
// each build keeps its own epoch; a rebuild keeps the lineage and changes
// the epoch; a stream deleted and created again under the same name is
// another lineage.
func TestLineageIsTheStreamsAndTheVersions(t *testing.T) {
	e := newEnv(t)
	_, last := e.publishLog(readLines(t, "upstream-2.5.jsonl"))
	a := e.start(t.TempDir())
	b := e.start(t.TempDir(), WithDurable("dsh-projector-b"))
	waitGen(t, a.p, last)
	waitGen(t, b.p, last)
	la, lb := a.p.Lineage(), b.p.Lineage()
	if !strings.HasPrefix(la, "l1-") || la != lb {
		t.Fatalf("lineages %q and %q: want one, derived from the stream", la, lb)
	}
	if a.p.Epoch() == b.p.Epoch() {
		t.Errorf("two builds share the epoch %q", a.p.Epoch())
	}
	view(t, b.p, func(s Snapshot) error {
		if s.Lineage() != la || s.Epoch() != b.p.Epoch() {
			t.Errorf("snapshot: lineage %q epoch %q; want %q %q", s.Lineage(), s.Epoch(), la, b.p.Epoch())
		}
		return nil
	})

	epoch := a.p.Epoch()
	if err := a.p.Rebuild(context.Background(), nil); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if a.p.Epoch() == epoch || a.p.Lineage() != la {
		t.Errorf("after a rebuild: epoch %q (was %q), lineage %q (was %q); want a new epoch, the same lineage",
			a.p.Epoch(), epoch, a.p.Lineage(), la)
	}
	b.stop()
	a.stop()

	ctx := context.Background()
	if err := e.js.DeleteStream(ctx, dshq.SessionStream); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStream(ctx, e.js, bus.StreamConfig{LeaseTTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	c := e.open(t.TempDir())
	defer c.Close()
	if c.Lineage() == la || !strings.HasPrefix(c.Lineage(), "l1-") {
		t.Errorf("a stream created again has lineage %q, the old one's was %q", c.Lineage(), la)
	}
}

// A second projector on the durable another one pulls from refuses to run
// (ErrDurableInUse) rather than take the consumer from it at every start;
// the first keeps projecting.
func TestASecondProjectorOnTheSameDurableIsRefused(t *testing.T) {
	e := newEnv(t)
	_, last := e.publishLog(readLines(t, "upstream-2.5.jsonl"))
	a := e.start(t.TempDir())
	waitGen(t, a.p, last)
	b := e.open(t.TempDir())
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Run(ctx); !errors.Is(err, ErrDurableInUse) {
		t.Fatalf("a second projector on dsh-projector: Run = %v, want ErrDurableInUse", err)
	}
	_, more := e.publishLog(withID(t, readLines(t, "upstream-2.5.jsonl"), "after-refusal"))
	waitGen(t, a.p, more)
}
