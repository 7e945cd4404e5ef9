package projection

import (
	"errors"
	"fmt"
	"github.com/dshq/dshq/internal/corpus"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/record"
)

var corpusDir, corpusErr = corpus.Dir()

// corpusLog is one importable real session log.
type corpusLog struct {
	name   string
	lines  [][]byte // header (with a unique id), then events
	header dshq.HeaderRecord
	events []dshq.Event
}

// readCorpus reads every real log that the record reader accepts, giving
// each its own session id (ids repeat across files).
func readCorpus(t testing.TB) []corpusLog {
	t.Helper()
	entries, err := os.ReadDir(corpusDir)
	if err != nil {
		t.Fatalf("corpus not available: %v (%v)", err, corpusErr)
	}
	var out []corpusLog
	for i, en := range entries {
		f, err := os.Open(filepath.Join(corpusDir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("corpus-%03d", i)
		r := record.NewReader(f, record.WithName(en.Name()), record.WithFixturePlaceholders("/corpus/"+id, id))
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
			t.Fatalf("%s: re-identified header: %v", en.Name(), err)
		}
		for _, ev := range evs {
			lines = append(lines, ev.Raw)
		}
		out = append(out, corpusLog{name: en.Name(), lines: lines, header: h, events: evs})
	}
	return out
}

func TestProjector_ProjectsTheRealCorpusLikeTheOneShotFold(t *testing.T) {
	logs := readCorpus(t)
	if len(logs) != 141 {
		t.Errorf("%d importable corpus logs, want 141 (corpus README)", len(logs))
	}
	if raceEnabled {
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
			if got := s.SurfaceSeqs(id); !slices.Equal(got, want.Surface) {
				t.Errorf("%s: surface %v, want %v", l.name, got, want.Surface)
			}
			_ = s.Events(id, 0, func(ev StoredEvent) bool {
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
