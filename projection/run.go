package projection

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
)

// fetchWait is how long one pull request waits for records.
const fetchWait = 2 * time.Second

// Run follows the stream and the lease bucket until ctx ends (then it
// returns nil) or a store fails (then it returns the error). It applies
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

// follow is the projector loop.
func (p *Projector) follow(ctx context.Context) error {
	var (
		cons jetstream.Consumer
		for_ *instance
		next uint64 // the consumer sequence of the next delivery
	)
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
				if errors.Is(err, ErrCorruptStore) {
					return err
				}
				// The stream may not exist yet, or the bus is unreachable:
				// a daemon waits for it.
				p.log.Warn("cannot create the consumer; retrying", "err", err)
				if waitCtx(ctx, time.Second) != nil {
					return nil
				}
				continue
			}
			cons, for_, next = c, inst, 1
		}
		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		mb, err := cons.Fetch(p.cfg.batchSize, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			p.log.Warn("fetch failed; retrying", "err", err)
			for_ = nil // recreate the consumer: it may have been deleted
			if err := waitCtx(ctx, time.Second); err != nil {
				return nil
			}
			continue
		}
		read, err := p.drain(ctx, inst, mb, &next)
		cancel()
		if err == nil && read < p.cfg.batchSize && ctx.Err() == nil {
			err = p.checkDelivered(ctx, cons, next)
		}
		if errors.Is(err, errDeliveryGap) {
			// A pull cut off by its deadline dropped records the server
			// had sent; acknowledging a later one (AckAll) would lose them.
			// Resume from the checkpoint with a new consumer.
			p.log.Debug("resuming after an interrupted delivery", "err", err)
			for_ = nil
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// drain applies the messages of one pull request, grouping those that are
// already there into batches. next is the consumer sequence expected next: a
// delivery past it means records were delivered and never read, so drain
// applies what came before it and returns errDeliveryGap.
func (p *Projector) drain(ctx context.Context, inst *instance, mb jetstream.MessageBatch, next *uint64) (read int, err error) {
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
		group := p.gather(msgs, first)
		cut := false
		if c := p.cfg.followCutoff; c > 0 && read+len(group) >= c {
			group, cut = group[:c-read], true // the rest is dropped, as by a deadline
		}
		read += len(group)
		var gap error
		for i, m := range group {
			md, err := m.Metadata()
			if err != nil {
				return read, fmt.Errorf("message metadata: %w", err)
			}
			if md.Sequence.Consumer != *next {
				gap = fmt.Errorf("%w: delivery %d after %d (stream sequence %d)", errDeliveryGap, md.Sequence.Consumer, *next-1, md.Sequence.Stream)
				group = group[:i]
				break
			}
			*next++
		}
		if len(group) > 0 {
			if err := p.applyMsgs(ctx, inst, group); err != nil {
				if errors.Is(err, errSwapped) {
					return read, nil
				}
				return read, err
			}
		}
		if gap != nil {
			return read, gap
		}
		if cut {
			return read, nil
		}
	}
}

// checkDelivered asks the server how many records the consumer delivered
// after a pull that ended short: more than were read means a pull cut off
// by its deadline dropped some (errDeliveryGap). Its pending count tells
// the loop how far behind the stream it is.
func (p *Projector) checkDelivered(ctx context.Context, cons jetstream.Consumer, next uint64) error {
	info, err := cons.Info(ctx)
	if err != nil {
		return nil // the next pull or consumer reset will tell
	}
	if info.Delivered.Consumer >= next {
		return fmt.Errorf("%w: %d deliveries, %d read", errDeliveryGap, info.Delivered.Consumer, next-1)
	}
	// Everything delivered was applied: what the stream holds beyond is
	// pending (a pull that ended short with records pending is behind).
	p.noteBatch(p.Generation(), info.NumPending)
	return nil
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

func (p *Projector) applyMsgs(ctx context.Context, inst *instance, msgs []jetstream.Msg) error {
	recs := make([]streamRecord, 0, len(msgs))
	var pending uint64
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("message metadata: %w", err)
		}
		recs = append(recs, streamRecord{seq: md.Sequence.Stream, subject: m.Subject(), data: m.Data()})
		pending = md.NumPending
	}
	start := time.Now()
	p.writeMu.Lock()
	if p.current() != inst {
		p.writeMu.Unlock()
		return errSwapped
	}
	c, err := p.applyBatch(ctx, inst, recs)
	if err == nil && c != nil {
		p.published(c)
		// After the generation advanced: readers waiting for it do not
		// wait for the release too.
		p.releaseMapped(inst)
	}
	p.writeMu.Unlock()
	if err != nil {
		return err
	}
	p.noteBatch(recs[len(recs)-1].seq, pending)
	if herr := p.hook("before-ack", recs[len(recs)-1].seq); herr != nil {
		return herr
	}
	// AckAll: acknowledging the last acknowledges the group. A lost ack
	// only means a redelivery, which the checkpoint skips.
	if err := msgs[len(msgs)-1].Ack(); err != nil {
		p.log.Debug("ack failed", "err", err)
	}
	p.metrics.batchSeconds.Observe(time.Since(start).Seconds())
	p.metrics.lag.Set(float64(pending))
	return nil
}

// published makes a committed batch visible: the generation advances and
// the OnCommit hook runs. The caller holds writeMu.
func (p *Projector) published(c *Commit) {
	p.setGeneration(c.Generation)
	p.metrics.generation.Set(float64(c.Generation))
	if p.cfg.onCommit != nil {
		p.cfg.onCommit(*c)
	}
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

func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
