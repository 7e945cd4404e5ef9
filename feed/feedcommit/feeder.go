package feedcommit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/projection"
)

// Projection is the projector as a Feeder reads it; *projection.Projector
// implements it.
type Projection interface {
	// Generation is the generation the serving projection has reached.
	Generation() uint64
	// Epoch identifies the serving projection; a rebuild changes it.
	Epoch() string
	// View runs fn on a snapshot at minGeneration or later.
	View(ctx context.Context, minGeneration uint64, fn func(projection.Snapshot) error) error
}

var _ Projection = (*projection.Projector)(nil)

// ErrStop, wrapped by an error of a WithFault function, stops the Feeder
// for good.
var ErrStop = errors.New("feed publication stopped")

// rederiveChunk bounds the stream records one re-derived commit covers, so
// that catching up a long gap never holds the whole gap's messages at once.
const rederiveChunk = 16384

// Feeder publishes a projector's commits to the live feed so that the feed
// holds every change once: none dropped, none repeated, across restarts,
// rebuilds (a swap, or a projection rebuilt from the stream at start) and
// failed publications, whatever the feed stream's duplicate window
// (docs/protocol.md#55-publishing-and-the-projectors-rule). Its rule: the feed
// is complete through a generation G (the last commit it holds completely); a
// commit is published as it is when it continues G (the projection commit
// before it was published, in the same epoch); otherwise the changes of the
// records in (G, its generation] are re-derived from a snapshot (Rederive) and
// published instead. A commit at or below G is in the feed already and is not
// published again. A commit the feed holds only in part (the process stopped in
// its middle) is completed with exactly the messages it lacks
// (feed.Publisher.Resume) once the projection reaches it. Lease changes are
// held while the feed is behind the projection and published after the next
// commit, so generations never decrease along the feed.
//
// Use: open the projector with projection.WithOnCommit(f.Hook); call
// CatchUp before the projector's loop starts; run Run in a goroutine; at
// shutdown, stop the loop first, then Stop and wait for Run.
type Feeder struct {
	pub   *feed.Publisher
	log   *slog.Logger
	fault func(gen uint64) error
	// queue hands commits from Hook to Run; it holds none, so the feed
	// trails the projection by the commit in publication at most.
	queue    chan projection.Commit
	quit     chan struct{} // closed by Stop
	stopOnce sync.Once
	ended    chan struct{} // closed when Run returns

	// mu guards the fields below: CatchUp runs before Run starts, and Run
	// holds mu while it publishes.
	mu   sync.Mutex
	proj Projection
	// published is the generation through which the feed holds every
	// change; partial, when not 0, the generation of a commit it holds in
	// part, completed once the projection reaches it.
	published, partial uint64
	// seen and epoch are the generation and epoch of the last commit Run
	// took (the projection's at CatchUp).
	seen  uint64
	epoch string
	// resync makes the next publication read the feed's checkpoint first:
	// a failed one may have stored part of its commit.
	resync bool
	// held are lease changes waiting for the feed to catch up, by log key.
	held map[string]projection.LeaseChange
	// err is the failure that stopped the Feeder (a fault wrapping ErrStop).
	err error
}

// FeederOption configures NewFeeder.
type FeederOption func(*Feeder)

// WithFeederLogger sets the logger (default: none).
func WithFeederLogger(l *slog.Logger) FeederOption { return func(f *Feeder) { f.log = l } }

// WithFault sets a function run before each commit's publication, for
// fault-injection tests: an error fails that publication as a real failure
// would (the next commit re-derives what it lacks), and an error wrapping
// ErrStop stops the Feeder for good — Run returns it — as when the process
// dies between its projection commit and the feed publication.
func WithFault(fn func(gen uint64) error) FeederOption { return func(f *Feeder) { f.fault = fn } }

// NewFeeder returns a Feeder publishing through pub.
func NewFeeder(pub *feed.Publisher, opts ...FeederOption) *Feeder {
	f := &Feeder{pub: pub, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		queue: make(chan projection.Commit), quit: make(chan struct{}), ended: make(chan struct{}),
		held: map[string]projection.LeaseChange{}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Hook is the projector's OnCommit hook: it hands c to Run and waits while
// Run publishes the commit before it. After Stop, or once Run has
// returned, it drops c: CatchUp on the next start publishes what the feed
// lacks.
func (f *Feeder) Hook(c projection.Commit) {
	select {
	case f.queue <- c:
	case <-f.quit:
	case <-f.ended:
	}
}

// CatchUp reads where the feed stands and publishes what it lacks through
// p's generation: it completes a commit the feed holds in part, then
// publishes the changes after it. It runs before p's loop starts (so before
// any commit reaches Hook). A projection behind the feed (rebuilt from the
// stream, or restored from an older copy) publishes nothing until it passes
// the feed's generation.
func (f *Feeder) CatchUp(ctx context.Context, p Projection) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proj = p
	f.seen, f.epoch = p.Generation(), p.Epoch()
	if err := f.readCheckpoint(ctx); err != nil {
		return err
	}
	from := f.published
	if err := f.advance(ctx, f.seen); err != nil {
		return err
	}
	switch {
	case f.published > from:
		f.log.Info("feed: published the changes the feed lacked", "from", from, "through", f.published)
	case f.published > f.seen:
		f.log.Info("feed: the projection is behind the feed (rebuilt from the stream or restored); its commits are published from the feed's generation on",
			"feed", f.published, "generation", f.seen)
	}
	return nil
}

// readCheckpoint sets published and partial from the feed's checkpoint.
// The caller holds mu.
func (f *Feeder) readCheckpoint(ctx context.Context) error {
	cp, err := f.pub.Checkpoint(ctx)
	switch {
	case errors.Is(err, feed.ErrAgedOut):
		// What the feed held before its oldest message is unknown: take it
		// as complete through the partly published commit it begins with,
		// or (when it holds nothing) through the projection, rather than
		// publish the history again.
		f.published, f.partial = f.seen, 0
		if cp.Partial {
			f.published = cp.PartialGeneration
		}
		f.log.Warn("feed: its oldest messages aged out; publishing from here on", "generation", f.published, "err", err)
	case errors.Is(err, feed.ErrNoCheckpoint):
		f.published, f.partial = 0, 0
	case err != nil:
		return fmt.Errorf("feed checkpoint: %w", err)
	case cp.Partial:
		f.published, f.partial = cp.Generation, cp.PartialGeneration
	default:
		f.published, f.partial = cp.Generation, 0
	}
	f.resync = false
	return nil
}

// advance publishes what the feed lacks through generation to, which the
// projection has reached: the rest of a partial commit when to reaches it,
// then the changes of (published, to] re-derived. The caller holds mu.
func (f *Feeder) advance(ctx context.Context, to uint64) error {
	if f.partial != 0 {
		if to < f.partial {
			return nil
		}
		if err := f.complete(ctx); err != nil {
			return err
		}
	}
	for f.published < to {
		next := min(to, f.published+rederiveChunk)
		msgs, err := f.messages(ctx, to, func(s projection.Snapshot) (projection.Commit, error) {
			c, err := Rederive(s, f.published, next)
			if err != nil {
				return c, fmt.Errorf("re-derive feed commits (%d, %d]: %w", f.published, next, err)
			}
			return c, nil
		})
		if err != nil {
			return err
		}
		if err := f.send(ctx, msgs, f.pub.Publish); err != nil {
			return err
		}
		f.published = next
	}
	return nil
}

// complete publishes the messages the partly published commit at partial
// lacks. The caller holds mu.
func (f *Feeder) complete(ctx context.Context) error {
	msgs, err := f.messages(ctx, f.partial, func(s projection.Snapshot) (projection.Commit, error) {
		c, err := Rederive(s, f.published, f.partial)
		if err != nil {
			return c, fmt.Errorf("re-derive the partly published feed commit (%d, %d]: %w", f.published, f.partial, err)
		}
		return c, nil
	})
	if err == nil {
		err = f.send(ctx, msgs, f.pub.Resume)
	}
	if err != nil {
		return err
	}
	f.log.Info("feed: completed a partly published commit", "generation", f.partial)
	f.published, f.partial = f.partial, 0
	return nil
}

// messages turns the commit commit returns from a snapshot at
// minGeneration or later into feed messages. The snapshot (a read
// transaction of the projection's store) ends before they are published,
// so that a slow publication never holds the store's pages or keeps the
// projector's next commit from growing the store's file.
func (f *Feeder) messages(ctx context.Context, minGeneration uint64, commit func(projection.Snapshot) (projection.Commit, error)) ([]feed.Message, error) {
	var msgs []feed.Message
	err := f.proj.View(ctx, minGeneration, func(s projection.Snapshot) error {
		c, err := commit(s)
		if err != nil {
			return err
		}
		msgs, err = FromCommit(c, s)
		return err
	})
	return msgs, err
}

// send publishes msgs with send (nothing when there are none).
func (f *Feeder) send(ctx context.Context, msgs []feed.Message, send func(context.Context, []feed.Message) error) error {
	if len(msgs) == 0 {
		return nil
	}
	return send(ctx, msgs)
}

// Run publishes the commits Hook hands over, in order, until Stop or ctx
// ends; the publication in progress then finishes (bounded by ctx). It
// returns nil, or the fault that stopped the Feeder (WithFault). Run once.
func (f *Feeder) Run(ctx context.Context) error {
	defer close(f.ended)
	for {
		select {
		case c := <-f.queue:
			if err := f.take(ctx, c); err != nil {
				return err
			}
		case <-f.quit:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// Stop makes Hook drop commits and Run return. It is idempotent.
func (f *Feeder) Stop() { f.stopOnce.Do(func() { close(f.quit) }) }

// Published returns the generation through which the feed holds every
// change, as far as this Feeder knows.
func (f *Feeder) Published() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.published
}

// take publishes one commit. A failed publication is logged and left to
// the next commit, which re-derives what the feed lacks; the projection is
// unaffected (the feed is derived data).
func (f *Feeder) take(ctx context.Context, c projection.Commit) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.err != nil:
		return f.err
	case ctx.Err() != nil:
		return nil
	case f.proj == nil:
		f.log.Error("feed: a commit before CatchUp", "generation", c.Generation)
		return nil
	case isLeaseOnly(c):
		f.leases(ctx, c)
		return nil
	}
	// A commit continues the feed when the one before it was published and
	// it belongs to the same projection; a rebuild's swap commit (a new
	// epoch) carries none of the records its final catch-up applied.
	continues := f.published == f.seen && c.Epoch == f.epoch && f.partial == 0 && !f.resync
	f.seen, f.epoch = c.Generation, c.Epoch
	err := f.injectFault(c.Generation)
	if errors.Is(err, ErrStop) {
		f.err = err
		return err
	}
	if err == nil {
		err = f.publishCommit(ctx, c, continues)
	}
	if err != nil {
		f.resync = true
		if ctx.Err() == nil {
			f.log.Error("publish commit to the feed", "generation", c.Generation, "published", f.published, "err", err)
		}
		return nil
	}
	f.flushLeases(ctx)
	return nil
}

// injectFault runs the WithFault function, if any.
func (f *Feeder) injectFault(gen uint64) error {
	if f.fault == nil {
		return nil
	}
	return f.fault(gen)
}

// publishCommit publishes c, or what the feed lacks through its generation.
// The caller holds mu.
func (f *Feeder) publishCommit(ctx context.Context, c projection.Commit, continues bool) error {
	if !continues {
		if f.resync {
			if err := f.readCheckpoint(ctx); err != nil {
				return err
			}
		}
		return f.advance(ctx, c.Generation)
	}
	// The snapshot may be at a later generation than c: the commit's
	// messages read from it only the workspace and subject token of a
	// session, which never change.
	msgs, err := f.messages(ctx, c.Generation, func(projection.Snapshot) (projection.Commit, error) { return c, nil })
	if err == nil {
		err = f.send(ctx, msgs, f.pub.Publish)
	}
	if err != nil {
		return err
	}
	f.published = c.Generation
	return nil
}

// leases publishes a lease-only commit at the feed's generation. While the
// feed is behind the projection (a failed publication), it first publishes
// what the feed lacks; if that fails, the changes are held for the next
// commit. The caller holds mu.
func (f *Feeder) leases(ctx context.Context, c projection.Commit) {
	for _, l := range c.Leases {
		f.held[l.Key] = l
	}
	if f.resync || f.published < f.seen || f.partial != 0 {
		err := f.repair(ctx)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Error("publish what the feed lacks", "generation", f.seen, "published", f.published, "err", err)
			}
			return
		}
	}
	f.flushLeases(ctx)
}

// repair publishes what the feed lacks through the projection's last
// commit. The caller holds mu.
func (f *Feeder) repair(ctx context.Context) error {
	if f.resync {
		if err := f.readCheckpoint(ctx); err != nil {
			return err
		}
	}
	if err := f.advance(ctx, f.seen); err != nil {
		f.resync = true
		return err
	}
	return nil
}

// flushLeases publishes the held lease changes as one lease-only commit at
// the feed's generation; on failure they stay held. The caller holds mu.
func (f *Feeder) flushLeases(ctx context.Context) {
	if len(f.held) == 0 || f.published < f.seen || f.partial != 0 {
		return
	}
	c := projection.Commit{Generation: f.published, Epoch: f.epoch}
	for _, tok := range slices.Sorted(maps.Keys(f.held)) {
		c.Leases = append(c.Leases, f.held[tok])
	}
	msgs, err := f.messages(ctx, 0, func(projection.Snapshot) (projection.Commit, error) { return c, nil })
	if err == nil {
		err = f.send(ctx, msgs, f.pub.Publish)
	}
	if err != nil {
		if ctx.Err() == nil {
			f.log.Error("publish lease changes to the feed", "generation", c.Generation, "err", err)
		}
		return
	}
	clear(f.held)
}

// isLeaseOnly reports whether c changed leases and nothing else (a
// rebuild's swap commit changes nothing and is not lease-only).
func isLeaseOnly(c projection.Commit) bool {
	return len(c.Leases) > 0 && len(c.Sessions) == 0 && len(c.Events) == 0 && len(c.Reclassified) == 0 && len(c.Titles) == 0 && len(c.Quarantined) == 0
}
