package index

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dshq/dshq"
	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (scorch runs its
// introducer, persister and merger until Close). Bleve's package-level
// analysis workers live as long as the process, by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// openTest opens a fresh index in a temp dir, closed at cleanup.
func openTest(t testing.TB) (*Index, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "index")
	x, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open index: %v", err)
	}
	t.Cleanup(func() { _ = x.Close() })
	return x, dir
}

// apply upserts docs at generation gen.
func apply(t testing.TB, x *Index, gen uint64, docs ...Doc) {
	t.Helper()
	var b Batch
	for _, d := range docs {
		b.Upsert(d)
	}
	if err := x.Apply(context.Background(), &b, gen); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// doc returns a current user message doc.
func doc(sid string, seq, time int64, text string) Doc {
	return Doc{SessionID: sid, Seq: seq, Type: dshq.TypeUserMessage, Time: time, Surface: dshq.SurfaceCurrent, Text: text}
}

// hitKey names a hit as "session#seq".
type hitKey struct {
	sid string
	seq int64
}

func keys(p Page) []hitKey {
	out := []hitKey{}
	for _, h := range p.Hits {
		out = append(out, hitKey{h.SessionID, h.Seq})
	}
	return out
}

func searchSessions(t testing.TB, x *Index, q SessionQuery) Page {
	t.Helper()
	p, err := x.SearchSessions(context.Background(), q)
	if err != nil {
		t.Fatalf("search sessions %q: %v", q.Query, err)
	}
	return p
}

func searchEvents(t testing.TB, x *Index, q EventQuery) Page {
	t.Helper()
	p, err := x.SearchEvents(context.Background(), q)
	if err != nil {
		t.Fatalf("search events %q: %v", q.Query, err)
	}
	return p
}

func f64(v float64) *float64 { return &v }

func strs(vs ...string) []*string {
	out := make([]*string, len(vs))
	for i := range vs {
		out[i] = &vs[i]
	}
	return out
}
