package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/projection"
)

// measureApply projects the whole stream with a fresh projector (its own
// directory and durable consumer) while nothing else runs, beside a raw
// pull-and-ack of the same stream.
func (r *runner) measureApply(ctx context.Context) error {
	last, err := r.streamLast(ctx)
	if err != nil {
		return err
	}
	r.rep.Records = int(last)
	r.progress("projector apply: %d records from an empty projection", last)
	raw, err := r.rawConsume(ctx, "bench-raw-apply", last)
	if err != nil {
		return err
	}
	start, cpu, commits := time.Now(), cpuNow(), r.commits.Load()
	p, stop, err := r.runProjector(ctx, filepath.Join(r.dir, "apply"), projection.WithDurable("bench-apply"))
	if err != nil {
		return err
	}
	err = waitProjected(ctx, p, last)
	elapsed := time.Since(start)
	r.applyCPU, r.applyRecords = cpuNow()-cpu, last
	r.progressBatches(last, r.commits.Load()-commits)
	if serr := stop(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	r.rep.section = sectionThroughput
	r.applyName, r.applyRate = "projector apply (records/s)", float64(last)/elapsed.Seconds()
	r.rep.add(r.applyName, r.applyRate, "raw JetStream pull+ack consume (rec/s)", float64(last)/raw.Seconds())
	return deleteConsumer(ctx, r.js, "bench-apply")
}

// measureCatchUp starts the serving pipeline (projector and query service)
// over the stream the bulk load filled and times the projector until it
// has applied all of it — stored and searchable — beside a raw pull-and-ack
// of the same records. Without a bulk load it only starts the pipeline.
func (r *runner) measureCatchUp(ctx context.Context, stack *[]func() error) error {
	if len(r.bulk) == 0 {
		return r.startPipeline(ctx, stack)
	}
	last, err := r.streamLast(ctx)
	if err != nil {
		return err
	}
	r.progress("projector catch-up: %d records of the bulk load from an empty projection", last)
	raw, err := r.rawConsume(ctx, "bench-raw-catchup", last)
	if err != nil {
		return err
	}
	start, cpu, commits := time.Now(), cpuNow(), r.commits.Load()
	if err := r.startPipeline(ctx, stack); err != nil {
		return err
	}
	if err := waitProjected(ctx, r.proj, last); err != nil {
		return err
	}
	elapsed := time.Since(start)
	r.applyCPU, r.applyRecords = cpuNow()-cpu, last
	r.progressBatches(last, r.commits.Load()-commits)
	r.rep.section = sectionThroughput
	r.applyName, r.applyRate = "projector apply of the bulk backlog (records/s)", float64(last)/elapsed.Seconds()
	r.rep.add(r.applyName, r.applyRate, "raw JetStream pull+ack consume (rec/s)", float64(last)/raw.Seconds())
	r.rep.add("bulk backlog to searchable (events/s)", float64(r.rep.Phases.BulkEvents)/elapsed.Seconds(),
		"raw JetStream pull+ack consume, same records (rec/s)", float64(last)/raw.Seconds())
	return nil
}

// progressBatches prints how many batches an apply of records took.
func (r *runner) progressBatches(records uint64, batches int64) {
	if batches > 0 {
		r.progress("  %d records in %d committed batches (%.0f records per batch)", records, batches, float64(records)/float64(batches))
	}
}

func deleteConsumer(ctx context.Context, js jetstream.JetStream, name string) error {
	if err := js.DeleteConsumer(ctx, dshq.SessionStream, name); err != nil {
		return fmt.Errorf("delete consumer %s: %w", name, err)
	}
	return nil
}

func (r *runner) streamLast(ctx context.Context) (uint64, error) {
	st, err := r.js.Stream(ctx, dshq.SessionStream)
	if err != nil {
		return 0, fmt.Errorf("session stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("session stream: %w", err)
	}
	return info.State.LastSeq, nil
}

// rawConsume pulls and acknowledges every record of the session stream up
// to last with a durable consumer doing no work, in the projector's batch
// size: the stream's own read limit.
func (r *runner) rawConsume(ctx context.Context, name string, last uint64) (time.Duration, error) {
	st, err := r.js.Stream(ctx, dshq.SessionStream)
	if err != nil {
		return 0, fmt.Errorf("session stream: %w", err)
	}
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckAllPolicy, MaxAckPending: -1})
	if err != nil {
		return 0, fmt.Errorf("raw consumer: %w", err)
	}
	start := time.Now()
	var seen uint64
	for seen < last {
		// Ask for no more than remains: a short fetch would wait out its timeout.
		mb, err := cons.Fetch(int(min(uint64(projection.DefaultBatchSize), last-seen)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, fmt.Errorf("raw consume: %w", err)
		}
		var lastMsg jetstream.Msg
		for m := range mb.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return 0, fmt.Errorf("raw consume: %w", err)
			}
			seen, lastMsg = md.Sequence.Stream, m
		}
		if err := mb.Error(); err != nil {
			return 0, fmt.Errorf("raw consume: %w", err)
		}
		if lastMsg == nil {
			return 0, fmt.Errorf("raw consume: no records after %d of %d", seen, last)
		}
		if err := lastMsg.Ack(); err != nil {
			return 0, fmt.Errorf("raw consume: %w", err)
		}
	}
	elapsed := time.Since(start)
	return elapsed, deleteConsumer(ctx, r.js, name)
}

// measureRebuild rebuilds the serving projection from the stream beside a
// raw re-read of the stream.
func (r *runner) measureRebuild(ctx context.Context) error {
	last, err := r.streamLast(ctx)
	if err != nil {
		return err
	}
	r.progress("rebuild: %d records", last)
	raw, err := r.rawConsume(ctx, "bench-raw-rebuild", last)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := r.proj.Rebuild(ctx, nil); err != nil {
		return err
	}
	elapsed := time.Since(start)
	r.rep.Records = int(last)
	r.rep.section = sectionRebuild
	r.rep.add("rebuild (s)", elapsed.Seconds(), "raw re-read of the stream (s)", raw.Seconds())
	r.rep.add("rebuild (records/s)", float64(last)/elapsed.Seconds(), "raw re-read of the stream (rec/s)", float64(last)/raw.Seconds())
	return nil
}

// StagesEnv, set in the environment of the bench, runs `dshq serve` at log
// level debug and prints, after the quiet appends, where each
// one's append→searchable went by stage, from the projector's "batch
// stages" log lines (projection/run.go, stageTimes). The debug log costs
// CPU during the load: a run with it set is for the breakdown, not for the
// figures. A value other than "1" names a file that receives the lines.
const StagesEnv = "DSHQ_BENCH_STAGES"

// batchStages is one "batch stages" line of the projector (Unix ns).
type batchStages struct {
	First, Last uint64
	Records     int
	Stored      int64
	Recv        int64
	Gathered    int64
	Locked      int64
	Folded      int64
	Indexed     int64
	Committed   int64
	Published   int64
	Hooked      int64
	Released    int64
}

// stageLog collects the projector's batch stages of a serve process.
type stageLog struct {
	mu      sync.Mutex // guards batches, lines
	batches []batchStages
	lines   []string
}

// save writes the lines to StagesEnv's file, when it names one.
func (l *stageLog) save() error {
	path := os.Getenv(StagesEnv)
	if path == "" || path == "1" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return os.WriteFile(path, []byte(strings.Join(l.lines, "\n")+"\n"), 0o600)
}

func (l *stageLog) add(line string) {
	var b batchStages
	if json.Unmarshal([]byte(line), &b) != nil || b.Last == 0 {
		return
	}
	l.mu.Lock()
	l.batches = append(l.batches, b)
	l.lines = append(l.lines, line)
	l.mu.Unlock()
}

func (l *stageLog) snapshot() []batchStages {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.batches)
}

// stageNames are the columns of printStages, each the time from the end of
// the one before (the first from the append's start).
var stageNames = []string{
	"server (publish→the record's stream timestamp)",
	"delivered (timestamp→projector: store+fsync, consumer)",
	"gather (linger for pending)",
	"checkpoint+lock",
	"fold+finish (bbolt tx, fold, sessions)",
	"Bleve batch",
	"bbolt commit",
	"generation published",
	"query answered (after published or ack, the later)",
}

// printStages prints the per-stage breakdown of the quiet appends: the
// median of each stage over all samples and over the slowest 1%, then each
// of the slowest 1% alone, beside the ack and the previous batch's work
// after its publication (the OnCommit hook and the release of mapped
// pages) that was still running when this record was stored.
func (r *runner) printStages(probes []probeSample, batches []batchStages) {
	type row struct {
		total, ack time.Duration
		stages     []time.Duration
		prevBusy   time.Duration // previous batch's post-publish work left at this one's store time
		hook, rel  time.Duration // this batch's own post-publish work
		records    int
	}
	slices.SortFunc(batches, func(a, b batchStages) int { return cmp.Compare(a.Last, b.Last) })
	var rows []row
	for _, s := range probes {
		i := sort.Search(len(batches), func(i int) bool { return batches[i].Last >= s.gen })
		if i == len(batches) || batches[i].First > s.gen {
			continue
		}
		b := batches[i]
		t0 := s.start.UnixNano()
		end := s.end.UnixNano()
		marks := []int64{b.Stored, b.Recv, b.Gathered, b.Locked, b.Folded, b.Indexed, b.Committed, b.Published}
		rw := row{total: s.end.Sub(s.start), ack: s.ack.Sub(s.start), records: b.Records,
			hook: time.Duration(b.Hooked - b.Published), rel: time.Duration(b.Released - b.Hooked)}
		prev := t0
		for _, m := range marks {
			rw.stages = append(rw.stages, time.Duration(m-prev))
			prev = m
		}
		rw.stages = append(rw.stages, time.Duration(end-max(b.Published, s.ack.UnixNano())))
		if i > 0 {
			rw.prevBusy = max(0, time.Duration(batches[i-1].Released-b.Stored))
		}
		rows = append(rows, rw)
	}
	if len(rows) == 0 {
		r.progress("stages: no batch stages matched the quiet appends")
		return
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(a.total, b.total) })
	slow := rows[len(rows)-max(1, len(rows)/100):]
	median := func(rs []row, f func(row) time.Duration) time.Duration {
		v := make([]time.Duration, len(rs))
		for i, x := range rs {
			v[i] = f(x)
		}
		return percentile(v, 0.5)
	}
	r.progress("stages of one append→searchable (%d samples matched; median of all | median of the slowest %d), ms:", len(rows), len(slow))
	line := func(name string, f func(row) time.Duration) {
		r.progress("  %-52s %7.3f | %7.3f", name, ms(median(rows, f)), ms(median(slow, f)))
	}
	line("total", func(x row) time.Duration { return x.total })
	line("ack (publish→acknowledged)", func(x row) time.Duration { return x.ack })
	for i, n := range stageNames {
		line(n, func(x row) time.Duration { return x.stages[i] })
	}
	line("previous batch's hook+release left at store time", func(x row) time.Duration { return x.prevBusy })
	line("this batch's OnCommit hook (after visible)", func(x row) time.Duration { return x.hook })
	line("this batch's release of mapped pages (after visible)", func(x row) time.Duration { return x.rel })
	r.progress("  the slowest %d, each (ms: total ack | stages as above | prev-busy hook release):", len(slow))
	for _, x := range slow {
		parts := make([]string, len(x.stages))
		for i, d := range x.stages {
			parts[i] = fmt.Sprintf("%.2f", ms(d))
		}
		r.progress("    %.2f %.2f | %s | %.2f %.2f %.2f", ms(x.total), ms(x.ack), strings.Join(parts, " "), ms(x.prevBusy), ms(x.hook), ms(x.rel))
	}
}

// printLoadStages prints how the batches before generation before (the
// load's) spent their time, by stage, summed over the batches.
func (r *runner) printLoadStages(batches []batchStages, before uint64) {
	var n, recs int
	var gather, lock, fold, idx, commit, publish, hook, rel, idle time.Duration
	var prevEnd int64
	for _, b := range batches {
		if b.Last >= before {
			continue
		}
		n++
		recs += b.Records
		gather += time.Duration(b.Gathered - b.Recv)
		lock += time.Duration(b.Locked - b.Gathered)
		fold += time.Duration(b.Folded - b.Locked)
		idx += time.Duration(b.Indexed - b.Folded)
		commit += time.Duration(b.Committed - b.Indexed)
		publish += time.Duration(b.Published - b.Committed)
		hook += time.Duration(b.Hooked - b.Published)
		rel += time.Duration(b.Released - b.Hooked)
		if prevEnd != 0 && b.Recv > prevEnd {
			idle += time.Duration(b.Recv - prevEnd)
		}
		prevEnd = b.Released
	}
	if n == 0 {
		return
	}
	r.progress("stages of the load's %d batches: %.1f records per batch; per batch, ms: gather %.2f, checkpoint+lock %.2f, fold+finish %.2f, Bleve %.2f, bbolt commit %.2f, publish %.2f, OnCommit hook %.2f, release %.2f, idle between %.2f",
		n, float64(recs)/float64(n), ms(gather)/float64(n), ms(lock)/float64(n), ms(fold)/float64(n), ms(idx)/float64(n),
		ms(commit)/float64(n), ms(publish)/float64(n), ms(hook)/float64(n), ms(rel)/float64(n), ms(idle)/float64(n))
}
