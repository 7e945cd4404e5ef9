package projection

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"

	"github.com/dshq/dshq/internal/golden"
)

// renderSession renders what a snapshot holds for one session, one line per
// fact, for golden comparison.
func renderSession(t testing.TB, s Snapshot, id string) string {
	t.Helper()
	info, ok := s.Session(id)
	if !ok {
		return fmt.Sprintf("session %q: not found\n", id)
	}
	var b strings.Builder
	h := info.Header
	fmt.Fprintf(&b, "session %s token=%s createdAt=%d formatVersion=%d inherited=%d events=%d\n",
		h.Header.ID, info.Token, h.Header.CreatedAt, h.FormatVersion, h.InheritedEventCount, info.EventCount)
	if info.Title != nil {
		fmt.Fprintf(&b, "title %q messageSeqs=%v source=%s eventSeq=%d updatedAt=%d\n",
			info.Title.Title, info.Title.MessageSeqs, info.Title.Source, info.Title.EventSeq, info.Title.UpdatedAt)
	}
	fmt.Fprintf(&b, "lastStepStart=%d invalidFrom=%d reason=%q\n", info.LastStepStart, info.InvalidFrom, info.InvalidReason)
	fmt.Fprintf(&b, "surface %v\n", s.SurfaceSeqs(id))
	err := s.Events(id, 0, func(e dshq.StoredEvent) bool {
		fmt.Fprintf(&b, "%d %s %s", e.Record.Seq, e.Record.Type, e.Record.Surface)
		if e.Invalid {
			b.WriteString(" INVALID")
		}
		if e.ReplacedBy != nil {
			fmt.Fprintf(&b, " replacedBy=%d", *e.ReplacedBy)
		}
		if len(e.ReplacedEventSeqs) > 0 {
			fmt.Fprintf(&b, " replaced=%v", e.ReplacedEventSeqs)
		}
		if len(e.Sources) > 0 {
			fmt.Fprintf(&b, " sources=%v", e.Sources)
		}
		if len(e.Derived) > 0 {
			fmt.Fprintf(&b, " derived=%v", e.Derived)
		}
		if e.Text != "" {
			fmt.Fprintf(&b, " text=%q", e.Text)
		}
		b.WriteString("\n")
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	closers, err := s.Closers(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range closers {
		fmt.Fprintf(&b, "closer %s\n", c.Raw)
	}
	return b.String()
}

func goldenText(t testing.TB, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

func TestProjector_ProjectsTheUpstreamExampleLog(t *testing.T) {
	e := newEnv(t)
	id, last := e.publishLog(readLines(t, "upstream-2.5.jsonl"))
	r := e.start(t.TempDir())
	waitGen(t, r.p, last)

	view(t, r.p, func(s Snapshot) error {
		if got := s.Generation(); got != last {
			t.Errorf("generation = %d, want %d", got, last)
		}
		if got, want := s.SurfaceSeqs(id), []int64{15, 10}; !slices.Equal(got, want) {
			t.Errorf("surface = %v, want %v", got, want)
		}
		info, _ := s.Session(id)
		if info.Title == nil || info.Title.Title != "Find where the retry budget" || info.Title.EventSeq != 2 {
			t.Errorf("title = %+v", info.Title)
		}
		if info.LastStepStart != 9 {
			t.Errorf("last step start = %d, want 9", info.LastStepStart)
		}
		if info.ReclassifiedAt == 0 {
			t.Error("a replacement did not set ReclassifiedAt")
		}
		checks := []struct {
			seq        int64
			surface    dshq.Surface
			replacedBy int64 // -1 = none
			replaced   []int64
			sources    []int64
			derived    []int64
		}{
			{1, dshq.SurfaceShadowed, 15, nil, nil, []int64{15}},
			{7, dshq.SurfaceShadowed, 15, nil, []int64{6}, []int64{15}},
			{6, dshq.SurfaceLogOnly, -1, nil, nil, []int64{7}},
			{15, dshq.SurfaceCurrent, -1, []int64{1, 5, 7}, []int64{13, 14, 1, 5, 7}, nil},
			{10, dshq.SurfaceCurrent, -1, nil, nil, nil},
		}
		for _, c := range checks {
			ev, ok := s.Event(id, c.seq)
			if !ok {
				t.Fatalf("event %d missing", c.seq)
			}
			if ev.Record.Surface != c.surface {
				t.Errorf("event %d surface = %s, want %s", c.seq, ev.Record.Surface, c.surface)
			}
			gotBy := int64(-1)
			if ev.ReplacedBy != nil {
				gotBy = *ev.ReplacedBy
			}
			if gotBy != c.replacedBy {
				t.Errorf("event %d replacedBy = %d, want %d", c.seq, gotBy, c.replacedBy)
			}
			if !slices.Equal(ev.ReplacedEventSeqs, c.replaced) || !slices.Equal(ev.Sources, c.sources) || !slices.Equal(ev.Derived, c.derived) {
				t.Errorf("event %d edges: replaced %v sources %v derived %v; want %v %v %v",
					c.seq, ev.ReplacedEventSeqs, ev.Sources, ev.Derived, c.replaced, c.sources, c.derived)
			}
		}
		goldenText(t, "upstream-2.5.golden", renderSession(t, s, id))
		return nil
	})
	// The index agrees with the store on every document's surface.
	got := dumpIndex(t, r.p)
	for _, want := range []string{"s-7f3c/1 user/message shadowed", "s-7f3c/15 user/message current", "s-7f3c/6 tool/call log-only"} {
		if !strings.Contains(got, want) {
			t.Errorf("index lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "hits") || strings.Contains(got, "error") {
		t.Errorf("index disagrees with the store:\n%s", got)
	}
}

func TestView_WaitsForMinGenerationOrFailsNotCaughtUp(t *testing.T) {
	e := newEnv(t)
	r := e.start(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 50e6)
	defer cancel()
	err := r.p.View(ctx, 1, func(Snapshot) error { return nil })
	if dshq.ErrorCode(err) != dshq.CodeNotCaughtUp {
		t.Fatalf("View before the record: err = %v, want %s", err, dshq.CodeNotCaughtUp)
	}
	_, last := e.publishLog(readLines(t, "upstream-2.5.jsonl"))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20e9)
	defer cancel2()
	var gen uint64
	if err := r.p.View(ctx2, last, func(s Snapshot) error { gen = s.Generation(); return nil }); err != nil {
		t.Fatal(err)
	}
	if gen < last {
		t.Fatalf("snapshot generation %d < minGeneration %d", gen, last)
	}
}

func TestOnCommit_ReportsWhatEachBatchChanged(t *testing.T) {
	e := newEnv(t)
	var commits []Commit
	var mu sync.Mutex
	id, last := e.publishLog(readLines(t, "upstream-2.5.jsonl"))
	r := e.start(t.TempDir(), WithOnCommit(func(c Commit) {
		mu.Lock()
		commits = append(commits, c)
		mu.Unlock()
	}))
	waitGen(t, r.p, last)
	// The hook gets a commit after the generation is visible: wait for it.
	waitFor(t, "OnCommit to get the last commit", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(commits) > 0 && commits[len(commits)-1].Generation >= last
	})
	mu.Lock()
	defer mu.Unlock()
	var all Commit
	var prev uint64
	for _, c := range commits {
		if c.Generation < prev || c.Epoch != r.p.Epoch() {
			t.Errorf("commit generation %d after %d, epoch %q", c.Generation, prev, c.Epoch)
		}
		prev = c.Generation
		all.Sessions = append(all.Sessions, c.Sessions...)
		all.Events = append(all.Events, c.Events...)
		all.Reclassified = append(all.Reclassified, c.Reclassified...)
		all.Titles = append(all.Titles, c.Titles...)
	}
	if prev != last {
		t.Errorf("last commit at %d, want %d", prev, last)
	}
	if len(all.Sessions) != 1 || all.Sessions[0].Header.Header.ID != id {
		t.Errorf("sessions = %+v", all.Sessions)
	}
	if len(all.Events) != 18 {
		t.Fatalf("%d events, want 18", len(all.Events))
	}
	for i, ev := range all.Events {
		if ev.Seq != int64(i) || ev.SessionID != id || ev.Workspace == "" || ev.Token != id || len(ev.Raw) == 0 || ev.StreamSeq == 0 {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	if all.Events[15].Text == "" || all.Events[15].Surface != dshq.SurfaceCurrent || all.Events[0].Text != "" {
		t.Errorf("event texts/surfaces: 15=%+v 0=%+v", all.Events[15], all.Events[0])
	}
	var shadowed []int64
	for _, rc := range all.Reclassified {
		if rc.Surface != dshq.SurfaceShadowed || rc.ReplacedBy == nil || *rc.ReplacedBy != 15 {
			t.Errorf("reclassification %+v", rc)
		}
		shadowed = append(shadowed, rc.Seq)
	}
	if !slices.Equal(shadowed, []int64{1, 5, 7}) {
		t.Errorf("reclassified %v, want [1 5 7]", shadowed)
	}
	if len(all.Titles) != 1 || all.Titles[0].Title.Title != "Find where the retry budget" {
		t.Errorf("titles = %+v", all.Titles)
	}
}

func TestOpen_RemovesLeftoversOfAnInterruptedRebuild(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	p := e.open(dir)
	serving := filepath.Base(p.cur.dir)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, "p-interrupted")
	if err := os.MkdirAll(filepath.Join(leftover, "index"), 0o700); err != nil {
		t.Fatal(err)
	}
	p = e.open(dir)
	defer p.Close()
	if got := filepath.Base(p.cur.dir); got != serving {
		t.Errorf("serving %s, want %s", got, serving)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("leftover directory survived: %v", err)
	}
}

func TestRun_WaitsForTheStreamToExist(t *testing.T) {
	e := newEnv(t)
	if err := e.js.DeleteStream(context.Background(), dshq.SessionStream); err != nil {
		t.Fatal(err)
	}
	r := e.start(t.TempDir())
	if _, err := bus.EnsureStream(context.Background(), e.js, bus.StreamConfig{LeaseTTL: 2e9}); err != nil {
		t.Fatal(err)
	}
	_, last := e.publishLog(readLines(t, "upstream-2.5.jsonl"))
	waitGen(t, r.p, last)
}
