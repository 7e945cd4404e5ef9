package bench

import (
	"context"
	"fmt"
	"path/filepath"
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
