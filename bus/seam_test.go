package bus

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// streamMsgs returns the number of records in the stream.
func streamMsgs(t testing.TB, s *Store) uint64 {
	t.Helper()
	info, err := s.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// publishRaw publishes a record on a session subject directly, bypassing the
// SDK, to plant what a foreign or broken writer could store.
func publishRaw(t testing.TB, s *Store, id string, data string) {
	t.Helper()
	tok := mustToken(t, id)
	if _, err := s.js.Publish(context.Background(), dshq.LogSubjectPrefix+tok, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

func mustToken(t testing.TB, id string) string {
	t.Helper()
	tok, err := subjectToken(id)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func wantKind(t testing.TB, err error, kind error, msgPart string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v (%T), want kind %v", err, err, kind)
	}
	if msgPart != "" && !strings.Contains(err.Error(), msgPart) {
		t.Fatalf("error %q does not contain %q", err, msgPart)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *bus.Error", err)
	}
}

// Item 44: duplicate creates, concurrent creates, close-without-append.
func TestCreate_DuplicatesAndRaces(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s1, s2 := newStore(t, e), newStore(t, e)

	t.Run("a second create of a pending id in the same store is refused", func(t *testing.T) {
		h, err := s1.Create(ctx, header("pending"))
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, h)
		_, err = s1.Create(ctx, header("pending"))
		wantKind(t, err, ErrAlreadyExists, `session "pending" already exists`)
	})
	t.Run("a create of an id pending in another store is refused", func(t *testing.T) {
		h, err := s1.Create(ctx, header("pending2"))
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, h)
		_, err = s2.Create(ctx, header("pending2"))
		wantKind(t, err, ErrAlreadyExists, "already exists")
	})
	t.Run("a create of a materialised id is refused in the same and a fresh store", func(t *testing.T) {
		h, err := s1.Create(ctx, header("stored"))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		mustClose(t, h)
		for _, s := range []*Store{s1, s2, newStore(t, e)} {
			_, err = s.Create(ctx, header("stored"))
			wantKind(t, err, ErrAlreadyExists, `session "stored" already exists`)
		}
	})
	t.Run("concurrent creates from many stores have exactly one winner", func(t *testing.T) {
		stores := []*Store{s1, s2, newStore(t, e), newStore(t, e)}
		var wg sync.WaitGroup
		results := make([]error, 16)
		handles := make([]*Handle, 16)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				handles[i], results[i] = stores[i%len(stores)].Create(ctx, header("contended"))
			}()
		}
		wg.Wait()
		wins := 0
		for i, err := range results {
			if err == nil {
				wins++
				defer mustClose(t, handles[i])
				continue
			}
			wantKind(t, err, ErrAlreadyExists, "already exists")
		}
		if wins != 1 {
			t.Fatalf("%d winners, want 1", wins)
		}
	})
	t.Run("closing a created session that was never appended frees the id and stores nothing", func(t *testing.T) {
		before := streamMsgs(t, s1)
		h, err := s1.Create(ctx, header("ephemeral"))
		if err != nil {
			t.Fatal(err)
		}
		if snap, err := s1.Stat(ctx, "ephemeral"); err != nil || snap == nil {
			t.Fatalf("pending session not visible to its store: %v %v", snap, err)
		}
		if snap, err := s2.Stat(ctx, "ephemeral"); err != nil || snap != nil {
			t.Fatalf("pending session visible to another store: %v %v", snap, err)
		}
		mustClose(t, h)
		if got := streamMsgs(t, s1); got != before {
			t.Fatalf("stream grew from %d to %d", before, got)
		}
		if snap, err := s1.Stat(ctx, "ephemeral"); err != nil || snap != nil {
			t.Fatalf("closed pending session still visible: %v %v", snap, err)
		}
		h, err = s2.Create(ctx, header("ephemeral"))
		if err != nil {
			t.Fatalf("id not freed: %v", err)
		}
		mustClose(t, h)
	})
}

// Item 45: single writer, before and after materialisation.
func TestOpen_SingleWriter(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s1, s2 := newStore(t, e), newStore(t, e)

	h, err := s1.Create(ctx, header("w"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the creator blocks a write open before materialisation", func(t *testing.T) {
		_, err := s1.Open(ctx, "w", Write)
		wantKind(t, err, ErrAlreadyOwned, `session "w" is already owned`)
	})
	t.Run("another store does not see an unmaterialised session", func(t *testing.T) {
		_, err := s2.Open(ctx, "w", Write)
		wantKind(t, err, ErrNotFound, `session "w" not found`)
	})
	if _, err := h.Append(ctx, cmds(t, 0, 3)); err != nil {
		t.Fatal(err)
	}
	t.Run("a materialised session owned elsewhere refuses write opens from every store", func(t *testing.T) {
		for _, s := range []*Store{s1, s2} {
			_, err := s.Open(ctx, "w", Write)
			wantKind(t, err, ErrAlreadyOwned, "already owned")
		}
	})
	t.Run("a read open works while another handle writes and sees its appends", func(t *testing.T) {
		r, err := s2.Open(ctx, "w", Read)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, r)
		if _, err := h.Append(ctx, cmds(t, 3, 1)); err != nil {
			t.Fatal(err)
		}
		got, err := r.Read(ctx, 0, -1)
		if err != nil || len(got) != 4 {
			t.Fatalf("read %d events, %v; want 4", len(got), err)
		}
	})
	mustClose(t, h)
	t.Run("after close a new writer continues at the stored next seq", func(t *testing.T) {
		w, err := s2.Open(ctx, "w", Write)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, w)
		if w.NextSeq() != 4 {
			t.Fatalf("next seq %d, want 4", w.NextSeq())
		}
		_, err = w.Append(ctx, cmds(t, 3, 1))
		wantKind(t, err, ErrInvalidArgument, `append seq mismatch for "w": expected 4 at index 0, got 3`)
		_, err = w.Append(ctx, append(cmds(t, 4, 1), cmds(t, 6, 1)...))
		wantKind(t, err, ErrInvalidArgument, `append seq mismatch for "w": expected 5 at index 1, got 6`)
		if _, err := w.Append(ctx, cmds(t, 4, 2)); err != nil {
			t.Fatal(err)
		}
		snap, err := s1.Stat(ctx, "w")
		if err != nil || snap.EventCount != 6 {
			t.Fatalf("stat %+v %v, want 6 events", snap, err)
		}
	})
}

// Item 46: read-only and closed handles.
func TestHandle_ReadOnlyAndClosed(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	w, err := s.Create(ctx, header("ro"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(ctx, cmds(t, 0, 2)); err != nil {
		t.Fatal(err)
	}
	r, err := s.Open(ctx, "ro", Read)
	if err != nil {
		t.Fatal(err)
	}
	before := streamMsgs(t, s)
	t.Run("a read handle refuses append and flush and stores nothing", func(t *testing.T) {
		_, err := r.Append(ctx, cmds(t, 2, 1))
		wantKind(t, err, ErrReadOnly, "read-only")
		wantKind(t, r.Flush(ctx), ErrReadOnly, "read-only")
		_, err = Resume(ctx, r)
		wantKind(t, err, ErrReadOnly, "read-only")
		if got := streamMsgs(t, s); got != before {
			t.Fatalf("stream changed: %d → %d", before, got)
		}
	})
	t.Run("closed handles refuse read, append and flush; close is idempotent", func(t *testing.T) {
		for _, h := range []*Handle{w, r} {
			mustClose(t, h)
			mustClose(t, h)
			_, err := h.Read(ctx, 0, -1)
			wantKind(t, err, ErrHandleClosed, "read on a closed handle")
			_, err = h.Append(ctx, cmds(t, 2, 1))
			wantKind(t, err, ErrHandleClosed, "append on a closed handle")
			wantKind(t, h.Flush(ctx), ErrHandleClosed, "flush on a closed handle")
		}
	})
	t.Run("an empty append is a no-op", func(t *testing.T) {
		w2, err := s.Open(ctx, "ro", Write)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, w2)
		if _, err := w2.Append(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got := streamMsgs(t, s); got != before {
			t.Fatalf("stream changed: %d → %d", before, got)
		}
	})
}

// Item 47: unknown stored event types.
func TestUnknownTypes(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	w, err := s.Create(ctx, header("u"))
	if err != nil {
		t.Fatal(err)
	}
	evs := append(cmds(t, 0, 1), ev(t, 1, "future/thing", map[string]any{"x": 1}))
	if _, err := w.Append(ctx, evs); err != nil {
		t.Fatalf("append of an unknown type refused: %v", err)
	}
	mustClose(t, w)
	t.Run("a write open refuses, and a retry gives the same refusal", func(t *testing.T) {
		for range 2 {
			_, err := s.Open(ctx, "u", Write)
			wantKind(t, err, ErrFormatUnsupported, `event type "future/thing" at seq 1`)
		}
	})
	t.Run("a read refuses when it reaches the unknown event", func(t *testing.T) {
		r, err := s.Open(ctx, "u", Read)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, r)
		if got, err := r.Read(ctx, 0, 1); err != nil || len(got) != 1 {
			t.Fatalf("read of the known prefix: %d events, %v", len(got), err)
		}
		_, err = r.Read(ctx, 0, -1)
		wantKind(t, err, ErrFormatUnsupported, `"future/thing"`)
	})
	t.Run("a legacy request/header reason fallback is an unsupported format", func(t *testing.T) {
		publishRaw(t, s, "legacy", `{"type":"session","version":2,"id":"legacy","createdAt":1,"isSeeded":false}`)
		publishRaw(t, s, "legacy", `{"type":"request/header","seq":0,"time":1,"data":{"reason":"fallback","header":{"config":{"provider":"p","model":"m"}}}}`)
		_, err := s.Open(ctx, "legacy", Write)
		wantKind(t, err, ErrFormatUnsupported, `legacy reason "fallback"`)
	})
	t.Run("an ignorable unknown event is read", func(t *testing.T) {
		w, err := s.Create(ctx, header("ign"))
		if err != nil {
			t.Fatal(err)
		}
		ign := rawEvent(t, `{"type":"future/thing","seq":0,"time":1,"data":{},"ignorable":true}`)
		if _, err := w.Append(ctx, []dshq.Event{ign}); err != nil {
			t.Fatal(err)
		}
		mustClose(t, w)
		w, err = s.Open(ctx, "ign", Write)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, w)
		got, err := w.Read(ctx, 0, -1)
		if err != nil || len(got) != 1 || !got[0].Ignorable {
			t.Fatalf("read %v %v", got, err)
		}
	})
}

// Every typed error of the seam that the other tests do not reach.
func TestTypedErrors(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)

	t.Run("unknown ids are not found for both accesses and stat is nil", func(t *testing.T) {
		for _, a := range []Access{Read, Write} {
			_, err := s.Open(ctx, "nope", a)
			wantKind(t, err, ErrNotFound, `session "nope" not found`)
		}
		snap, err := s.Stat(ctx, "nope")
		if snap != nil || err != nil {
			t.Fatalf("stat of an unknown id: %v, %v", snap, err)
		}
	})
	t.Run("a bad access mode is an invalid argument", func(t *testing.T) {
		_, err := s.Open(ctx, "x", Access("admin"))
		wantKind(t, err, ErrInvalidArgument, "access must be")
	})
	t.Run("bad read offsets and lengths mention a non-negative safe integer", func(t *testing.T) {
		w, err := s.Create(ctx, header("off"))
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, w)
		for _, c := range [][2]int64{{-1, 1}, {1 << 53, 1}, {0, 1 << 53}} {
			_, err := w.Read(ctx, c[0], c[1])
			wantKind(t, err, ErrInvalidArgument, "non-negative safe integer")
		}
		if got, err := w.Read(ctx, 5, -1); err != nil || len(got) != 0 {
			t.Fatalf("read past the end: %v %v", got, err)
		}
	})
	t.Run("a corrupt stored record is corruption at write open and read", func(t *testing.T) {
		w, err := s.Create(ctx, header("corrupt"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, cmds(t, 0, 1)); err != nil {
			t.Fatal(err)
		}
		mustClose(t, w)
		publishRaw(t, s, "corrupt", `{"type":"command/run","seq":1,"time":1,"data":{"a":1,"a":2}}`)
		_, err = s.Open(ctx, "corrupt", Write)
		wantKind(t, err, ErrCorruption, `stored session "corrupt" failed validation`)
		r, err := s.Open(ctx, "corrupt", Read)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, r)
		_, err = r.Read(ctx, 0, -1)
		wantKind(t, err, ErrCorruption, "failed validation")
	})
	t.Run("a gap in stored seqs is corruption", func(t *testing.T) {
		publishRaw(t, s, "gap", `{"type":"session","version":2,"id":"gap","createdAt":1,"isSeeded":false}`)
		publishRaw(t, s, "gap", `{"type":"command/run","seq":1,"time":1,"data":{}}`)
		_, err := s.Open(ctx, "gap", Write)
		wantKind(t, err, ErrCorruption, "has seq 1, expected 0")
	})
	t.Run("a header of another id is an identity mismatch", func(t *testing.T) {
		publishRaw(t, s, "mine", `{"type":"session","version":2,"id":"theirs","createdAt":1,"isSeeded":false}`)
		_, err := s.Open(ctx, "mine", Read)
		wantKind(t, err, ErrCorruption, "stored session identity mismatch")
	})
	t.Run("a header of an unknown version is an unsupported format", func(t *testing.T) {
		publishRaw(t, s, "v9", `{"type":"session","version":9,"id":"v9","createdAt":1,"isSeeded":false}`)
		_, err := s.Open(ctx, "v9", Read)
		wantKind(t, err, ErrFormatUnsupported, "written by a newer harness (format version 9) — upgrade the harness")
		_, err = s.Stat(ctx, "v9")
		wantKind(t, err, ErrFormatUnsupported, "upgrade the harness")
		publishRaw(t, s, "v1", `{"type":"session","version":1,"id":"v1","createdAt":1,"isSeeded":false}`)
		_, err = s.Open(ctx, "v1", Write)
		wantKind(t, err, ErrFormatUnsupported, "older format (version 1) with no upgrade path")
	})
	t.Run("list skips quarantined subjects and shows pending sessions", func(t *testing.T) {
		p, err := s.Create(ctx, header("listed-pending"))
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, p)
		snaps, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, sn := range snaps {
			ids = append(ids, sn.Header.ID)
		}
		slices.Sort(ids)
		// "off" was closed without an append: it never existed.
		want := []string{"corrupt", "gap", "listed-pending"}
		if !slices.Equal(ids, want) {
			t.Fatalf("list %v, want %v", ids, want)
		}
	})
	t.Run("store flush materialises every created session and reports failures by id", func(t *testing.T) {
		a, err := s.Create(ctx, header("fa"))
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, a)
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		s2 := newStore(t, e)
		if snap, err := s2.Stat(ctx, "fa"); err != nil || snap == nil || snap.EventCount != 0 {
			t.Fatalf("flushed session not durable: %v %v", snap, err)
		}
		fe := &FlushError{Failed: map[string]error{"fa": errorf(ErrOwnershipLost, "fa", "lost")}}
		if !errors.Is(fe, ErrOwnershipLost) || !strings.Contains(fe.Error(), `"fa"`) {
			t.Fatalf("flush error %v", fe)
		}
	})
}

func TestStat_RevisionAndCount(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	w, err := s.Create(ctx, header("rev"))
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, w)
	last, err := w.Append(ctx, cmds(t, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := newStore(t, e).Stat(ctx, "rev")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Revision != last || snap.EventCount != 3 || !snap.Live {
		t.Fatalf("snapshot %+v, want revision %d, 3 events, live", snap, last)
	}
	w2, err := s.Open(ctx, "rev", Read)
	if err != nil {
		t.Fatal(err)
	}
	mustClose(t, w2)
	mustClose(t, w)
	again, _ := s.Stat(ctx, "rev")
	if again.Revision != snap.Revision {
		t.Fatalf("revision changed without an append: %d → %d", snap.Revision, again.Revision)
	}
	if again.Live {
		t.Fatal("a closed session is still live")
	}
}

func TestResume_AppendsCrashClosers(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	w, err := s.Create(ctx, header("crash"))
	if err != nil {
		t.Fatal(err)
	}
	open := []dshq.Event{
		ev(t, 0, "turn/start", map[string]any{"turn": "t1"}),
		ev(t, 1, "step/start", map[string]any{"turn": "t1", "step": "s1"}),
	}
	if _, err := w.Append(ctx, open); err != nil {
		t.Fatal(err)
	}
	w.lease.halt() // the harness crashes: no close
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	s.forget(w)
	_ = s.kv.(jsLeases).kv.Delete(ctx, LeaseKey("crash")) // its lease lapses

	r, err := s.Open(ctx, "crash", Write)
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, r)
	last, err := Resume(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range got {
		types = append(types, e.Type)
	}
	if want := []string{"turn/start", "step/start", "step/end", "turn/end"}; !slices.Equal(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	again, err := Resume(ctx, r)
	if err != nil || again != last {
		t.Fatalf("second resume: %d %v, want %d unchanged", again, err, last)
	}
}

func TestInheritedEventCount(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	t.Run("a seeded session keeps its inherited count through the stream", func(t *testing.T) {
		h := header("fork")
		h.IsSeeded, h.ParentSession = true, dshq.Str("parent")
		w, err := s.Create(ctx, h, WithInheritedEventCount(2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(ctx, cmds(t, 0, 3)); err != nil {
			t.Fatal(err)
		}
		mustClose(t, w)
		r, err := newStore(t, e).Open(ctx, "fork", Read)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, r)
		if r.InheritedEventCount() != 2 || !r.Header().IsSeeded || *r.Header().ParentSession != "parent" {
			t.Fatalf("header %+v, inherited %d", r.Header(), r.InheritedEventCount())
		}
		snap, _ := s.Stat(ctx, "fork")
		if snap.InheritedEventCount != 2 {
			t.Fatalf("stat %+v", snap)
		}
	})
	t.Run("a seeded header without a count and an out-of-range count are refused", func(t *testing.T) {
		h := header("fork2")
		h.IsSeeded = true
		_, err := s.Create(ctx, h)
		wantKind(t, err, ErrInvalidArgument, "requires inheritedEventCount")
		_, err = s.Create(ctx, h, WithInheritedEventCount(-1))
		wantKind(t, err, ErrInvalidArgument, "non-negative safe integer")
	})
	t.Run("a version 0 header is read as version 2 with seedLength as the inherited count", func(t *testing.T) {
		publishRaw(t, s, "g0", `{"type":"session","version":0,"id":"g0","createdAt":5,"cwd":"/w","seedLength":1,"delegationDepth":0}`)
		publishRaw(t, s, "g0", `{"type":"session/end-seed","seq":0,"time":5,"data":{}}`)
		w, err := s.Open(ctx, "g0", Write)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, w)
		if w.Header().Version != 2 || !w.Header().IsSeeded || w.InheritedEventCount() != 1 || w.NextSeq() != 1 {
			t.Fatalf("header %+v, inherited %d, next %d", w.Header(), w.InheritedEventCount(), w.NextSeq())
		}
	})
}
