package index

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/dshq/dshq"
)

func surfaceOf(t *testing.T, x *Index, sid string, seq int64) dshq.Surface {
	t.Helper()
	p := searchEvents(t, x, EventQuery{SessionID: sid, Query: "needle", Filters: []dshq.Filter{{Kind: dshq.FilterSeq, From: f64(float64(seq)), To: f64(float64(seq))}}})
	if len(p.Hits) != 1 {
		return ""
	}
	return p.Hits[0].Surface
}

// TestUpsertReclassifies: a doc upserted again with a new surface (as the
// projector re-indexes a reclassified event) is found by its new surface
// only, and keeps the creation generation it carries.
func TestUpsertReclassifies(t *testing.T) {
	x, _ := openTest(t)
	d := doc("s", 0, 1, "needle text")
	d.Cwd = dshq.Str("/w")
	apply(t, x, 1, d, doc("s", 1, 2, "needle other"))

	var b Batch
	d.Surface, d.Generation = dshq.SurfaceShadowed, 1
	b.Upsert(d)
	b.Upsert(doc("s", 2, 3, "needle new"))
	logOnly := doc("s", 2, 3, "needle new")
	logOnly.Surface = dshq.SurfaceLogOnly // upserted earlier in the batch
	b.Upsert(logOnly)
	must(t, x.Apply(context.Background(), &b, 2))

	for seq, want := range map[int64]dshq.Surface{0: dshq.SurfaceShadowed, 1: dshq.SurfaceCurrent, 2: dshq.SurfaceLogOnly} {
		if got := surfaceOf(t, x, "s", seq); got != want {
			t.Errorf("seq %d surface = %q, want %q", seq, got, want)
		}
	}
	p := searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle text"})
	if len(p.Hits) != 1 || p.Hits[0].Cwd == nil || *p.Hits[0].Cwd != "/w" || p.Hits[0].Text != "needle text" {
		t.Fatalf("reclassified doc = %+v, want its text and cwd kept", p.Hits)
	}
	cur := searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle", Filters: []dshq.Filter{{Kind: dshq.FilterSurface, Values: strs("current")}}})
	if got := keys(cur); !reflect.DeepEqual(got, []hitKey{{"s", 1}}) {
		t.Fatalf("current docs = %v, want only s#1", got)
	}
	if got := keys(searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle", AsOf: 1})); len(got) != 2 {
		t.Fatalf("as of generation 1: %v, want the two docs indexed then", got)
	}
}

// TestDeleteSession: a deleted session leaves search; other sessions,
// including one whose id extends it, stay; an upsert after the delete in
// the same batch survives.
func TestDeleteSession(t *testing.T) {
	x, _ := openTest(t)
	var docs []Doc
	for i := 0; i < 30; i++ {
		docs = append(docs, doc("a", int64(i), 1, "needle"))
	}
	apply(t, x, 1, append(docs, doc("ab", 0, 1, "needle"), doc("b", 0, 1, "needle"))...)

	var b Batch
	b.Upsert(doc("a", 99, 1, "needle pending"))
	b.DeleteSession("a")
	b.DeleteSession("never-indexed")
	b.Upsert(doc("b", 1, 2, "needle after"))
	b.DeleteSession("b")
	b.Upsert(doc("b", 2, 3, "needle survives"))
	must(t, x.Apply(context.Background(), &b, 2))

	p := searchSessions(t, x, SessionQuery{Query: "needle"})
	if got := keys(p); !reflect.DeepEqual(got, []hitKey{{"ab", 0}, {"b", 2}}) {
		t.Fatalf("sessions after delete = %v, want ab#0 (shorter, ranked first) and b#2", got)
	}
	st, err := x.Stats()
	must(t, err)
	if st.Docs != 2 {
		t.Fatalf("%d docs left, want 2", st.Docs)
	}
}

// TestApplyRefusesInvalidDocs: a bad doc fails the whole batch with a typed
// error and changes neither content nor generation.
func TestApplyRefusesInvalidDocs(t *testing.T) {
	x, _ := openTest(t)
	apply(t, x, 1, doc("s", 0, 1, "needle"))
	bad := func(f func(*Doc)) Doc {
		d := doc("s", 1, 1, "needle")
		f(&d)
		return d
	}
	for _, c := range []struct {
		name string
		b    func(*Batch)
	}{
		{"a blank session id", func(b *Batch) { b.Upsert(bad(func(d *Doc) { d.SessionID = "" })) }},
		{"a blank type", func(b *Batch) { b.Upsert(bad(func(d *Doc) { d.Type = "" })) }},
		{"blank text", func(b *Batch) { b.Upsert(bad(func(d *Doc) { d.Text = " \n " })) }},
		{"an unknown surface", func(b *Batch) { b.Upsert(bad(func(d *Doc) { d.Surface = "future" })) }},
		{"a negative seq", func(b *Batch) { b.Upsert(bad(func(d *Doc) { d.Seq = -1 })) }},
		{"a time beyond 2^53", func(b *Batch) { b.Upsert(bad(func(d *Doc) { d.Time = 1<<53 + 1 })) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b Batch
			b.Upsert(doc("s", 7, 1, "needle good"))
			c.b(&b)
			err := x.Apply(context.Background(), &b, 9)
			if !errors.Is(err, ErrInvalidDoc) || dshq.ErrorCode(err) != dshq.CodeIndexFailed {
				t.Fatalf("apply error %v, want ErrInvalidDoc with %s", err, dshq.CodeIndexFailed)
			}
			if x.Generation() != 1 {
				t.Fatalf("generation moved to %d", x.Generation())
			}
			if p := searchEvents(t, x, EventQuery{SessionID: "s", Query: "good"}); len(p.Hits) != 0 {
				t.Fatal("part of a refused batch was applied")
			}
		})
	}
}

// TestDocIDsAreInjective: any generation, session id bytes and seq map to
// distinct ids that parse back, ordered by generation first, and docs of
// look-alike sessions stay apart.
func TestDocIDsAreInjective(t *testing.T) {
	sids := []string{"a", "0000000000000001a", "a b", "~base64", "é", "中文", "line\nbreak", "\x00nul", "0", "00000000000000000"}
	type ident struct {
		gen uint64
		sid string
		seq int64
	}
	seen := map[string]ident{}
	for _, gen := range []uint64{0, 1, 1 << 53} {
		for _, sid := range sids {
			for _, seq := range []int64{0, 1, 16, 1 << 40} {
				id := docID(gen, sid, seq)
				if prev, ok := seen[id]; ok {
					t.Fatalf("id %q of %d/%q#%d collides with %v", id, gen, sid, seq, prev)
				}
				seen[id] = ident{gen, sid, seq}
				gg, gs, gq, err := ParseDocID(id)
				if err != nil || gg != gen || gs != sid || gq != seq {
					t.Fatalf("ParseDocID(%q) = %d, %q, %d, %v; want %d, %q, %d", id, gg, gs, gq, err, gen, sid, seq)
				}
				if later := docID(gen+1, "", 0); later <= id {
					t.Fatalf("id %q of generation %d does not sort before %q of the next", id, gen, later)
				}
			}
		}
	}
	for _, bad := range []string{"", "short", "zzzzzzzzzzzzzzzz0000000000000000sid", "0000000000000000zzzzzzzzzzzzzzzzsid"} {
		if _, _, _, err := ParseDocID(bad); err == nil {
			t.Errorf("ParseDocID(%q) succeeded", bad)
		}
	}
	x, _ := openTest(t)
	var docs []Doc
	for i, sid := range sids {
		docs = append(docs, doc(sid, 1, int64(i), fmt.Sprintf("needle %d", i)))
	}
	apply(t, x, 1, docs...)
	for i, sid := range sids {
		p := searchEvents(t, x, EventQuery{SessionID: sid, Query: "needle"})
		if len(p.Hits) != 1 || p.Hits[0].SessionID != sid || p.Hits[0].Text != Sanitize(fmt.Sprintf("needle %d", i)) {
			t.Fatalf("session %q: hits %+v", sid, p.Hits)
		}
	}
}

// TestDocTextIsSanitized: NUL and the marker noncharacters are stored as
// U+FFFD, as upstream stores them.
func TestDocTextIsSanitized(t *testing.T) {
	x, _ := openTest(t)
	apply(t, x, 1, doc("s", 0, 1, "needle\x00a\uFDD0b\uFDD1c"))
	p := searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle"})
	if len(p.Hits) != 1 || p.Hits[0].Text != "needle\uFFFDa\uFFFDb\uFFFDc" {
		t.Fatalf("stored text = %+v", p.Hits)
	}
}
