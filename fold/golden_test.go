package fold

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/corpus"

	goldenfile "github.com/dshq/dshq/internal/golden"
)

// golden is what a golden file holds for one log: the Lenient fold (what
// the projector computes), and whether Strict (what a harness may append)
// accepts the same log.
type golden struct {
	Error              *ValidationError      `json:"error"`
	Records            []dshq.EventRecord    `json:"records"`
	Surface            []int64               `json:"surface"`
	CapturedThroughSeq *int64                `json:"capturedThroughSeq"`
	Title              *dshq.Title           `json:"title"`
	LastStepStart      *int64                `json:"lastStepStart"`
	Messages           []Message             `json:"messages"`
	Documents          []dshq.SearchDocument `json:"documents"`
	Traces             []Trace               `json:"traces"`
	Closers            []dshq.Event          `json:"closers"`
	// Strict is "accepted" when Strict folds the log exactly as Lenient
	// does, else the error Strict refuses it with.
	Strict any `json:"strict"`
}

func goldenOf(t *testing.T, h dshq.HeaderRecord, events []dshq.Event) golden {
	t.Helper()
	r, err := Fold(h, events, Lenient)
	g := golden{
		Error:              asValidation(t, err),
		Records:            r.Records,
		Surface:            r.Surface,
		CapturedThroughSeq: r.CapturedThroughSeq,
		Title:              r.Title,
		LastStepStart:      r.LastStepStart,
		Messages:           r.Messages,
		Documents:          r.Documents(),
		Traces:             []Trace{},
		Closers:            r.State.Closers(),
		Strict:             "accepted",
	}
	if g.Closers == nil {
		g.Closers = []dshq.Event{}
	}
	if g.Records == nil {
		g.Records = []dshq.EventRecord{}
	}
	for seq := range r.Records {
		tr, _ := r.Trace(int64(seq))
		g.Traces = append(g.Traces, tr)
	}
	strict, serr := Fold(h, events, Strict)
	switch {
	case serr != nil:
		g.Strict = map[string]any{"error": asValidation(t, serr)}
	case err != nil:
		t.Fatalf("Strict accepted what Lenient refused: %v", err)
	case toJSON(t, strict) != toJSON(t, r):
		t.Fatalf("Strict folded differently from Lenient")
	}
	return g
}

func asValidation(t *testing.T, err error) *ValidationError {
	t.Helper()
	if err == nil {
		return nil
	}
	var v *ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("error is not a *ValidationError: %T %v", err, err)
	}
	return v
}

// fixtureGoldens are the fixture logs (internal/corpus.Fixtures) whose fold
// TestFoldGolden pins too, in testdata/golden/logs/<name>.json: a G0
// compaction inside a turn with the retried step continuing it, a cancel
// with an interrupted assistant message, instructions replaced mid-turn,
// and a tool-result pruning (the rewrite rule).
var fixtureGoldens = []string{"compaction-recovery", "cancel-mid-stream", "instructions-replaced", "tool-prune"}

// TestFoldGolden folds every log under testdata/golden and the fixture logs
// of fixtureGoldens, and compares with its .json golden; each log is also
// folded incrementally with a state round trip before every event, and its
// closers applied under Strict.
func TestFoldGolden(t *testing.T) {
	paths, err := filepath.Glob("testdata/golden/*.jsonl")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden logs: %v", err)
	}
	type log struct{ name, path, golden string }
	var logs []log
	for _, path := range paths {
		logs = append(logs, log{strings.TrimSuffix(filepath.Base(path), ".jsonl"), path, strings.TrimSuffix(path, ".jsonl") + ".json"})
	}
	fixtures := corpus.Fixtures(t)
	for _, name := range fixtureGoldens {
		logs = append(logs, log{"fixture log " + name, filepath.Join(fixtures, name+".jsonl"), filepath.Join("testdata", "golden", "logs", name+".json")})
	}
	for _, l := range logs {
		path, want := l.path, l.golden
		t.Run(strings.ReplaceAll(l.name, "-", " "), func(t *testing.T) {
			h, events := readLog(t, path)
			got := []byte(toJSON(t, goldenOf(t, h, events)) + "\n")
			if b, err := os.ReadFile(want); err == nil && !bytes.Equal(b, got) && !goldenfile.Updating() {
				t.Errorf("fold of %s differs from %s: first difference:\n%s", path, want, firstDiff(string(b), string(got)))
			}
			goldenfile.Check(t, want, got)
			for _, level := range []Level{Lenient, Strict} {
				checkIncremental(t, h, events, level)
			}
		})
	}
}

// checkIncremental folds events one Apply at a time, round-tripping the
// state through MarshalBinary before every event, and requires exactly
// Fold's result and error; a refused event must leave the state unchanged.
// When the log folds, its closers must apply under Strict and balance it.
func checkIncremental(t testing.TB, h dshq.HeaderRecord, events []dshq.Event, level Level) {
	t.Helper()
	want, wantErr := Fold(h, events, level)
	plain := New(h, level)
	s := New(h, level)
	got := newResult(s)
	var gotErr error
	for _, e := range events {
		s = roundTrip(t, s)
		got.State = s
		before := mustMarshal(t, s)
		eff, err := s.Apply(e)
		plainEff, plainErr := plain.Apply(e)
		if !reflect.DeepEqual(eff, plainEff) || !reflect.DeepEqual(err, plainErr) {
			t.Fatalf("seq %d: a round-tripped state applied differently:\n%+v %v\n%+v %v", e.Seq, eff, err, plainEff, plainErr)
		}
		if err != nil {
			if !bytes.Equal(before, mustMarshal(t, s)) {
				t.Fatalf("seq %d: a refused event changed the state", e.Seq)
			}
			gotErr = err
			break
		}
		got.add(e, eff)
	}
	got.finish()
	if !reflect.DeepEqual(gotErr, wantErr) {
		t.Fatalf("incremental error %v, one pass %v", gotErr, wantErr)
	}
	if a, b := toJSON(t, got), toJSON(t, want); a != b {
		t.Fatalf("incremental fold differs from one pass:\n%s", firstDiff(b, a))
	}
	if a, b := toJSON(t, got.Documents()), toJSON(t, want.Documents()); a != b {
		t.Fatalf("incremental documents differ from one pass:\n%s", firstDiff(b, a))
	}
	if !bytes.Equal(mustMarshal(t, got.State), mustMarshal(t, want.State)) {
		t.Fatalf("incremental state differs from one pass")
	}
	if wantErr == nil {
		checkClosers(t, want.State)
	}
}

// checkClosers applies s's closers to a Strict copy of s: each must be
// accepted, and the result must be balanced.
func checkClosers(t testing.TB, s *State) {
	t.Helper()
	st := s.Clone()
	st.level = Strict
	closers := st.Closers()
	checkStoredClosers(t, closers)
	for _, c := range closers {
		if _, err := st.Apply(c); err != nil {
			t.Fatalf("closer %s refused under Strict: %v\n%s", c.Type, err, c.Raw)
		}
	}
	if len(closers) > 0 && (st.TurnOpen() || len(st.Closers()) != 0) {
		t.Fatalf("the closers did not balance the log")
	}
	if len(closers) == 0 && s.TurnOpen() {
		t.Fatalf("an open turn got no closers")
	}
}

// checkStoredClosers checks StoredClosers against the closers it presents:
// a tool/result closer is current, the others log-only, with each one's
// record, bytes, text and cited seqs.
func checkStoredClosers(t testing.TB, closers []dshq.Event) {
	t.Helper()
	stored := StoredClosers("s", closers)
	if len(stored) != len(closers) {
		t.Fatalf("%d stored closers for %d closers", len(stored), len(closers))
	}
	for i, c := range closers {
		got := stored[i]
		want := dshq.SurfaceLogOnly
		if c.Type == dshq.TypeToolResult {
			want = dshq.SurfaceCurrent
		}
		var sources []int64
		if c.SourceEventSeqs != nil {
			if err := json.Unmarshal(c.SourceEventSeqs, &sources); err != nil {
				t.Fatal(err)
			}
		}
		if got.Record != (dshq.EventRecord{SessionID: "s", Seq: c.Seq, Type: c.Type, Time: c.Time, Surface: want}) ||
			!bytes.Equal(got.Raw, c.Raw) || got.Text != Text(c) || !slices.Equal(got.Sources, sources) || got.StreamSeq != 0 {
			t.Fatalf("stored closer %d = %+v; closer %s", i, got, c.Raw)
		}
	}
}

// firstDiff shows the first differing line of two texts.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + itoa(i+1) + ":\n- " + a + "\n+ " + b
		}
	}
	return "(no difference)"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
