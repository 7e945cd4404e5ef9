package projection

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log sink the projector's goroutines write while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestBatchStagesAreLoggedAtDebugInOrder: at debug level every batch the
// loop publishes logs its stage times (the bench's DSHQ_BENCH_STAGES
// breakdown reads them), each stage at or after the one before; at info
// level nothing is logged. (The stream timestamp, Stored, is of delivered
// records only: a batch read from the stream directly has none.)
func TestBatchStagesAreLoggedAtDebugInOrder(t *testing.T) {
	e := newEnv(t)
	_, last := e.publishLog(readLines(t, "upstream-2.5.jsonl"))
	var debug, info syncBuffer
	rd := e.start(t.TempDir(), WithLogger(slog.New(slog.NewJSONHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	ri := e.start(t.TempDir(), WithDurable("info"), WithLogger(slog.New(slog.NewJSONHandler(&info, nil))))
	waitGen(t, rd.p, last)
	waitGen(t, ri.p, last)
	type stages struct {
		Last                                                                                    uint64
		Records                                                                                 int
		Stored, Recv, Gathered, Locked, Folded, Indexed, Committed, Published, Hooked, Released int64
	}
	var got []stages
	waitFor(t, "the stages of the batch through the last record", func() bool {
		got = got[:0]
		for _, line := range strings.Split(debug.String(), "\n") {
			if !strings.Contains(line, `"batch stages"`) {
				continue
			}
			var s stages
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			got = append(got, s)
		}
		return len(got) > 0 && got[len(got)-1].Last == last
	})
	records := 0
	for _, s := range got {
		records += s.Records
		marks := []int64{s.Recv, s.Gathered, s.Locked, s.Folded, s.Indexed, s.Committed, s.Published, s.Hooked, s.Released}
		for i, m := range marks {
			if m == 0 || (i > 0 && m < marks[i-1]) {
				t.Fatalf("batch through %d: stage %d at %d, the stages %v", s.Last, i, m, marks)
			}
		}
	}
	if records != int(last) {
		t.Errorf("the logged batches hold %d records, want %d", records, last)
	}
	if strings.Contains(info.String(), "batch stages") {
		t.Error("batch stages logged at info level")
	}
}
