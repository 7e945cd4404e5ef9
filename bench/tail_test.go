package bench

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"

	"github.com/dshq/dshq/index"
)

// span is a synthetic interval of an activity, in ticks.
type span struct{ from, to int }

// countsAt is what an activity's counters read at instant t (between
// ticks): the spans begun and the spans ended before it.
func countsAt(spans []span, t float64) activity {
	var a activity
	for _, s := range spans {
		if float64(s.from) < t {
			a.began++
		}
		if float64(s.to) < t {
			a.ended++
		}
	}
	return a
}

func TestActivityDuringMatchesIntervalOverlap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spans  []span
		t0, t1 float64
		want   bool
	}{
		{"an activity inside the sample overlaps it", []span{{3, 4}}, 2.5, 5.5, true},
		{"an activity across the whole sample overlaps it", []span{{1, 9}}, 2.5, 5.5, true},
		{"an activity that began before and ended during overlaps", []span{{1, 3}}, 2.5, 5.5, true},
		{"an activity that began during and ran on overlaps", []span{{4, 9}}, 2.5, 5.5, true},
		{"an activity that ended before does not overlap", []span{{0, 2}}, 2.5, 5.5, false},
		{"an activity that began after does not overlap", []span{{6, 8}}, 2.5, 5.5, false},
		{"activities on both sides but none inside do not overlap", []span{{0, 2}, {6, 8}}, 2.5, 5.5, false},
		{"no activity does not overlap", nil, 2.5, 5.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := countsAt(tc.spans, tc.t0).during(countsAt(tc.spans, tc.t1)); got != tc.want {
				t.Errorf("during = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("random spans and samples agree with interval overlap", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 2000 {
			var spans []span
			for range rng.IntN(4) {
				from := rng.IntN(30)
				spans = append(spans, span{from, from + 1 + rng.IntN(6)})
			}
			t0 := float64(rng.IntN(30)) + 0.5
			t1 := t0 + float64(rng.IntN(5))
			want := false
			for _, s := range spans {
				want = want || float64(s.from) < t1 && float64(s.to) > t0
			}
			if got := countsAt(spans, t0).during(countsAt(spans, t1)); got != want {
				t.Fatalf("spans %v, sample [%v, %v]: during = %v, want %v", spans, t0, t1, got, want)
			}
		}
	})
}

func TestOverlapSaysWhatRanDuringASample(t *testing.T) {
	gcSpans := []span{{10, 20}}
	mergeSpans := []span{{2, 4}}
	at := func(tick float64, commits int64, faults int64) probe {
		p := probe{gc: countsAt(gcSpans, tick), commits: commits, majflt: faults, cpu: time.Duration(tick) * time.Millisecond}
		p.gcPauses = p.gc.began + p.gc.ended
		p.index[referenceIndex] = indexState{merges: countsAt(mergeSpans, tick)}
		return p
	}
	s := overlap(at(3.5, 1, 0), at(12.5, 2, 3), 9*time.Millisecond)
	if !s.gc || !s.gcPause || !s.commit || !s.index[referenceIndex] || s.index[projectionIndex] || s.majflt != 3 || s.cpu != 9*time.Millisecond {
		t.Errorf("overlap = %+v: want a GC cycle with its pause, a commit, a reference merge, 3 major faults and 9 ms of CPU", s)
	}
	s = overlap(at(12.5, 2, 3), at(14.5, 2, 3), 2*time.Millisecond)
	if !s.gc || s.gcPause || s.commit || s.index[referenceIndex] {
		t.Errorf("overlap = %+v: want a GC cycle in its mark phase only", s)
	}
	s = overlap(at(20.5, 2, 3), at(21.5, 2, 3), time.Millisecond)
	if s.gc || s.gcPause || s.commit || s.index[referenceIndex] || s.majflt != 0 {
		t.Errorf("overlap = %+v: want nothing", s)
	}
}

func TestTailNoteCountsWhatOverlappedTheSlowestSamples(t *testing.T) {
	var samples []sampleTail
	var ref []time.Duration
	for i := range 300 {
		s := sampleTail{start: time.Duration(i) * time.Millisecond, lat: time.Millisecond, cpu: time.Millisecond}
		switch i {
		case 40: // the slowest: a GC cycle with its pause
			s.lat, s.gc, s.gcPause, s.majflt = 20*time.Millisecond, true, true, 2
		case 41: // a GC cycle
			s.lat, s.gc = 15*time.Millisecond, true
		case 200: // a merge of the reference index
			s.lat, s.index[referenceIndex] = 10*time.Millisecond, true
		case 10, 11, 12, 13: // fast samples during a GC cycle
			s.gc = true
		}
		samples = append(samples, s)
		ref = append(ref, time.Duration(100+i)*time.Microsecond)
	}
	note := tailNote("rare", samples, "raw Bleve", ref, classStats{gcCycles: 2, elapsed: 300 * time.Millisecond})
	if note.Slowest != 3 || note.Samples != 300 || note.TailFromMs != 10 || note.TailToMs != 20 {
		t.Fatalf("note %+v: want the 3 slowest of 300, 10–20 ms", note)
	}
	if note.Tail.GC != 2 || note.Tail.GCPause != 1 || note.Tail.ReferenceIndex != 1 || note.Tail.ProjectionIndex != 0 || note.Tail.MajorFaults != 2 {
		t.Errorf("tail overlaps %+v: want 2 GC cycles (1 pause), 1 reference merge, 2 major faults", note.Tail)
	}
	if note.All.GC != 6 || note.All.Samples != 300 {
		t.Errorf("all overlaps %+v: want 6 of 300 during a GC cycle", note.All)
	}
	// The reference's latencies on the tail's samples (40, 41, 200).
	if note.RefTailMedianMs != 0.141 || note.RefTailMaxMs != 0.3 {
		t.Errorf("reference on the tail: median %v, max %v ms; want 0.141, 0.3", note.RefTailMedianMs, note.RefTailMaxMs)
	}
	if want := []float64{0.04, 0.041, 0.2}; len(note.SlowestAtSecond) != 3 || note.SlowestAtSecond[0] != want[0] || note.SlowestAtSecond[2] != want[2] {
		t.Errorf("slowest at %v s, want %v", note.SlowestAtSecond, want)
	}
	text := strings.Join(note.Lines(), "\n")
	for _, want := range []string{"the slowest 3 of 300 dshq samples", "during a GC cycle 2 (all 2%), with its pause 1", "of raw Bleve's 1 (all 0%)", "faults 2 major", "2 GC cycles"} {
		if !strings.Contains(text, want) {
			t.Errorf("note lacks %q:\n%s", want, text)
		}
	}
}

func TestStateOfReadsScorchsCounters(t *testing.T) {
	st := &scorch.Stats{TotFileMergeZapBeg: 5, TotFileMergeZapEnd: 4, TotMemMergeZapBeg: 7, TotMemMergeZapEnd: 7,
		TotPersistedSegments: 9, CurRootEpoch: 12, LastMergedEpoch: 12, LastPersistedEpoch: 12}
	if got, want := stateOf(st), (indexState{merges: activity{12, 11}, persisted: 9}); got != want {
		t.Errorf("state %+v, want %+v", got, want)
	}
	st.LastPersistedEpoch = 11
	if !stateOf(st).busy {
		t.Error("an index whose root is not persisted yet is not busy")
	}
	if stateOf(nil) != (indexState{}) {
		t.Error("no index has a state")
	}
}

func TestProbesReachBothIndexes(t *testing.T) {
	dir := t.TempDir()
	x, err := index.Open(filepath.Join(dir, "index"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if st := projectionStats(x); st == nil {
		t.Error("the projection's index's scorch counters are out of reach")
	}
	raw, err := bleve.New(filepath.Join(dir, "raw.bleve"), bleve.NewIndexMapping())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if st := scorchStats(raw); st == nil {
		t.Error("the raw index's scorch counters are out of reach")
	}
}

func TestPsiTotalReadsTheSomeLine(t *testing.T) {
	got := psiTotal([]byte("some avg10=58.63 avg60=50.33 avg300=32.12 total=152525853\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
	if got != 152525853*time.Microsecond {
		t.Errorf("psiTotal = %v", got)
	}
	if psiTotal([]byte("garbage")) != 0 {
		t.Error("garbage read as a total")
	}
}

func TestLongestNewFindsTheHighestGrownBucket(t *testing.T) {
	a := &metrics.Float64Histogram{Counts: []uint64{5, 1, 0, 2}, Buckets: []float64{0, 0.0001, 0.001, 0.01, 0.1}}
	b := &metrics.Float64Histogram{Counts: []uint64{9, 1, 1, 2}, Buckets: a.Buckets}
	if got := longestNew(a, b); got != time.Millisecond {
		t.Errorf("longestNew = %v, want 1ms", got)
	}
	if got := histDeltaQuantile(a, b, 0.99); got != time.Millisecond {
		t.Errorf("p99 of the growth = %v, want 1ms", got)
	}
	if got := longestNew(a, a); got != 0 {
		t.Errorf("longestNew of no growth = %v", got)
	}
}

func TestTailProbeSeesAGCCycleDuringASample(t *testing.T) {
	tp := newTailProbe(nil, [2]*scorch.Stats{})
	defer tp.close()
	runtime.GC() // as measureOp does: the live heap is then known
	tp.startClass()
	tp.begin()
	start := time.Now()
	runtime.GC()
	tp.end(start, time.Since(start))
	tp.begin()
	tp.end(time.Now(), 0)
	tp.endClass()
	if len(tp.samples) != 2 {
		t.Fatalf("%d samples, want 2", len(tp.samples))
	}
	if s := tp.samples[0]; !s.gc || !s.gcPause {
		t.Errorf("a sample around runtime.GC: %+v, want a GC cycle with its pauses", s)
	}
	if s := tp.samples[1]; s.gcPause {
		t.Errorf("a sample after it: %+v, want no GC pause", s)
	}
	if c := tp.classStats(); c.gcCycles < 1 || c.live == 0 {
		t.Errorf("class stats %+v: want at least one GC cycle and a live heap", c)
	}
}

// BenchmarkTailProbe measures what probing one sample costs (begin and
// end, outside its timing) with two Bleve indexes open, as during the
// bench's queries.
func BenchmarkTailProbe(b *testing.B) {
	dir := b.TempDir()
	var stats [2]*scorch.Stats
	for k, name := range []string{"index", "raw.bleve"} {
		idx, err := bleve.New(filepath.Join(dir, name), bleve.NewIndexMapping())
		if err != nil {
			b.Fatal(err)
		}
		defer idx.Close()
		stats[k] = scorchStats(idx)
		for i := range 100 {
			if err := idx.Index(strconv.Itoa(i), map[string]any{"text": "a probe of the tail"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	tp := newTailProbe(nil, stats)
	defer tp.close()
	tp.startClass()
	b.ReportAllocs()
	for b.Loop() {
		tp.begin()
		tp.end(time.Now(), 0)
	}
}
