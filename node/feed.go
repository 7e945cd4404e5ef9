package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/feed/feedcommit"
	"github.com/dshq/dshq/projection"
)

// errPublishFailed, returned by a fault, makes the hook treat the commit's
// publication as failed without stopping the node (tests).
var errPublishFailed = errors.New("injected feed publication failure")

// feedPublisher publishes the projector's commits to the live feed without
// gaps (docs/protocol.md §5.5): on start it re-publishes what the feed is
// missing up to the projection's checkpoint, and a commit whose publication
// failed is re-derived into the next commit's publication.
type feedPublisher struct {
	pub *feed.Publisher
	log *slog.Logger
	// fault, when set, runs before each commit's publication; an error
	// stops publishing for good and is passed to stop, as if the process
	// died between its bbolt commit and its feed publication, except
	// errPublishFailed, which fails that one publication (tests).
	fault func(gen uint64) error
	stop  func(error)
	// queue hands commits from the projector's hook to run.
	queue chan projection.Commit

	// mu guards the fields below; run publishes, catchUp runs before the
	// projector's loop and run start.
	mu sync.Mutex
	// published is the generation through which the feed is complete;
	// seen is the generation of the last commit run took.
	published, seen uint64
	dead            bool
}

// catchUp publishes what the feed lacks through the projection's
// checkpoint: the changes of (feed generation, partial generation] as one
// commit at the partial generation, then those up to the checkpoint as one
// commit at the checkpoint. It runs before the projector's loop, so before
// any new commit is published.
func (f *feedPublisher) catchUp(ctx context.Context, p *projection.Projector) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := p.Generation()
	f.seen = c
	cp, err := f.pub.Checkpoint(ctx)
	switch {
	case errors.Is(err, feed.ErrNoCheckpoint):
		cp = feed.Checkpoint{}
	case err != nil:
		return fmt.Errorf("feed checkpoint: %w", err)
	}
	if cp.Generation >= c {
		if cp.Generation > c {
			f.log.Warn("feed: the feed is ahead of the projection", "published", cp.Generation, "generation", c)
		}
		f.published = c
		return nil
	}
	f.published = cp.Generation
	steps := []uint64{c}
	if cp.Partial && cp.PartialGeneration > cp.Generation && cp.PartialGeneration < c {
		steps = []uint64{cp.PartialGeneration, c}
	}
	for _, to := range steps {
		if err := f.rederive(ctx, p, to); err != nil {
			return err
		}
	}
	f.log.Info("feed: re-published commits missing from the feed", "from", cp.Generation, "through", c)
	return nil
}

// rederive publishes the changes of (f.published, to] as one commit at to.
// The caller holds mu.
func (f *feedPublisher) rederive(ctx context.Context, p *projection.Projector, to uint64) error {
	err := p.View(ctx, to, func(s projection.Snapshot) error {
		c, err := feedcommit.Rederive(s, f.published, to)
		if err != nil {
			return fmt.Errorf("re-derive feed commits (%d, %d]: %w", f.published, to, err)
		}
		return f.publish(ctx, c, s)
	})
	if err != nil {
		return err
	}
	f.published = to
	return nil
}

func (f *feedPublisher) publish(ctx context.Context, c projection.Commit, s projection.Snapshot) error {
	msgs, err := feedcommit.FromCommit(c, s)
	if err != nil || len(msgs) == 0 {
		return err
	}
	return f.pub.Publish(ctx, msgs)
}

// hook returns the projector's OnCommit hook: it hands the commit to run,
// which publishes it while the projector applies the next batch. It blocks
// while run is still publishing the previous commit (so the feed trails the
// projection by one commit at most), and drops the commit once run is told
// to stop (quit) or has returned (done): the next start re-publishes what
// the feed lacks (catchUp).
func (f *feedPublisher) hook(quit, done <-chan struct{}) func(projection.Commit) {
	return func(c projection.Commit) {
		select {
		case f.queue <- c:
		case <-quit:
		case <-done:
		}
	}
}

// run publishes the commits hook hands over, in order, until quit is closed
// or ctx ends; a publication in progress then finishes (bounded by ctx).
// The queue holds nothing: once the projector's loop has stopped, quit
// leaves no commit behind. proj returns the projector (set before its loop
// starts).
func (f *feedPublisher) run(ctx context.Context, quit <-chan struct{}, proj func() *projection.Projector) {
	for {
		select {
		case c := <-f.queue:
			f.publishCommit(ctx, proj(), c)
		case <-quit:
			return
		case <-ctx.Done():
			return
		}
	}
}

// publishCommit publishes one commit. A failed publication is logged and
// left for the next commit, which then publishes everything since the last
// complete one; the projection itself is unaffected (the feed is derived
// data).
func (f *feedPublisher) publishCommit(ctx context.Context, p *projection.Projector, c projection.Commit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	behind := f.published < f.seen
	f.seen = c.Generation
	if f.dead || ctx.Err() != nil {
		return
	}
	if f.fault != nil {
		if err := f.fault(c.Generation); errors.Is(err, errPublishFailed) {
			f.log.Error("publish commit to the feed", "generation", c.Generation, "published", f.published, "err", err)
			return
		} else if err != nil {
			f.dead = true
			f.stop(err)
			return
		}
	}
	if p == nil {
		f.log.Error("feed: commit before the projector was opened", "generation", c.Generation)
		return
	}
	var err error
	if behind {
		err = f.rederive(ctx, p, c.Generation)
	} else {
		// The snapshot may be at a later generation than c: the commit's
		// messages read from it only the workspace and subject token of a
		// session, which never change.
		err = p.View(ctx, c.Generation, func(s projection.Snapshot) error { return f.publish(ctx, c, s) })
		if err == nil {
			f.published = c.Generation
		}
	}
	if err != nil && ctx.Err() == nil {
		f.log.Error("publish commit to the feed", "generation", c.Generation, "published", f.published, "err", err)
	}
}
