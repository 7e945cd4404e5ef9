package projection

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/record"
)

// corpusLog is one importable real session log.
type corpusLog struct {
	name   string
	lines  [][]byte // header (with a unique id), then events
	header dshq.HeaderRecord
	events []dshq.Event
}

// readCorpus reads every log of dir that the record reader accepts, giving
// each its own session id (ids repeat across files).
func readCorpus(t testing.TB, dir string) []corpusLog {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no logs in %s (%v)", dir, err)
	}
	var out []corpusLog
	for i, path := range paths {
		name := filepath.Base(path)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("corpus-%03d", i)
		r := record.NewReader(f, record.WithName(name), record.WithFixturePlaceholders("/corpus/"+id, id))
		h, err := r.Header()
		var evs []dshq.Event
		for err == nil {
			var ev dshq.Event
			ev, err = r.Next()
			if err == nil {
				evs = append(evs, ev)
			}
		}
		r.Close()
		f.Close()
		if !errors.Is(err, io.EOF) {
			continue // refused by the reader (no version, seq gap): never published
		}
		lines := withID(t, [][]byte{h.Raw}, id)
		h, err = record.ParseHeader(lines[0])
		if err != nil {
			t.Fatalf("%s: re-identified header: %v", name, err)
		}
		for _, ev := range evs {
			lines = append(lines, ev.Raw)
		}
		out = append(out, corpusLog{name: name, lines: lines, header: h, events: evs})
	}
	return out
}

// TestProjector_ProjectsTheCorpusLikeTheOneShotFold publishes every
// importable log of the fixture logs and of the deepseek-harness corpus
// and requires the projection of each to be its one-shot fold: surface,
// records, texts and derived edges, with nothing quarantined.
func TestProjector_ProjectsTheCorpusLikeTheOneShotFold(t *testing.T) {
	corpus.Each(t, testProjectsTheCorpus)
}

func testProjectsTheCorpus(t *testing.T, dir string, shared bool) {
	logs := readCorpus(t, dir)
	if want := map[bool]int{false: 11, true: 141}[shared]; len(logs) != want {
		t.Errorf("%d importable logs, want %d", len(logs), want)
	}
	if raceEnabled && shared {
		// Under the race detector, the logs of at most 60 events keep the
		// run short; the full corpus runs without it.
		var some []corpusLog
		for _, l := range logs {
			if len(l.events) <= 60 {
				some = append(some, l)
			}
		}
		t.Logf("race detector on: %d of %d logs", len(some), len(logs))
		logs = some
	}
	e := newEnv(t)
	var recs [][2]string
	for _, l := range logs {
		tok := token(t, l.header.Header.ID)
		for _, ln := range l.lines {
			recs = append(recs, [2]string{tok, string(ln)})
		}
	}
	last := e.publishAsync(recs)
	r := e.start(t.TempDir())
	waitGenWithin(t, r.p, last, time.Minute)
	view(t, r.p, func(s Snapshot) error {
		if err := s.Quarantined(0, func(q QuarantineRecord) bool {
			t.Errorf("quarantined: %s: %s", q.Subject, q.Reason)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		for _, l := range logs {
			id := l.header.Header.ID
			want, err := fold.Fold(l.header, l.events, fold.Lenient)
			if err != nil {
				t.Errorf("%s: one-shot fold refused it: %v", l.name, err)
				continue
			}
			info, ok := s.Session(id)
			if !ok || !info.Valid() || info.EventCount != int64(len(l.events)) {
				t.Errorf("%s: session %+v", l.name, info)
				continue
			}
			got := info.Header
			if !reflect.DeepEqual(got.Header, l.header.Header) || got.FormatVersion != l.header.FormatVersion ||
				got.InheritedEventCount != l.header.InheritedEventCount || !bytes.Equal(got.Raw, l.header.Raw) {
				t.Errorf("%s: stored header %+v, want %+v", l.name, got, l.header)
			}
			if !reflect.DeepEqual(info.Title, want.Title) {
				t.Errorf("%s: title %+v, want %+v", l.name, info.Title, want.Title)
			}
			if got := s.SurfaceSeqs(id); !slices.Equal(got, want.Surface) {
				t.Errorf("%s: surface %v, want %v", l.name, got, want.Surface)
			}
			_ = s.Events(id, 0, func(ev dshq.StoredEvent) bool {
				w := want.Records[ev.Record.Seq]
				if ev.Record != w || ev.Text != want.Texts[ev.Record.Seq] || !slices.Equal(ev.Derived, want.Derived[ev.Record.Seq]) {
					t.Errorf("%s seq %d: %+v %q, want %+v %q", l.name, ev.Record.Seq, ev.Record, ev.Text, w, want.Texts[ev.Record.Seq])
					return false
				}
				return true
			})
		}
		return nil
	})
}
