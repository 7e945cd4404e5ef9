package projection

import (
	"context"
	"errors"
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
	if err := inst.store.setStreamIdentity(IdentityOf(stream.CachedInfo())); err != nil {
		return fmt.Errorf("rebuild: %w", err)
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

// rebuildFetch shapes the rebuild's pull requests.
type rebuildFetch struct {
	// wait bounds one pull request (fetchWait).
	wait time.Duration
	// batch is the records asked for per pull (0 = the batch size).
	batch int
	// cutoff, when positive, abandons every pull after reading that many
	// records, exactly as a pull cut off by its deadline does (tests).
	cutoff int
}

// maxRebuildRestarts bounds consecutive consumer restarts that apply
// nothing, so a persistent failure ends the rebuild instead of spinning.
const maxRebuildRestarts = 10

// errDeliveryGap means the consumer delivered records the rebuild did not
// read (a pull cut off after the server sent them, or an interrupted pull).
var errDeliveryGap = errors.New("rebuild: consumer delivery gap")

// feed applies the stream's records after prog.Applied to inst, each exactly
// once and in order, until it reaches prog.Target. It reads through an
// ephemeral no-ack consumer starting after the last applied record; whenever
// that consumer's deliveries are not contiguous (a pull cut off by its
// deadline drops records the server already sent) or a pull fails, it drops
// the consumer and resumes from the last applied sequence with a new one.
func (p *Projector) feed(ctx context.Context, inst *instance, stream jetstream.Stream, prog *RebuildProgress, report func()) error {
	restarts := 0
	for prog.Applied < prog.Target {
		before := prog.Applied
		err := p.feedConsumer(ctx, inst, stream, prog, report)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !errors.Is(err, errDeliveryGap):
			return err
		}
		if prog.Applied > before {
			restarts = 0
		}
		if restarts++; restarts > maxRebuildRestarts {
			return fmt.Errorf("rebuild: no progress after %d consumer restarts at sequence %d: %w", maxRebuildRestarts, prog.Applied, err)
		}
		p.log.Debug("rebuild: resuming after an interrupted delivery", "applied", prog.Applied, "err", err)
	}
	return nil
}

// feedConsumer reads one ephemeral consumer starting after prog.Applied
// until prog.Target; it returns an error wrapping errDeliveryGap when a
// record may have been lost, having applied every record before the loss.
func (p *Projector) feedConsumer(ctx context.Context, inst *instance, stream jetstream.Stream, prog *RebuildProgress, report func()) error {
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
	f := p.cfg.rebuildFetch
	batch := f.batch
	if batch <= 0 {
		batch = p.cfg.batchSize
	}
	next := uint64(1) // the consumer sequence of the next delivery
	for prog.Applied < prog.Target {
		fctx, cancel := context.WithTimeout(ctx, f.wait)
		mb, err := cons.Fetch(batch, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w: fetch: %w", errDeliveryGap, err)
		}
		read, err := p.feedBatch(ctx, inst, mb.Messages(), &next, prog, report)
		cancel()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if prog.Applied >= prog.Target {
			return nil
		}
		// Every record up to Target is stored, so a pull that ends short
		// (by its deadline, a server timeout status that carries no error,
		// or an error) may have dropped records the server sent: resume
		// from what was applied rather than trust the consumer's position.
		if err := mb.Error(); err != nil {
			return fmt.Errorf("%w: pull ended after %d of %d records: %w", errDeliveryGap, read, batch, err)
		}
		if read < batch {
			return fmt.Errorf("%w: pull ended after %d of %d records", errDeliveryGap, read, batch)
		}
	}
	return nil
}

// feedBatch applies the records of one pull in batches of what has arrived
// (never waiting for a full batch at the tail). next is the consumer
// sequence expected next; a delivery past it is a gap: the records before it
// are applied and errDeliveryGap returned.
func (p *Projector) feedBatch(ctx context.Context, inst *instance, msgs <-chan jetstream.Msg, next *uint64, prog *RebuildProgress, report func()) (read int, err error) {
	var recs []streamRecord
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		if _, err := p.applyBatch(ctx, inst, recs); err != nil {
			return fmt.Errorf("rebuild: %w", err)
		}
		p.releaseMapped(inst)
		prog.Applied = recs[len(recs)-1].seq
		prog.Records += len(recs)
		recs = recs[:0]
		report()
		return nil
	}
	for m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return read, fmt.Errorf("rebuild: message metadata: %w", err)
		}
		if md.Sequence.Consumer != *next {
			if err := flush(); err != nil {
				return read, err
			}
			return read, fmt.Errorf("%w: delivery %d after %d (stream sequence %d after %d)", errDeliveryGap, md.Sequence.Consumer, *next-1, md.Sequence.Stream, prog.Applied)
		}
		*next++
		read++
		recs = append(recs, streamRecord{seq: md.Sequence.Stream, subject: m.Subject(), data: m.Data()})
		if md.Sequence.Stream >= prog.Target {
			return read, flush()
		}
		if p.cfg.rebuildFetch.cutoff > 0 && read >= p.cfg.rebuildFetch.cutoff {
			break // the rest of this pull is dropped, as by a deadline
		}
		if len(msgs) == 0 || len(recs) >= p.cfg.batchSize {
			if err := flush(); err != nil {
				return read, err
			}
		}
	}
	return read, flush()
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
