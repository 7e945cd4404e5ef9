package projection

import (
	"sync"
	"time"
)

// progressLogEvery is how often the loop logs while it catches up.
const progressLogEvery = 5 * time.Second

// Progress is how far the serving projection is behind the session stream,
// as the projector's loop last learnt it.
type Progress struct {
	// Generation is the stream sequence the projection has applied.
	Generation uint64
	// StreamLastSeq is the stream's last sequence as the loop last learnt
	// it: when it (re)created its consumer, and from the pending count of
	// every batch it applied.
	StreamLastSeq uint64
	// CatchingUp is true while the loop works off a backlog: from the start
	// (or a rebuild's swap) with records to apply, or a batch that left at
	// least a batch's worth pending, until a batch leaves none.
	CatchingUp bool
}

// catchUp tracks Progress for the loop and logs it: "catching up" when a
// backlog is found and every progressLogEvery while it lasts, "caught up"
// once it is worked off. Live traffic, which one batch at a time keeps up
// with, logs nothing.
type catchUp struct {
	mu       sync.Mutex // guards the fields below
	last     uint64     // the stream's last sequence as last learnt
	behind   bool
	since    time.Time // when the backlog was found
	fromGen  uint64    // the generation then
	loggedAt time.Time
}

// Progress reports how far the serving projection is behind the stream.
func (p *Projector) Progress() Progress {
	gen := p.Generation()
	c := &p.catchUp
	c.mu.Lock()
	defer c.mu.Unlock()
	return Progress{Generation: gen, StreamLastSeq: max(c.last, gen), CatchingUp: c.behind && c.last > gen}
}

// learnStreamEnd records the stream's last sequence when the loop creates
// its consumer at applied generation gen.
func (p *Projector) learnStreamEnd(gen, last uint64) {
	c := &p.catchUp
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = last
	if last > gen && !c.behind {
		c.start(gen)
		p.log.Info("catching up with the session stream", "generation", gen, "streamLastSeq", last, "behind", last-gen)
	}
}

// noteBatch records a batch applied through stream sequence gen that left
// pending records undelivered.
func (p *Projector) noteBatch(gen, pending uint64) {
	c := &p.catchUp
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = max(c.last, gen+pending)
	now := time.Now()
	switch {
	case !c.behind && pending >= uint64(p.cfg.batchSize):
		c.start(gen)
		p.log.Info("catching up with the session stream", "generation", gen, "streamLastSeq", c.last, "behind", pending)
	case c.behind && pending == 0:
		c.behind = false
		p.log.Info("caught up with the session stream", "generation", gen, "records", gen-c.fromGen, "seconds", now.Sub(c.since).Round(time.Millisecond).Seconds())
	case c.behind && now.Sub(c.loggedAt) >= progressLogEvery:
		c.loggedAt = now
		rate := float64(gen-c.fromGen) / now.Sub(c.since).Seconds()
		p.log.Info("catching up with the session stream", "generation", gen, "streamLastSeq", c.last, "behind", c.last-gen, "recordsPerSecond", int64(rate))
	}
}

// start marks a backlog found at generation gen. The caller holds mu.
func (c *catchUp) start(gen uint64) {
	c.behind, c.since, c.fromGen, c.loggedAt = true, time.Now(), gen, time.Now()
}
