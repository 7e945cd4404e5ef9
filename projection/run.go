package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/internal/lifecycle"
)

// fetchWait is how long one pull request waits for records.
const fetchWait = 2 * time.Second

// Run follows the stream and the lease bucket until ctx ends (then it
// returns nil) or a store fails (then it returns the error), or the stream
// is not the one the projection was built from (an error wrapping
// ErrStreamReplaced; Open rebuilds it). It applies
// records in stream order in batches, each committed with its checkpoint in
// one bbolt transaction before it is acknowledged.
func (p *Projector) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.follow(ctx) })
	g.Go(func() error { return p.watchLeases(ctx) })
	err := g.Wait()
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return nil
	}
	return err
}

func (p *Projector) current() *instance {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cur
}

// follow is the projector loop. It pulls from the durable consumer and
// applies records strictly in stream order: the store's checkpoint, not the
// consumer, says which record comes next. A record the consumer delivered
// and this loop never read (a pull cut off by its deadline, a connection
// dropped or a consumer leader lost with deliveries in flight) shows as a
// delivery past the next sequence, or, at the tail, as a consumer that has
// delivered past the checkpoint; the missing records are read from the
// stream (fill), so no failover costs a consumer reset. Pulls are
// interrupted when their answer can no longer come (a reconnect, a leader
// election of the stream or the consumer) and retried at once.
func (p *Projector) follow(ctx context.Context) error {
	var (
		cons  jetstream.Consumer
		for_  *instance
		watch *failover.Watch
		pause = followPauseMin
	)
	if err := p.checkDurableFree(ctx); err != nil {
		return err
	}
	for ctx.Err() == nil {
		inst := p.current()
		if inst == nil {
			return errors.New("projection is closed")
		}
		if inst != for_ {
			c, err := p.consumer(ctx, inst)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if errors.Is(err, ErrCorruptStore) || errors.Is(err, ErrStreamReplaced) {
					return err
				}
				// The stream may not exist yet, or the bus is unreachable:
				// a daemon waits for it.
				p.log.Warn("cannot create the consumer; retrying", "err", err)
				if lifecycle.Sleep(ctx, time.Second) != nil {
					return nil
				}
				continue
			}
			cons, for_ = c, inst
			watch = failover.For(p.js.Conn(), failover.StreamLeaderElected(p.cfg.stream),
				failover.ConsumerLeaderElected(p.cfg.stream, p.cfg.durable))
		}
		changed := watch.Changed()
		fctx, release := watch.Attempt(ctx, fetchWait)
		mb, err := cons.Fetch(p.cfg.batchSize, jetstream.FetchContext(fctx))
		if err != nil {
			release()
			if ctx.Err() != nil {
				return nil
			}
			p.log.Warn("fetch failed; retrying", "err", err)
			for_ = nil // recreate the consumer: it may have been deleted
			if err := lifecycle.Sleep(ctx, time.Second); err != nil {
				return nil
			}
			continue
		}
		read, err := p.drain(ctx, inst, mb)
		release()
		answered := true // whether the consumer answered its info request
		if err == nil && read < p.cfg.batchSize && ctx.Err() == nil {
			answered, err = p.fillDelivered(ctx, inst, cons)
		}
		if err == nil && read == 0 && !answered && ctx.Err() == nil {
			err = p.readAhead(ctx, inst)
		}
		switch {
		case errors.Is(err, errSwapped):
			continue // the loop recreates its consumer for the new instance
		case errors.Is(err, errConsumerGone):
			// Deleted (with its stream, perhaps): recreating it checks the
			// stream's identity before anything more is read.
			p.log.Warn("the consumer is gone; creating it again", "err", err)
			for_ = nil
			continue
		case errors.Is(err, errDeliveryGap):
			// The consumer is far from the checkpoint.
			p.log.Warn("recreating the consumer at the checkpoint", "err", err)
			for_ = nil
			continue
		case err != nil:
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		ferr := mb.Error()
		switch {
		case ferr == nil, errors.Is(ferr, context.DeadlineExceeded), errors.Is(ferr, context.Canceled):
			pause = followPauseMin
		case errors.Is(ferr, jetstream.ErrConsumerDeleted), errors.Is(ferr, jetstream.ErrConsumerNotFound):
			p.log.Warn("the consumer is gone; recreating it", "err", ferr)
			for_ = nil
			continue
		default:
			// No consumer leader (no responders) or a refused pull (the
			// stream was read ahead meanwhile): wait for an election or a
			// reconnect, or a growing pause.
			p.log.Debug("pull failed; retrying", "err", ferr)
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-changed:
			case <-ctx.Done():
			}
			t.Stop()
			pause = min(2*pause, followPauseMax)
			continue
		}
	}
	return nil
}

// ErrDurableInUse: another projector pulls from the durable consumer this
// one was given. Each projector of one stream is a replica with its own
// durable (projector --durable NAME): two on one durable would take the
// consumer from each other at every start.
var ErrDurableInUse = errors.New("another projector pulls from this durable consumer")

// How the check at start watches the durable's pull requests: a projector
// pulling from it has one waiting nearly all the time (it waits fetchWait
// for records, then applies them), so durableQuiet without any means it
// is free; once one is seen, the check goes on for longer than one pull
// lives (durableCheckFor), so that the pulls of a projector that stopped or
// crashed a moment ago expire, and one still seen in its last second is
// another projector's.
const (
	durableQuiet    = 250 * time.Millisecond
	durableCheckFor = fetchWait + 2*time.Second
	durableSample   = 100 * time.Millisecond
)

// checkDurableFree refuses to start (ErrDurableInUse) when another
// projector is pulling from the durable (see above). A consumer that does
// not exist, or that cannot be asked (no stream or bus yet: the loop waits
// for them), is free.
func (p *Projector) checkDurableFree(ctx context.Context) error {
	start := time.Now()
	var seen, lastSeen time.Time // the first and last sample with a pull waiting
	for {
		actx, release := p.attempt(ctx)
		c, err := p.js.Consumer(actx, p.cfg.stream, p.cfg.durable)
		waiting := 0
		if err == nil {
			var info *jetstream.ConsumerInfo
			if info, err = c.Info(actx); err == nil {
				waiting = info.NumWaiting
			}
		}
		release()
		now := time.Now()
		switch {
		case err != nil:
			return nil
		case waiting > 0:
			if seen.IsZero() {
				seen = now
			}
			lastSeen = now
		case seen.IsZero() && now.Sub(start) >= durableQuiet:
			return nil
		}
		if now.Sub(start) >= durableCheckFor {
			if !lastSeen.IsZero() && now.Sub(lastSeen) < time.Second {
				return fmt.Errorf("%w: %s on %s has pull requests waiting; give each projector of the stream its own --durable",
					ErrDurableInUse, p.cfg.durable, p.cfg.stream)
			}
			return nil
		}
		if lifecycle.Sleep(ctx, durableSample) != nil {
			return nil
		}
	}
}

// The pause between failed pulls while the consumer has no leader (an
// election or a reconnect ends it at once).
const (
	followPauseMin = 50 * time.Millisecond
	followPauseMax = time.Second
)

// maxFill bounds the records one fill reads from the stream; a gap wider
// than that means the consumer is not where the checkpoint is, and the
// consumer is recreated at the checkpoint instead.
const maxFill = 1 << 16

// drain applies the messages of one pull request, grouping those that are
// already there into batches.
func (p *Projector) drain(ctx context.Context, inst *instance, mb jetstream.MessageBatch) (read int, err error) {
	msgs := mb.Messages()
	for {
		var first jetstream.Msg
		select {
		case m, ok := <-msgs:
			if !ok {
				return read, nil
			}
			first = m
		case <-ctx.Done():
			return read, nil
		}
		times := &stageTimes{}
		times.note(stageRecv)
		group := p.gather(msgs, first)
		times.note(stageGathered)
		cut := false
		if c := p.cfg.followCutoff; c > 0 && read+len(group) >= c {
			group, cut = group[:c-read], true // the rest is dropped, as by a deadline
		}
		read += len(group)
		if len(group) > 0 {
			if err := p.applyMsgs(ctx, inst, group, times); err != nil {
				return read, err
			}
		}
		if cut {
			return read, nil
		}
	}
}

// errConsumerGone means the projector's consumer no longer exists.
var errConsumerGone = errors.New("the projector's consumer is gone")

// fillDelivered applies what the consumer delivered and the loop never read
// at the tail of the stream: after a pull that ended short, the consumer's
// last delivered stream sequence past the checkpoint (records in flight
// when a pull was cut off). answered is false when the consumer did not
// answer (it has no leader): the loop then reads ahead of it. A consumer
// that is gone is errConsumerGone: the loop never reads around it, as the
// stream it read may have been replaced.
func (p *Projector) fillDelivered(ctx context.Context, inst *instance, cons jetstream.Consumer) (answered bool, err error) {
	actx, release := p.attempt(ctx)
	info, err := cons.Info(actx)
	release()
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return true, fmt.Errorf("%w: %v", errConsumerGone, err)
	}
	if err != nil {
		return false, nil // the next pull or the next fill will tell
	}
	return true, p.fillFrom(ctx, inst, info)
}

func (p *Projector) fillFrom(ctx context.Context, inst *instance, info *jetstream.ConsumerInfo) error {
	cp, err := p.checkpointOf(inst)
	if err != nil {
		return err
	}
	if info.Delivered.Stream <= cp {
		// Everything delivered was applied: what the stream holds beyond
		// is pending (a pull that ended short with records pending is
		// behind).
		p.noteBatch(p.Generation(), info.NumPending)
		return nil
	}
	recs, err := p.fill(ctx, cp+1, info.Delivered.Stream)
	if errors.Is(err, errDeliveryGap) {
		return err
	}
	if err != nil {
		p.log.Debug("cannot read the records the consumer delivered; the next pull retries", "err", err)
		return nil
	}
	return p.applyRecords(ctx, inst, recs, nil, info.NumPending, newStageTimes())
}

// readAhead applies, after a pull that brought nothing from a consumer that
// did not answer, the records the stream holds beyond the checkpoint, read
// from the stream itself: a consumer that has lost its leader delivers
// nothing until it has elected another (4-9 s after the loss of a server),
// and the projection need not wait for that, only for the stream's own
// leader. The consumer's later deliveries of these records are
// redeliveries, skipped. A consumer that answers is never read around (one
// paused by an operator holds the projection, as it should).
func (p *Projector) readAhead(ctx context.Context, inst *instance) error {
	actx, release := p.attempt(ctx)
	st, err := p.js.Stream(actx, p.cfg.stream)
	release()
	if err != nil {
		return nil // no leader yet: the next pull or read-ahead tries again
	}
	last := st.CachedInfo().State.LastSeq
	cp, err := p.checkpointOf(inst)
	if err != nil {
		return err
	}
	if last <= cp {
		return nil
	}
	to := min(last, cp+uint64(p.cfg.batchSize))
	recs, err := p.fill(ctx, cp+1, to)
	if err != nil {
		p.log.Debug("cannot read ahead of the consumer; retrying", "from", cp+1, "to", to, "err", err)
		return nil
	}
	p.log.Debug("read ahead of a consumer that delivered nothing", "from", cp+1, "to", to)
	return p.applyRecords(ctx, inst, recs, nil, last-to, newStageTimes())
}

// checkpointOf returns inst's checkpoint, or errSwapped when a rebuild has
// replaced (and closed) it.
func (p *Projector) checkpointOf(inst *instance) (uint64, error) {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.current() != inst {
		return 0, errSwapped
	}
	cp, err := inst.store.checkpoint()
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCorruptStore, err)
	}
	return cp, nil
}

// attempt returns the context of one request of the loop's beside its
// pulls: bounded by fetchWait and interrupted by a reconnect or a leader
// election (the loop's failover.Watch), so that no lost reply holds the
// projection for longer than the cluster takes to recover.
func (p *Projector) attempt(ctx context.Context) (context.Context, func()) {
	return failover.For(p.js.Conn()).Attempt(ctx, fetchWait)
}

// fill reads the stream's records from sequence from through to (the
// stream never deletes, so every sequence is there), each batch of direct
// gets one attempt.
func (p *Projector) fill(ctx context.Context, from, to uint64) ([]streamRecord, error) {
	if to-from+1 > maxFill {
		return nil, fmt.Errorf("%w: %d records missing from sequence %d", errDeliveryGap, to-from+1, from)
	}
	var recs []streamRecord
	var err error
	for more := true; more && err == nil; {
		next := from + uint64(len(recs))
		actx, release := p.attempt(ctx)
		_, more, err = failover.Batch(actx, p.js.Conn(), p.cfg.stream, ">", next, to, func(m failover.Msg) (bool, error) {
			if m.Seq != from+uint64(len(recs)) {
				return false, fmt.Errorf("stream %s: sequence %d after %d", p.cfg.stream, m.Seq, from+uint64(len(recs))-1)
			}
			recs = append(recs, streamRecord{seq: m.Seq, subject: m.Subject, data: m.Data})
			return true, nil
		})
		release()
	}
	if err == nil && uint64(len(recs)) != to-from+1 {
		err = fmt.Errorf("stream %s: %d of the records from %d to %d read", p.cfg.stream, len(recs), from, to)
	}
	return recs, err
}

// gatherLinger bounds how long a batch waits for records that the stream
// says are pending (in flight to this pull request) before it is applied.
const gatherLinger = 5 * time.Millisecond

// gather groups first with the messages that have arrived. While the
// stream reports more pending (catching up), it lingers briefly for them so
// that batches fill up and commits (fsyncs) are amortized; at the tail it
// applies at once, for latency.
func (p *Projector) gather(msgs <-chan jetstream.Msg, first jetstream.Msg) []jetstream.Msg {
	group := []jetstream.Msg{first}
	var linger <-chan time.Time
	for len(group) < p.cfg.batchSize {
		select {
		case m, ok := <-msgs:
			if !ok {
				return group
			}
			group = append(group, m)
			continue
		default:
		}
		md, err := group[len(group)-1].Metadata()
		if err != nil || md.NumPending == 0 {
			return group
		}
		if linger == nil {
			t := time.NewTimer(gatherLinger)
			defer t.Stop()
			linger = t.C
		}
		select {
		case m, ok := <-msgs:
			if !ok {
				return group
			}
			group = append(group, m)
		case <-linger:
			return group
		}
	}
	return group
}

// errSwapped: the serving instance changed under the loop (a rebuild was
// swapped in); the loop re-creates its consumer from the new checkpoint.
var errSwapped = errors.New("projection swapped")

// applyMsgs applies a group of delivered messages in stream order: those
// at or below the checkpoint are redeliveries (skipped), and the records
// missing before a delivery past the next sequence are read from the
// stream first. The last message acknowledges the group (AckAll).
func (p *Projector) applyMsgs(ctx context.Context, inst *instance, msgs []jetstream.Msg, times *stageTimes) error {
	cp, err := p.checkpointOf(inst)
	if err != nil {
		return err
	}
	next := cp + 1
	recs := make([]streamRecord, 0, len(msgs))
	var pending uint64
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("message metadata: %w", err)
		}
		pending = md.NumPending
		times.at[stageStored] = md.Timestamp
		seq := md.Sequence.Stream
		if seq < next {
			continue // redelivered: already applied
		}
		if seq > next {
			missing, err := p.fill(ctx, next, seq-1)
			if errors.Is(err, errDeliveryGap) {
				return err
			}
			if err != nil {
				// Apply what is contiguous; the next pull delivers after
				// it and fills again.
				p.log.Debug("cannot read the records missing before a delivery; retrying", "from", next, "to", seq-1, "err", err)
				break
			}
			p.log.Debug("read records the consumer delivered and this projector did not receive", "from", next, "to", seq-1)
			recs = append(recs, missing...)
		}
		recs = append(recs, streamRecord{seq: seq, subject: m.Subject(), data: m.Data()})
		next = seq + 1
	}
	return p.applyRecords(ctx, inst, recs, msgs[len(msgs)-1], pending, times)
}

// applyRecords applies recs (in stream order, contiguous after the
// checkpoint but for redeliveries) as one batch and then acknowledges ack
// (AckAll: everything delivered up to it; nil = nothing to acknowledge).
// pending is the stream's count of records after the batch, for the lag
// metric. times notes the batch's stages (see stageTimes).
func (p *Projector) applyRecords(ctx context.Context, inst *instance, recs []streamRecord, ack jetstream.Msg, pending uint64, times *stageTimes) error {
	start := time.Now()
	if len(recs) > 0 {
		p.writeMu.Lock()
		if p.current() != inst {
			p.writeMu.Unlock()
			return errSwapped
		}
		times.note(stageLocked)
		c, err := p.applyBatchTimed(ctx, inst, recs, times)
		if err == nil && c != nil {
			p.published(c, times)
			// After the generation advanced: readers waiting for it do not
			// wait for the release too.
			p.releaseMapped(inst)
			times.note(stageReleased)
		}
		p.writeMu.Unlock()
		if err == nil && c != nil {
			p.logStages(ctx, recs, times)
		}
		if err != nil {
			return err
		}
		p.noteBatch(recs[len(recs)-1].seq, pending)
		if herr := p.hook("before-ack", recs[len(recs)-1].seq); herr != nil {
			return herr
		}
	}
	if ack == nil {
		return nil
	}
	// A lost ack only means a redelivery, which the checkpoint skips.
	if err := ack.Ack(); err != nil {
		p.log.Debug("ack failed", "err", err)
	}
	p.metrics.batchSeconds.Observe(time.Since(start).Seconds())
	p.metrics.lag.Set(float64(pending))
	return nil
}

// published makes a committed batch visible: the generation advances and
// the OnCommit hook runs. The caller holds writeMu.
func (p *Projector) published(c *Commit, times *stageTimes) {
	p.setGeneration(c.Generation)
	times.note(stagePublished)
	p.metrics.generation.Set(float64(c.Generation))
	if p.cfg.onCommit != nil {
		p.cfg.onCommit(*c)
	}
	times.note(stageHooked)
}

// consumer (re)creates the durable pull consumer so that it delivers from
// the instance's checkpoint + 1: the store, not the consumer's ack floor,
// says where to resume (after a rebuild or a lost store they differ).
func (p *Projector) consumer(ctx context.Context, inst *instance) (jetstream.Consumer, error) {
	cp, err := inst.store.checkpoint()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptStore, err)
	}
	stream, err := p.js.Stream(ctx, p.cfg.stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", p.cfg.stream, err)
	}
	id := IdentityOf(stream.CachedInfo())
	ok, why, err := inst.store.builtFrom(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptStore, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: the projection is not of stream %s (%s); open it again to rebuild it", ErrStreamReplaced, id, why)
	}
	if err := stream.DeleteConsumer(ctx, p.cfg.durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("reset consumer %s: %w", p.cfg.durable, err)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       p.cfg.durable,
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       time.Minute,
		MaxAckPending: -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if cp > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = cp + 1
	}
	c, err := stream.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create consumer %s: %w", p.cfg.durable, err)
	}
	p.learnStreamEnd(cp, stream.CachedInfo().State.LastSeq)
	return c, nil
}

// stageTimes are the wall-clock times at which one batch of the loop
// passed each stage, for the debug log line "batch stages" (the bench's
// per-stage breakdown of one append→searchable, DSHQ_BENCH_STAGES): the
// server's store time of its last record, when the loop received its first
// message and had gathered the group, held writeMu, had folded the records
// into the write transaction, applied the index batch, committed, made
// the generation visible, run the OnCommit hook and released the mapped
// pages. A nil *stageTimes notes nothing; a zero time is a stage not
// reached.
type stageTimes struct {
	at [stageCount]time.Time
}

type stage int

const (
	stageStored stage = iota
	stageRecv
	stageGathered
	stageLocked
	stageFolded
	stageIndexed
	stageCommitted
	stagePublished
	stageHooked
	stageReleased
	stageCount
)

// stageNames name the stages in the log line.
var stageNames = [stageCount]string{"stored", "recv", "gathered", "locked", "folded", "indexed", "committed", "published", "hooked", "released"}

func newStageTimes() *stageTimes {
	t := &stageTimes{}
	t.note(stageRecv)
	t.at[stageGathered] = t.at[stageRecv]
	return t
}

// note sets the time of stage s to now; on a nil t it does nothing.
func (t *stageTimes) note(s stage) {
	if t != nil {
		t.at[s] = time.Now()
	}
}

// logStages logs the stage times of a published batch at debug level, as
// Unix nanoseconds (the bench compares them with its own clock: one host).
func (p *Projector) logStages(ctx context.Context, recs []streamRecord, t *stageTimes) {
	if t == nil || !p.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := make([]slog.Attr, 0, 3+stageCount)
	attrs = append(attrs, slog.Uint64("first", recs[0].seq), slog.Uint64("last", recs[len(recs)-1].seq), slog.Int("records", len(recs)))
	for s, at := range t.at {
		var ns int64
		if !at.IsZero() {
			ns = at.UnixNano()
		}
		attrs = append(attrs, slog.Int64(stageNames[s], ns))
	}
	p.log.LogAttrs(ctx, slog.LevelDebug, "batch stages", attrs...)
}
