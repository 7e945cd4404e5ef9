package index

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/dshq/dshq"
)

func TestOpenCreatesAFreshIndex(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(dir string) error
	}{
		{"when the directory is missing", func(string) error { return nil }},
		{"when its parent is missing too", func(string) error { return nil }},
		{"when the directory is empty", func(dir string) error { return os.MkdirAll(dir, 0o700) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "index")
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			x, err := Open(dir, Options{})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer x.Close()
			if g := x.Generation(); g != 0 {
				t.Fatalf("generation = %d, want 0", g)
			}
			st, err := x.Stats()
			if err != nil || st.Docs != 0 || st.DiskBytes <= 0 {
				t.Fatalf("stats = %+v, %v; want 0 docs and some bytes", st, err)
			}
		})
	}
}

func TestGenerationIsDurableWithContent(t *testing.T) {
	x, dir := openTest(t)
	apply(t, x, 5, doc("s", 0, 1, "first needle"))
	apply(t, x, 9, doc("s", 1, 2, "second needle"))
	if g := x.Generation(); g != 9 {
		t.Fatalf("generation = %d, want 9", g)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	y, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer y.Close()
	if g := y.Generation(); g != 9 {
		t.Fatalf("generation after reopen = %d, want 9", g)
	}
	p := searchEvents(t, y, EventQuery{SessionID: "s", Query: "needle"})
	if len(p.Hits) != 2 || p.Generation != 9 {
		t.Fatalf("after reopen: %d hits at generation %d, want 2 at 9", len(p.Hits), p.Generation)
	}
	st, err := y.Stats()
	if err != nil || st.Docs != 2 || st.Generation != 9 {
		t.Fatalf("stats = %+v, %v", st, err)
	}
}

// TestOpenRefusesUnusableDirectories: whatever is in the directory, Open
// returns a typed error the projector can act on (delete and rebuild).
func TestOpenRefusesUnusableDirectories(t *testing.T) {
	garbage := []byte("this is not an index \x00\xff\xfe garbage garbage garbage")
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   error
	}{
		{"a directory of unrelated files is corrupt", func(t *testing.T, dir string) {
			must(t, os.MkdirAll(dir, 0o700))
			must(t, os.WriteFile(filepath.Join(dir, "notes.txt"), garbage, 0o600))
		}, ErrCorrupt},
		{"a regular file in place of the directory is corrupt", func(t *testing.T, dir string) {
			must(t, os.WriteFile(dir, garbage, 0o600))
		}, ErrCorrupt},
		{"garbage index metadata is corrupt", func(t *testing.T, dir string) {
			makeIndex(t, dir)
			must(t, os.WriteFile(filepath.Join(dir, "index_meta.json"), garbage, 0o600))
		}, ErrCorrupt},
		{"a garbage root store is corrupt", func(t *testing.T, dir string) {
			makeIndex(t, dir)
			must(t, os.WriteFile(filepath.Join(dir, "store", "root.bolt"), garbage, 0o600))
		}, ErrCorrupt},
		{"a truncated root store is corrupt", func(t *testing.T, dir string) {
			makeIndex(t, dir)
			must(t, os.Truncate(filepath.Join(dir, "store", "root.bolt"), 100))
		}, ErrCorrupt},
		{"a missing store is corrupt", func(t *testing.T, dir string) {
			makeIndex(t, dir)
			must(t, os.RemoveAll(filepath.Join(dir, "store")))
		}, ErrCorrupt},
		{"a foreign Bleve index is incompatible", func(t *testing.T, dir string) {
			idx, err := bleve.New(dir, bleve.NewIndexMapping())
			must(t, err)
			must(t, idx.Index("x", map[string]any{"text": "hello"}))
			must(t, idx.Close())
		}, ErrIncompatible},
		{"an index of another mapping version is incompatible", func(t *testing.T, dir string) {
			makeIndex(t, dir)
			idx, err := bleve.OpenUsing(dir, map[string]any{"unsafe_batch": false}) // written before Close returns
			must(t, err)
			must(t, idx.SetInternal(keyMapping, []byte("dshq-index-v0")))
			must(t, idx.Close())
		}, ErrIncompatible},
		{"an index without a readable generation is corrupt", func(t *testing.T, dir string) {
			makeIndex(t, dir)
			idx, err := bleve.OpenUsing(dir, map[string]any{"unsafe_batch": false}) // written before Close returns
			must(t, err)
			must(t, idx.SetInternal(keyGeneration, []byte("xyz")))
			must(t, idx.Close())
		}, ErrCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "index")
			c.damage(t, dir)
			x, err := Open(dir, Options{})
			if err == nil {
				x.Close()
				t.Fatal("open succeeded")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("open error %v is not %v", err, c.want)
			}
			if code := dshq.ErrorCode(err); code != dshq.CodeIndexFailed {
				t.Fatalf("code = %q, want %q", code, dshq.CodeIndexFailed)
			}
			// The documented recovery works.
			must(t, os.RemoveAll(dir))
			x, err = Open(dir, Options{})
			if err != nil {
				t.Fatalf("open after removing: %v", err)
			}
			must(t, x.Close())
		})
	}
}

// TestGarbageSegmentsFallBackToAConsistentSnapshot: scorch skips a snapshot
// whose segments it cannot load and opens an older one. Either way the index
// then holds exactly the content of the generation it reports (here the
// empty one it was created with), so the projector replays from there.
func TestGarbageSegmentsFallBackToAConsistentSnapshot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "index")
	makeIndex(t, dir)
	segs, _ := filepath.Glob(filepath.Join(dir, "store", "*.zap"))
	if len(segs) == 0 {
		t.Fatal("no segment written")
	}
	for _, s := range segs {
		must(t, os.WriteFile(s, []byte("garbage garbage garbage garbage"), 0o600))
	}
	x, err := Open(dir, Options{})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrIncompatible) {
			t.Fatalf("open error %v is neither corrupt nor incompatible", err)
		}
		return
	}
	defer x.Close()
	st, err := x.Stats()
	must(t, err)
	if st.Generation != 0 || st.Docs != 0 {
		t.Fatalf("fell back to generation %d with %d docs, want the empty generation 0", st.Generation, st.Docs)
	}
}

func makeIndex(t *testing.T, dir string) {
	t.Helper()
	x, err := Open(dir, Options{})
	must(t, err)
	apply(t, x, 3, doc("s", 0, 1, "some text"))
	must(t, x.Close())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesANegativeSnippetLength(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "index"), Options{SnippetChars: -1})
	if code := dshq.ErrorCode(err); code != dshq.CodeInvalidConfig {
		t.Fatalf("code = %q (%v), want %q", code, err, dshq.CodeInvalidConfig)
	}
}

func TestAClosedIndexFailsClearly(t *testing.T) {
	x, _ := openTest(t)
	must(t, x.Close())
	must(t, x.Close()) // idempotent
	ctx := context.Background()
	var b Batch
	b.Upsert(doc("s", 0, 1, "text"))
	_, statsErr := x.Stats()
	_, evErr := x.SearchEvents(ctx, EventQuery{SessionID: "s", Query: "text"})
	_, sErr := x.SearchSessions(ctx, SessionQuery{Query: "text"})
	for name, err := range map[string]error{
		"apply":           x.Apply(ctx, &b, 1),
		"stats":           statsErr,
		"search events":   evErr,
		"search sessions": sErr,
	} {
		if !errors.Is(err, ErrClosed) || dshq.ErrorCode(err) != dshq.CodeIndexFailed {
			t.Errorf("%s after close: %v, want ErrClosed with %s", name, err, dshq.CodeIndexFailed)
		}
	}
}

// TestASecondOpenOfAnOpenIndexIsLockedNotCorrupt: the directory is in use,
// not damaged, so the error must not invite deleting it, and Open must not
// hang.
func TestASecondOpenOfAnOpenIndexIsLockedNotCorrupt(t *testing.T) {
	x, dir := openTest(t)
	apply(t, x, 4, doc("s", 0, 1, "needle"))
	_, err := Open(dir, Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || errors.Is(err, ErrCorrupt) || dshq.ErrorCode(err) != dshq.CodeIndexFailed {
		t.Fatalf("second open: %v, want ErrLocked (not ErrCorrupt)", err)
	}
	if p := searchEvents(t, x, EventQuery{SessionID: "s", Query: "needle"}); len(p.Hits) != 1 {
		t.Fatal("the first index stopped working")
	}
	must(t, x.Close())
	y, err := Open(dir, Options{LockTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("open after the holder closed: %v", err)
	}
	must(t, y.Close())
}
