package projection

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// RebuildProgress reports a rebuild's advance.
type RebuildProgress struct {
	// Applied is the stream sequence the new projection has reached.
	Applied uint64
	// Target is the stream's last sequence when the rebuild (or its final
	// catch-up) began.
	Target uint64
	// Records is the number of records applied so far.
	Records int
	// Swapped is true in the last report: the new projection is serving.
	Swapped bool
}

// Rebuild builds a fresh projection (a new store and a new index) from
// stream sequence 1 beside the serving one, while reads and the projector
// loop go on; once it has caught up with the stream's tail it briefly stops
// the loop, applies the last records, and swaps it in atomically: a View
// sees either the old projection or the complete new one, and the epoch
// changes. progress (may be nil) is called after every batch. On failure
// the serving projection is untouched and the partial one is removed.
func (p *Projector) Rebuild(ctx context.Context, progress func(RebuildProgress)) (err error) {
	inst, err := p.newInstance(ctx)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	swapped := false
	defer func() {
		if !swapped {
			inst.close()
			os.RemoveAll(inst.dir)
		}
	}()
	stream, err := p.js.Stream(ctx, p.cfg.stream)
	if err != nil {
		return fmt.Errorf("rebuild: stream %s: %w", p.cfg.stream, err)
	}
	prog := RebuildProgress{}
	report := func() {
		if progress != nil {
			progress(prog)
		}
	}
	if prog.Target, err = lastSeq(ctx, stream); err != nil {
		return err
	}
	if err := p.feed(ctx, inst, stream, &prog, report); err != nil {
		return err
	}
	// Final catch-up with the loop stopped, then the swap.
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if prog.Target, err = lastSeq(ctx, stream); err != nil {
		return err
	}
	if err := p.feed(ctx, inst, stream, &prog, report); err != nil {
		return err
	}
	if err := p.swap(inst); err != nil {
		return err
	}
	swapped = true
	prog.Swapped = true
	report()
	return nil
}

func lastSeq(ctx context.Context, stream jetstream.Stream) (uint64, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("rebuild: stream info: %w", err)
	}
	return info.State.LastSeq, nil
}

// feed applies the ordered consumer's records to inst until it reaches
// prog.Target, in batches of what has arrived (never waiting for a full
// batch at the tail).
func (p *Projector) feed(ctx context.Context, inst *instance, stream jetstream.Stream, prog *RebuildProgress, report func()) error {
	if prog.Applied >= prog.Target {
		return nil
	}
	// An ephemeral consumer from the instance's own checkpoint: nothing it
	// delivered beyond what was applied is lost when feed returns.
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       prog.Applied + 1,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("rebuild: consumer: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stream.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	for prog.Applied < prog.Target {
		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		mb, err := cons.Fetch(p.cfg.batchSize, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("rebuild: fetch: %w", err)
		}
		err = p.feedBatch(ctx, inst, mb.Messages(), prog, report)
		cancel()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func (p *Projector) feedBatch(ctx context.Context, inst *instance, msgs <-chan jetstream.Msg, prog *RebuildProgress, report func()) error {
	var recs []streamRecord
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		if _, err := p.applyBatch(ctx, inst, recs); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
		prog.Applied = recs[len(recs)-1].seq
		prog.Records += len(recs)
		recs = recs[:0]
		report()
		return nil
	}
	for m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("rebuild: message metadata: %w", err)
		}
		recs = append(recs, streamRecord{seq: md.Sequence.Stream, subject: m.Subject(), data: m.Data()})
		if md.Sequence.Stream >= prog.Target {
			return flush()
		}
		if len(msgs) == 0 || len(recs) >= p.cfg.batchSize {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// swap makes inst the serving projection. The caller holds writeMu.
func (p *Projector) swap(inst *instance) error {
	cp, err := inst.store.checkpoint()
	if err != nil {
		return err
	}
	if err := p.setCurrent(inst); err != nil {
		return err
	}
	p.mu.Lock()
	old := p.cur
	p.cur = inst
	p.mu.Unlock()
	p.setGeneration(cp)
	p.metrics.generation.Set(float64(cp))
	p.metrics.rebuilds.Inc()
	p.log.Info("rebuilt projection swapped in", "epoch", inst.store.epoch, "generation", cp)
	if p.cfg.onCommit != nil {
		// An empty commit with the new epoch: feed subscribers resync.
		p.cfg.onCommit(Commit{Generation: cp, Epoch: inst.store.epoch})
	}
	if old != nil {
		// Close waits for the old store's open read transactions.
		start := time.Now()
		if err := old.close(); err != nil {
			p.log.Warn("close replaced projection", "err", err)
		}
		if err := os.RemoveAll(old.dir); err != nil {
			p.log.Warn("remove replaced projection", "dir", old.dir, "err", err)
		}
		p.log.Debug("replaced projection closed", "after", time.Since(start))
	}
	return nil
}
