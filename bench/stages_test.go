package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestStageLogReadsTheProjectorsBatchStages: a "batch stages" line as the
// projector logs it (slog's JSON handler) is read whole, and a quiet
// append is matched with the batch that holds its generation.
func TestStageLogReadsTheProjectorsBatchStages(t *testing.T) {
	var l stageLog
	l.add(`{"time":"2026-12-02T18:00:00Z","level":"DEBUG","msg":"batch stages","component":"projector","first":7,"last":9,"records":3,` +
		`"stored":1000,"recv":2000,"gathered":2100,"locked":2200,"folded":3000,"indexed":4000,"committed":4500,"published":4600,"hooked":4700,"released":4800}`)
	l.add(`{"level":"INFO","msg":"dshq ready"}`)
	got := l.snapshot()
	want := batchStages{First: 7, Last: 9, Records: 3, Stored: 1000, Recv: 2000, Gathered: 2100, Locked: 2200,
		Folded: 3000, Indexed: 4000, Committed: 4500, Published: 4600, Hooked: 4700, Released: 4800}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("read %+v, want [%+v]", got, want)
	}
	var out bytes.Buffer
	r := &runner{cfg: Config{Progress: &out}}
	r.printStages([]probeSample{{start: time.Unix(0, 500), ack: time.Unix(0, 1500), end: time.Unix(0, 5000), gen: 8}}, got)
	// Bleve batch: indexed − folded = 1,000 ns.
	if !strings.Contains(out.String(), "1 samples matched") || !strings.Contains(out.String(), "Bleve batch") {
		t.Fatalf("printed %q", out.String())
	}
}
