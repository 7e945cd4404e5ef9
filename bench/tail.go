package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"

	"github.com/dshq/dshq/index"
)

// A search class's tail note says what overlapped the slowest 1% of dshq's
// samples (and, for comparison, all of them): a GC cycle of the bench
// process, a merge or persist of the projection's Bleve index or of the raw
// reference index, a projector commit, page faults, the process's own CPU
// and the machine's CPU pressure during the sample, and the reference's
// latency on the same samples, taken back to back. Two probes bracket each
// dshq sample (tailProbe.begin and end, outside its timing): counters of
// how often each activity began and ended (scorch's own for the indexes,
// read atomically; runtime/metrics, getrusage and /proc/pressure/cpu for
// the rest), read before and after, say whether it ran at some point
// during the sample (activity.during).

// activity is a background activity's counts at one instant: how many
// times it has begun and how many times it has ended.
type activity struct{ began, ended uint64 }

// during reports whether the activity ran at some point between the
// instants of a and b (a first): it was running at either (more begun than
// ended), or it began or ended in between.
func (a activity) during(b activity) bool {
	return a != b || a.began != a.ended || b.began != b.ended
}

// indexState is a Bleve (scorch) index's background work at one instant:
// its merges (of files and, in the persister, of in-memory segments), the
// segments it has persisted, and whether scorch says its background
// routines are busy (index_bgthreads_active: the last epoch not yet merged
// or persisted).
type indexState struct {
	merges    activity
	persisted uint64
	busy      bool
}

// during reports whether the index merged, persisted or was busy between
// the instants of s and t.
func (s indexState) during(t indexState) bool {
	return s.busy || t.busy || s.persisted != t.persisted || s.merges.during(t.merges)
}

// The indexes a probe tells apart: the projection's (dshq's), and the raw
// reference index of the same documents.
const (
	projectionIndex = iota
	referenceIndex
)

// scorchStats returns the live counters of a Bleve index's scorch engine
// (nil for another engine): read atomically, they cost a probe nothing.
func scorchStats(idx bleve.Index) *scorch.Stats {
	if idx == nil {
		return nil
	}
	return index.EngineStats(idx)
}

// projectionStats returns the live scorch counters of the projection's
// index (index.Index.ScorchStats), nil without one: the probes then say
// nothing of it, and the progress line says so.
func projectionStats(x *index.Index) *scorch.Stats {
	if x == nil {
		return nil
	}
	return x.ScorchStats()
}

// stateOf reads an index's background work from its scorch counters.
func stateOf(st *scorch.Stats) indexState {
	if st == nil {
		return indexState{}
	}
	ld := atomic.LoadUint64
	root := ld(&st.CurRootEpoch)
	return indexState{
		merges:    activity{ld(&st.TotFileMergeZapBeg) + ld(&st.TotMemMergeZapBeg), ld(&st.TotFileMergeZapEnd) + ld(&st.TotMemMergeZapEnd)},
		persisted: ld(&st.TotPersistedSegments),
		// scorch's index_bgthreads_active: the root not yet merged or persisted.
		busy: ld(&st.LastMergedEpoch) != root || ld(&st.LastPersistedEpoch) != root,
	}
}

// indexStates reads both indexes' states.
func indexStates(stats [2]*scorch.Stats) [2]indexState {
	return [2]indexState{stateOf(stats[projectionIndex]), stateOf(stats[referenceIndex])}
}

// probe is what a tailProbe reads at one instant.
type probe struct {
	gc       activity // GC cycles: begun at the sweep-termination pause, ended at mark termination
	gcPauses uint64   // the GC's stop-the-world pauses so far
	index    [2]indexState
	commits  int64         // the projectors' commits so far
	cpu      time.Duration // the process's CPU time so far
	majflt   int64
	minflt   int64
	nivcsw   int64         // involuntary context switches of the process
	psi      time.Duration // the machine's CPU pressure so far: time some task waited for a CPU
}

// sampleTail is one dshq sample with what overlapped it.
type sampleTail struct {
	start time.Duration // since the class's first sample
	lat   time.Duration
	ref   time.Duration // the reference's latency of the same sample

	gc, gcPause, commit bool
	index               [2]bool
	majflt, minflt      int64
	nivcsw              int64
	cpu, psi            time.Duration
	// sched is the longest runnable wait of a goroutine the runtime
	// sampled during the sample (the lower bound of its histogram bucket).
	sched time.Duration
}

// overlap is what ran between probes a and b of a sample of latency lat.
func overlap(a, b probe, lat time.Duration) sampleTail {
	s := sampleTail{lat: lat,
		gc: a.gc.during(b.gc), gcPause: a.gcPauses != b.gcPauses, commit: a.commits != b.commits,
		majflt: b.majflt - a.majflt, minflt: b.minflt - a.minflt, nivcsw: b.nivcsw - a.nivcsw,
		cpu: b.cpu - a.cpu, psi: b.psi - a.psi}
	for k := range s.index {
		s.index[k] = a.index[k].during(b.index[k])
	}
	return s
}

// The runtime metrics a probe reads per sample, and the class's own.
const (
	metricGCCycles  = "/gc/cycles/total:gc-cycles"
	metricGCPauses  = "/sched/pauses/total/gc:seconds"
	metricSchedWait = "/sched/latencies:seconds"
	metricGCCPU     = "/cpu/classes/gc/total:cpu-seconds"
	metricAssistCPU = "/cpu/classes/gc/mark/assist:cpu-seconds"
	metricAllocs    = "/gc/heap/allocs:bytes"
	metricLiveHeap  = "/gc/heap/live:bytes"
)

// tailProbe probes each dshq sample of one class (begin before it, end
// after it, both outside its timing) and the class as a whole.
type tailProbe struct {
	commits *atomic.Int64    // nil: no projector to watch
	stats   [2]*scorch.Stats // the projection's and the reference's index (nil: none)
	psi     *os.File         // /proc/pressure/cpu (nil where there is none)
	buf     []byte

	per    [2][]metrics.Sample // before and after a sample
	class  [2][]metrics.Sample // at the class's start and end
	cls    [2]probe
	t0     time.Time
	before probe
	// Samples are the probed samples, in order.
	samples []sampleTail
}

func newTailProbe(commits *atomic.Int64, stats [2]*scorch.Stats) *tailProbe {
	t := &tailProbe{commits: commits, stats: stats, buf: make([]byte, 256)}
	if f, err := os.Open("/proc/pressure/cpu"); err == nil {
		t.psi = f
	}
	for i := range t.per {
		t.per[i] = []metrics.Sample{{Name: metricGCCycles}, {Name: metricGCPauses}, {Name: metricSchedWait}}
		// The per-sample metrics first (read reads them), then the class's.
		t.class[i] = []metrics.Sample{{Name: metricGCCycles}, {Name: metricGCPauses}, {Name: metricSchedWait},
			{Name: metricGCCPU}, {Name: metricAssistCPU}, {Name: metricAllocs}, {Name: metricLiveHeap}}
	}
	return t
}

// close releases the probe's file.
func (t *tailProbe) close() {
	if t.psi != nil {
		_ = t.psi.Close()
	}
}

// read probes the process now, reading the runtime metrics into ms (the
// per-sample ones first).
func (t *tailProbe) read(ms []metrics.Sample) probe {
	metrics.Read(ms)
	var p probe
	cycles := ms[0].Value.Uint64()
	p.gcPauses = histCount(ms[1].Value.Float64Histogram())
	// Each cycle pauses twice: at its start (sweep termination) and at its
	// end (mark termination).
	p.gc = activity{began: p.gcPauses - cycles, ended: cycles}
	p.index = indexStates(t.stats)
	if t.commits != nil {
		p.commits = t.commits.Load()
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		p.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		p.majflt, p.minflt, p.nivcsw = ru.Majflt, ru.Minflt, ru.Nivcsw
	}
	if t.psi != nil {
		if n, err := t.psi.ReadAt(t.buf, 0); n > 0 && (err == nil || err == io.EOF) {
			p.psi = psiTotal(t.buf[:n])
		}
	}
	return p
}

// startClass probes the process before the class's first sample.
func (t *tailProbe) startClass() {
	t.cls[0] = t.read(t.class[0])
	t.t0 = time.Now()
}

// endClass probes the process after the class's last sample.
func (t *tailProbe) endClass() { t.cls[1] = t.read(t.class[1]) }

// begin probes the process just before a sample.
func (t *tailProbe) begin() { t.before = t.read(t.per[0]) }

// end probes the process just after a sample that started at start and
// took lat.
func (t *tailProbe) end(start time.Time, lat time.Duration) {
	after := t.read(t.per[1])
	s := overlap(t.before, after, lat)
	s.start = start.Sub(t.t0)
	s.sched = longestNew(t.per[0][2].Value.Float64Histogram(), t.per[1][2].Value.Float64Histogram())
	t.samples = append(t.samples, s)
}

// classStats is what a class as a whole saw of the GC and the indexes.
type classStats struct {
	gcCycles          uint64
	gcCPU, assistCPU  time.Duration
	allocated, live   uint64 // bytes allocated during the class; live heap at its start
	schedP99          time.Duration
	merges            [2]uint64 // merges the indexes began during the class
	busy              [2]bool   // whether each index had background work at the class's start
	commits           int64
	psi, cpu, elapsed time.Duration
}

func (t *tailProbe) classStats() classStats {
	a, b := t.class[0], t.class[1]
	sec := func(s metrics.Sample) float64 {
		if s.Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return s.Value.Float64()
	}
	u64 := func(s metrics.Sample) uint64 {
		if s.Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s.Value.Uint64()
	}
	c := classStats{
		gcCycles:  u64(b[0]) - u64(a[0]),
		gcCPU:     time.Duration((sec(b[3]) - sec(a[3])) * 1e9),
		assistCPU: time.Duration((sec(b[4]) - sec(a[4])) * 1e9),
		allocated: u64(b[5]) - u64(a[5]),
		live:      u64(a[6]),
		schedP99:  histDeltaQuantile(a[2].Value.Float64Histogram(), b[2].Value.Float64Histogram(), 0.99),
		commits:   t.cls[1].commits - t.cls[0].commits,
		psi:       t.cls[1].psi - t.cls[0].psi,
		cpu:       t.cls[1].cpu - t.cls[0].cpu,
	}
	if len(t.samples) > 0 {
		last := t.samples[len(t.samples)-1]
		c.elapsed = last.start + last.lat
	}
	for k := range c.merges {
		c.merges[k] = t.cls[1].index[k].merges.began - t.cls[0].index[k].merges.began
		c.busy[k] = !idle([2]indexState{t.cls[0].index[k]})
	}
	return c
}

func histCount(h *metrics.Float64Histogram) uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// longestNew returns the lower bound of the highest bucket that b counts
// more in than a (two readings of one histogram of seconds).
func longestNew(a, b *metrics.Float64Histogram) time.Duration {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0
	}
	for i := len(b.Counts) - 1; i >= 0; i-- {
		if b.Counts[i] > a.Counts[i] {
			return seconds(b.Buckets[i])
		}
	}
	return 0
}

// histDeltaQuantile returns the q-quantile (a bucket's lower bound) of
// what histogram b counts beyond a.
func histDeltaQuantile(a, b *metrics.Float64Histogram, q float64) time.Duration {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0
	}
	var total uint64
	for i := range b.Counts {
		total += b.Counts[i] - a.Counts[i]
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var n uint64
	for i := range b.Counts {
		if n += b.Counts[i] - a.Counts[i]; n >= want {
			return seconds(b.Buckets[i])
		}
	}
	return 0
}

func seconds(s float64) time.Duration {
	if math.IsInf(s, 0) || math.IsNaN(s) || s < 0 {
		return 0
	}
	return time.Duration(s * 1e9)
}

// psiTotal reads the "some" line's total (µs) of /proc/pressure/cpu.
func psiTotal(b []byte) time.Duration {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	_, v, ok := bytes.Cut(line, []byte("total="))
	if !ok || !bytes.HasPrefix(line, []byte("some")) {
		return 0
	}
	n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Microsecond
}

// TailNote says what overlapped the slowest 1% of dshq's samples of one
// search class, beside the same for all of its samples.
type TailNote struct {
	// Class is the search class.
	Class string `json:"class"`
	// Samples is the number of dshq's samples, Slowest of them the tail.
	Samples int `json:"samples"`
	Slowest int `json:"slowest"`
	// P50Ms and P99Ms are dshq's; the tail's latencies span TailFromMs
	// to TailToMs.
	P50Ms      float64 `json:"p50Ms"`
	P99Ms      float64 `json:"p99Ms"`
	TailFromMs float64 `json:"tailFromMs"`
	TailToMs   float64 `json:"tailToMs"`
	// Tail and All are what overlapped the slowest samples and every sample.
	Tail Overlaps `json:"tail"`
	All  Overlaps `json:"all"`
	// Reference names the reference run back to back with each sample;
	// RefP99Ms is its p99 over all samples, RefTailMedianMs and
	// RefTailMaxMs its latencies on the tail's samples.
	Reference       string  `json:"reference"`
	RefP99Ms        float64 `json:"refP99Ms"`
	RefTailMedianMs float64 `json:"refTailMedianMs"`
	RefTailMaxMs    float64 `json:"refTailMaxMs"`
	// The class as a whole (all three implementations' samples): the
	// bench process's GC cycles and their CPU, what it allocated, its live
	// heap at the start, the runtime's p99 runnable wait, the merges each
	// index began, the projector's commits, the process's CPU and the
	// machine's CPU pressure over the class's wall time.
	GCCycles        uint64    `json:"gcCycles"`
	GCCPUSeconds    float64   `json:"gcCpuSeconds"`
	AssistCPUSecs   float64   `json:"assistCpuSeconds"`
	AllocatedMiB    float64   `json:"allocatedMiB"`
	LiveHeapMiB     float64   `json:"liveHeapMiB"`
	SchedWaitP99Ms  float64   `json:"schedWaitP99Ms"`
	IndexMerges     [2]uint64 `json:"indexMerges"`
	IndexBusy       [2]bool   `json:"indexBusyAtStart"`
	Commits         int64     `json:"commits"`
	ElapsedSeconds  float64   `json:"elapsedSeconds"`
	ProcessCores    float64   `json:"processCores"`
	CPUPressure     float64   `json:"cpuPressure"`
	SlowestAtSecond []float64 `json:"slowestAtSecond"`
}

// Overlaps counts what ran during a set of samples.
type Overlaps struct {
	// Samples is the set's size; the counts are of its samples.
	Samples int `json:"samples"`
	// GC: during a GC cycle of the bench process (GCPause: with one of its
	// stop-the-world pauses).
	GC      int `json:"gc"`
	GCPause int `json:"gcPause"`
	// ProjectionIndex and ReferenceIndex: during a merge, a persist or
	// other background work of the projection's index, of the raw
	// reference index.
	ProjectionIndex int `json:"projectionIndex"`
	ReferenceIndex  int `json:"referenceIndex"`
	// Commit: during a projector commit.
	Commit int `json:"commit"`
	// MajorFaults and MinorFaults are the process's, summed over the set.
	MajorFaults int64 `json:"majorFaults"`
	MinorFaults int64 `json:"minorFaults"`
	// Cores is the process's CPU time over the set's wall time;
	// CPUPressure the share of that wall time in which some task of the
	// machine waited for a CPU (/proc/pressure/cpu); Switches the process's
	// involuntary context switches per sample.
	Cores       float64 `json:"cores"`
	CPUPressure float64 `json:"cpuPressure"`
	Switches    float64 `json:"switches"`
	// SchedWait1ms counts the samples during which the runtime saw a
	// goroutine wait ≥ 1 ms runnable (it samples one transition in 8);
	// SchedWaitMaxMs is the longest it saw.
	SchedWait1ms   int     `json:"schedWait1ms"`
	SchedWaitMaxMs float64 `json:"schedWaitMaxMs"`
}

func overlapsOf(ss []sampleTail) Overlaps {
	o := Overlaps{Samples: len(ss)}
	var wall, cpu, psi time.Duration
	var sw int64
	for _, s := range ss {
		o.GC += b2i(s.gc)
		o.GCPause += b2i(s.gcPause)
		o.ProjectionIndex += b2i(s.index[projectionIndex])
		o.ReferenceIndex += b2i(s.index[referenceIndex])
		o.Commit += b2i(s.commit)
		o.MajorFaults += s.majflt
		o.MinorFaults += s.minflt
		wall, cpu, psi, sw = wall+s.lat, cpu+s.cpu, psi+s.psi, sw+s.nivcsw
		if s.sched >= time.Millisecond {
			o.SchedWait1ms++
		}
		o.SchedWaitMaxMs = max(o.SchedWaitMaxMs, msOf(s.sched))
	}
	if wall > 0 {
		o.Cores, o.CPUPressure = float64(cpu)/float64(wall), min(1, float64(psi)/float64(wall))
	}
	if len(ss) > 0 {
		o.Switches = float64(sw) / float64(len(ss))
	}
	return o
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// tailNote computes the note of a class's probed samples (with the
// reference's latency of each, ref[i] for samples[i]) and its class stats.
func tailNote(class string, samples []sampleTail, refName string, ref []time.Duration, c classStats) TailNote {
	n := len(samples)
	k := max(1, n/100)
	for i := range samples {
		if i < len(ref) {
			samples[i].ref = ref[i]
		}
	}
	slow := slices.Clone(samples)
	slices.SortStableFunc(slow, func(a, b sampleTail) int { return cmp.Compare(b.lat, a.lat) })
	slow = slow[:min(k, n)]
	lat := make([]time.Duration, n)
	for i, s := range samples {
		lat[i] = s.lat
	}
	note := TailNote{Class: class, Samples: n, Slowest: len(slow),
		P50Ms: msOf(percentile(lat, 0.50)), P99Ms: msOf(percentile(lat, 0.99)),
		Tail: overlapsOf(slow), All: overlapsOf(samples),
		Reference: refName, RefP99Ms: msOf(percentile(ref, 0.99)),
		GCCycles: c.gcCycles, GCCPUSeconds: c.gcCPU.Seconds(), AssistCPUSecs: c.assistCPU.Seconds(),
		AllocatedMiB: mib(c.allocated), LiveHeapMiB: mib(c.live), SchedWaitP99Ms: msOf(c.schedP99),
		IndexMerges: c.merges, IndexBusy: c.busy, Commits: c.commits, ElapsedSeconds: c.elapsed.Seconds()}
	if c.elapsed > 0 {
		note.ProcessCores = float64(c.cpu) / float64(c.elapsed)
		note.CPUPressure = min(1, float64(c.psi)/float64(c.elapsed))
	}
	if len(slow) > 0 {
		note.TailFromMs, note.TailToMs = msOf(slow[len(slow)-1].lat), msOf(slow[0].lat)
		refs := make([]time.Duration, len(slow))
		for i, s := range slow {
			refs[i] = s.ref
			note.SlowestAtSecond = append(note.SlowestAtSecond, math.Round(s.start.Seconds()*1000)/1000)
		}
		note.RefTailMedianMs, note.RefTailMaxMs = msOf(percentile(refs, 0.5)), msOf(slices.Max(refs))
	}
	return note
}

// Lines renders the note as a few lines of text.
func (t TailNote) Lines() []string {
	pct := func(k, n int) string {
		if n == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f%%", 100*float64(k)/float64(n))
	}
	ov, all := t.Tail, t.All
	at := make([]string, len(t.SlowestAtSecond))
	for i, s := range t.SlowestAtSecond {
		at[i] = fmt.Sprintf("%.2f", s)
	}
	return []string{
		fmt.Sprintf("%s: the slowest %d of %d dshq samples (%.2f–%.2f ms; p50 %.3f, p99 %.2f), beside all %d:",
			t.Class, t.Slowest, t.Samples, t.TailFromMs, t.TailToMs, t.P50Ms, t.P99Ms, t.Samples),
		fmt.Sprintf("  during a GC cycle %d (all %s), with its pause %d (all %s); a merge/persist of the projection's index %d (all %s), of raw Bleve's %d (all %s); a projector commit %d (all %s)",
			ov.GC, pct(all.GC, all.Samples), ov.GCPause, pct(all.GCPause, all.Samples),
			ov.ProjectionIndex, pct(all.ProjectionIndex, all.Samples), ov.ReferenceIndex, pct(all.ReferenceIndex, all.Samples),
			ov.Commit, pct(all.Commit, all.Samples)),
		fmt.Sprintf("  faults %d major, %d minor (all: %d, %d); bench CPU %.2f cores (all %.2f); machine CPU pressure %s of the time (all %s); involuntary switches %.1f per sample (all %.1f); runnable wait ≥1 ms seen in %d (all %d), longest %.2f ms",
			ov.MajorFaults, ov.MinorFaults, all.MajorFaults, all.MinorFaults, ov.Cores, all.Cores,
			pct(int(1000*ov.CPUPressure), 1000), pct(int(1000*all.CPUPressure), 1000), ov.Switches, all.Switches,
			ov.SchedWait1ms, all.SchedWait1ms, ov.SchedWaitMaxMs),
		fmt.Sprintf("  %s on the same samples: median %.3f ms, max %.3f ms (its p99 %.3f ms)", t.Reference, t.RefTailMedianMs, t.RefTailMaxMs, t.RefP99Ms),
		fmt.Sprintf("  the class (%.1f s, every implementation): %d GC cycles, GC CPU %.2f s (assists %.2f s), %.0f MiB allocated, live heap %.0f MiB at its start, runnable wait p99 %.2f ms; merges begun: projection %d, raw Bleve %d (busy at its start: %v, %v); %d projector commits; bench CPU %.2f cores, machine CPU pressure %s; the slowest at %s s",
			t.ElapsedSeconds, t.GCCycles, t.GCCPUSeconds, t.AssistCPUSecs, t.AllocatedMiB, t.LiveHeapMiB, t.SchedWaitP99Ms,
			t.IndexMerges[projectionIndex], t.IndexMerges[referenceIndex], t.IndexBusy[projectionIndex], t.IndexBusy[referenceIndex], t.Commits, t.ProcessCores,
			pct(int(1000*t.CPUPressure), 1000), strings.Join(at, ", ")),
	}
}

// liveHeap returns the live heap the last GC marked, in bytes.
func liveHeap() uint64 { return runtimeUint64(metricLiveHeap) }

// idle reports whether neither index merges, persists or is busy.
func idle(st [2]indexState) bool {
	for _, s := range st {
		if s.busy || s.merges.began != s.merges.ended {
			return false
		}
	}
	return true
}

// settleIndexes waits, up to limit, until the indexes have no background
// work (idle at two polls 100 ms apart with nothing merged or persisted
// between), and returns how long it waited and whether they settled.
func settleIndexes(ctx context.Context, stats [2]*scorch.Stats, limit time.Duration) (time.Duration, bool) {
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	prev := indexStates(stats)
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-tick.C:
		}
		st := indexStates(stats)
		if idle(prev) && idle(st) && st == prev {
			return time.Since(start), true
		}
		prev = st
	}
	return time.Since(start), false
}
