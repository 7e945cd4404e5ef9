package feedcommit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/record"
)

// feedEnv is the test stack (testenv: JetStream with the session stream and
// the lease bucket) with the feed stream, a projection directory the test's
// projectors restart on, and what the test published.
type feedEnv struct {
	t      *testing.T
	ctx    context.Context
	js     jetstream.JetStream
	leases jetstream.KeyValue
	dir    string
	window time.Duration       // the feed's duplicate window when short, else 0
	logs   map[string][][]byte // session id → its records
	last   uint64              // the stream sequence of the last record
}

// duplicateWindows are the feed's duplicate windows the tests run with: the
// default, and the shortest the server takes, which every start waits out,
// so that nothing relies on the server dropping a message it stored before.
var duplicateWindows = []struct {
	name   string
	window time.Duration
}{
	{"default duplicate window", 0},
	{"a duplicate window that passes before every start", 100 * time.Millisecond},
}

func newFeedEnv(t *testing.T, window time.Duration) *feedEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	env := testenv.Start(t)
	js, kv := env.JS, env.Leases
	if _, err := feed.EnsureStream(ctx, js, feed.StreamConfig{Duplicates: window}); err != nil {
		t.Fatal(err)
	}
	return &feedEnv{t: t, ctx: ctx, js: js, leases: kv, dir: t.TempDir(), window: window, logs: map[string][][]byte{}}
}

// publish publishes the sample log as session id.
func (e *feedEnv) publish(id string) {
	e.t.Helper()
	lines := readLog(e.t, "upstream-2.5.jsonl", id, "/home/u/"+id)
	tok, err := record.SubjectToken(id)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, l := range lines {
		ack, err := e.js.Publish(e.ctx, "dsh.log."+tok, l)
		if err != nil {
			e.t.Fatal(err)
		}
		e.last = ack.Sequence
	}
	e.logs[id] = lines
}

// setLive puts or deletes session id's write lease.
func (e *feedEnv) setLive(id string, live bool) {
	e.t.Helper()
	tok, err := record.SubjectToken(id)
	if err != nil {
		e.t.Fatal(err)
	}
	if live {
		_, err = e.leases.Put(e.ctx, bus.LeaseKey(tok), []byte("holder"))
	} else {
		err = e.leases.Delete(e.ctx, bus.LeaseKey(tok))
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// lifeOf is one run of a projector and its Feeder on the environment.
type lifeOf struct {
	e        *feedEnv
	p        *projection.Projector
	f        *Feeder
	log      *testenv.Buffer
	stopLoop context.CancelFunc
	loopDone chan error
	stopFeed context.CancelFunc
	feedDone chan error
	stopped  bool
}

// start opens the projection, catches the feed up and runs both loops.
func (e *feedEnv) start(batch int, opts ...FeederOption) *lifeOf {
	e.t.Helper()
	// With a short duplicate window, what earlier lives stored is outside
	// it: the server would store a message published again.
	time.Sleep(e.window)
	l := &lifeOf{e: e, log: &testenv.Buffer{}, loopDone: make(chan error, 1), feedDone: make(chan error, 1)}
	logger := slog.New(slog.NewTextHandler(l.log, nil))
	l.f = NewFeeder(feed.NewPublisher(e.js), append([]FeederOption{WithFeederLogger(logger)}, opts...)...)
	p, err := projection.Open(e.ctx, e.js, e.dir, projection.WithOnCommit(l.f.Hook), projection.WithBatchSize(batch), projection.WithLogger(logger))
	if err != nil {
		e.t.Fatal(err)
	}
	l.p = p
	if err := l.f.CatchUp(e.ctx, p); err != nil {
		p.Close()
		e.t.Fatal(err)
	}
	var fctx, lctx context.Context
	fctx, l.stopFeed = context.WithCancel(e.ctx)
	lctx, l.stopLoop = context.WithCancel(e.ctx)
	go func() { l.feedDone <- l.f.Run(fctx) }()
	go func() { l.loopDone <- p.Run(lctx) }()
	e.t.Cleanup(l.stop)
	return l
}

// haltLoop stops the projector's loop only.
func (l *lifeOf) haltLoop() {
	l.stopLoop()
	if err := <-l.loopDone; err != nil {
		l.e.t.Errorf("projector loop: %v", err)
	}
	l.loopDone <- nil
}

// stop stops the loop, then the feeder, and closes the projection, as the
// node does.
func (l *lifeOf) stop() {
	if l.stopped {
		return
	}
	l.stopped = true
	l.stopLoop()
	<-l.loopDone
	l.f.Stop()
	if err := <-l.feedDone; err != nil && !errors.Is(err, ErrStop) {
		l.e.t.Errorf("feeder: %v", err)
	}
	l.stopFeed()
	if err := l.p.Close(); err != nil {
		l.e.t.Errorf("close projection: %v", err)
	}
}

// waitGeneration waits until the projection reaches gen.
func (l *lifeOf) waitGeneration(gen uint64) {
	l.e.t.Helper()
	ctx, cancel := context.WithTimeout(l.e.ctx, 30*time.Second)
	defer cancel()
	if err := l.p.WaitGeneration(ctx, gen); err != nil {
		l.e.t.Fatalf("projection at %d, want %d: %v", l.p.Generation(), gen, err)
	}
}

// waitPublished waits until the feed holds every change through gen.
func (l *lifeOf) waitPublished(gen uint64) {
	l.e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.f.Published() < gen {
		if time.Now().After(deadline) {
			l.e.t.Fatalf("feed published through %d, want %d; log:\n%s", l.f.Published(), gen, l.log)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

// stored is a feed message with its message id.
type stored struct {
	feed.Message
	id string
}

// read returns every message of the feed stream, in order.
func (e *feedEnv) read() []stored {
	e.t.Helper()
	st, err := e.js.Stream(e.ctx, dshq.FeedStream)
	if err != nil {
		e.t.Fatal(err)
	}
	state := st.CachedInfo().State
	var out []stored
	for seq := state.FirstSeq; seq <= state.LastSeq && seq > 0; seq++ {
		raw, err := st.GetMsg(e.ctx, seq)
		if err != nil {
			e.t.Fatalf("feed message %d: %v", seq, err)
		}
		m, err := feed.Decode(raw.Data)
		if err != nil {
			e.t.Fatalf("feed message %d: %v", seq, err)
		}
		out = append(out, stored{Message: *m, id: raw.Header.Get(nats.MsgIdHdr)})
	}
	return out
}

// check asserts that the feed holds every published session and event
// exactly once, in non-decreasing feed order, with no message id twice; it
// returns the number of messages.
func (e *feedEnv) check() int {
	e.t.Helper()
	all := e.read()
	ids := map[string]int{}
	sessions := map[string]int{}
	events := map[string]int{}
	var prevKey uint64
	for i, m := range all {
		key := 2 * m.Generation
		if m.Kind == feed.KindLease {
			key++
		}
		if key < prevKey {
			e.t.Errorf("feed message %d (%s at generation %d) comes after key %d: generations decreased", i, m.Kind, m.Generation, prevKey)
		}
		prevKey = key
		if m.id != "" {
			if j, dup := ids[m.id]; dup {
				e.t.Errorf("feed messages %d and %d have the same id %s", j, i, m.id)
			}
			ids[m.id] = i
		}
		switch m.Kind {
		case feed.KindSession:
			sessions[m.SessionID]++
		case feed.KindEvent:
			events[m.SessionID+"#"+strconv.FormatInt(m.Event.Seq, 10)]++
		}
	}
	for id, lines := range e.logs {
		if sessions[id] != 1 {
			e.t.Errorf("session %s is in the feed %d times, want once", id, sessions[id])
		}
		for seq := 0; seq < len(lines)-1; seq++ {
			if n := events[id+"#"+strconv.Itoa(seq)]; n != 1 {
				e.t.Errorf("event %d of %s is in the feed %d times, want once", seq, id, n)
			}
		}
	}
	if len(sessions) != len(e.logs) {
		e.t.Errorf("the feed names %d sessions, want %d", len(sessions), len(e.logs))
	}
	return len(all)
}

// restartsRepublishNothing restarts the projector n times and checks that
// no start publishes a record again. A start may announce the live set
// (the lease watch replays the held leases into a projector whose live set
// starts empty, and the feeder publishes each: feed consumers learn the
// state whether or not they saw the last life's changes), so what a
// restart may add is a lease message saying a session whose lease is held
// now is live, and nothing else. Whether the watch replays before the
// stop is the machine's timing, so the test allows both.
func (e *feedEnv) restartsRepublishNothing(n, batch int) {
	e.t.Helper()
	e.check()
	before := len(e.read())
	for i := 0; i < n; i++ {
		l := e.start(batch)
		l.stop()
		if strings.Contains(l.log.String(), "published the changes") || strings.Contains(l.log.String(), "completed a partly") {
			e.t.Errorf("plain restart %d published again:\n%s", i+1, l.log)
		}
	}
	e.check()
	for _, m := range e.read()[before:] {
		if m.Kind != feed.KindLease || !m.Lease.Live || !e.held(m.SessionID) {
			e.t.Errorf("a plain restart published a %s message of %s at generation %d (lease %+v), where it may only announce a held lease",
				m.Kind, m.SessionID, m.Generation, m.Lease)
		}
	}
}

// held reports whether session id's write lease is held.
func (e *feedEnv) held(id string) bool {
	e.t.Helper()
	tok, err := record.SubjectToken(id)
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = e.leases.Get(e.ctx, bus.LeaseKey(tok))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		e.t.Fatal(err)
	}
	return err == nil
}

func TestFeeder_ARebuildSwappedInPublishesWhatItsFinalCatchUpApplied(t *testing.T) {
	for _, w := range duplicateWindows {
		t.Run(w.name, func(t *testing.T) {
			e := newFeedEnv(t, w.window)
			l := e.start(3)
			e.publish("s-a")
			l.waitPublished(e.last)
			// Records the serving projection never applies: the rebuild's
			// catch-up applies them, and its swap commit carries none.
			l.haltLoop()
			e.publish("s-b")
			if err := l.p.Rebuild(e.ctx, nil); err != nil {
				t.Fatal(err)
			}
			l.waitPublished(e.last)
			l.stop()
			e.check()
			e.restartsRepublishNothing(2, 3)
		})
	}
}

func TestFeeder_AProjectionRebuiltFromTheStreamRepublishesNothing(t *testing.T) {
	for _, w := range duplicateWindows {
		t.Run(w.name, func(t *testing.T) {
			e := newFeedEnv(t, w.window)
			l := e.start(3)
			for _, id := range []string{"s-a", "s-b", "s-c"} {
				e.publish(id)
			}
			e.setLive("s-a", true)
			l.waitPublished(e.last)
			l.stop()
			fed := e.last

			// The projection is lost: the next start rebuilds it from the
			// stream, in other batches, while leases change and records
			// arrive.
			if err := os.RemoveAll(e.dir); err != nil {
				t.Fatal(err)
			}
			l = e.start(7)
			e.setLive("s-b", true)
			l.waitGeneration(fed)
			e.setLive("s-a", false)
			e.publish("s-d")
			l.waitPublished(e.last)
			l.stop()
			e.check()
			e.restartsRepublishNothing(3, 5)
		})
	}
}

func TestFeeder_APartlyPublishedCommitIsCompletedWithWhatItLacks(t *testing.T) {
	for _, w := range duplicateWindows {
		t.Run(w.name, func(t *testing.T) {
			e := newFeedEnv(t, w.window)
			l := e.start(3)
			e.publish("s-a")
			l.waitPublished(e.last)
			l.stop()
			fed := e.last

			// The projector commits s-b and dies before publishing it.
			died := fmt.Errorf("killed between commit and publication: %w", ErrStop)
			l = e.start(64, WithFault(func(uint64) error { return died }))
			e.publish("s-b")
			l.waitGeneration(e.last)
			l.stop()
			// ... or rather, in the middle of publishing it: half of the
			// commit's messages are stored.
			e.publishPart(fed, e.last, 2)

			l = e.start(3)
			if !strings.Contains(l.log.String(), "completed a partly published commit") {
				t.Errorf("the start did not complete the partly published commit:\n%s", l.log)
			}
			e.publish("s-c")
			l.waitPublished(e.last)
			l.stop()
			e.check()
			e.restartsRepublishNothing(2, 3)
		})
	}
}

// publishPart stores the first 1/den of the commit of the records in
// (after, through] exactly as Publisher.Publish stores them, as when the
// projector dies in the middle of the publication.
func (e *feedEnv) publishPart(after, through uint64, den int) {
	e.t.Helper()
	p, err := projection.Open(e.ctx, e.js, e.dir, projection.WithLogger(slog.New(slog.NewTextHandler(&testenv.Buffer{}, nil))))
	if err != nil {
		e.t.Fatal(err)
	}
	defer p.Close()
	var msgs []feed.Message
	err = p.View(e.ctx, through, func(s projection.Snapshot) error {
		c, err := Rederive(s, after, through)
		if err != nil {
			return err
		}
		msgs, err = FromCommit(c, s)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(msgs) < 2*den {
		e.t.Fatalf("commit (%d, %d] has %d messages; too few to store a part", after, through, len(msgs))
	}
	for i := range msgs[:len(msgs)/den] {
		m := &msgs[i]
		data, err := feed.Encode(m)
		if err != nil {
			e.t.Fatal(err)
		}
		subj, err := feed.Subject(m.Workspace, m.Token, m.Kind)
		if err != nil {
			e.t.Fatal(err)
		}
		nm := nats.NewMsg(subj)
		nm.Data = data
		nm.Header.Set(feed.HeaderGeneration, strconv.FormatUint(m.Generation, 10))
		nm.Header.Set(feed.HeaderKind, string(m.Kind))
		nm.Header.Set(feed.HeaderCommit, fmt.Sprintf("%d/%d", i, len(msgs)))
		nm.Header.Set(feed.HeaderVersion, strconv.Itoa(feed.Version))
		if _, err := e.js.PublishMsg(e.ctx, nm, jetstream.WithMsgID(feed.MsgID(m, i))); err != nil {
			e.t.Fatal(err)
		}
	}
	cp, err := feed.NewPublisher(e.js).Checkpoint(e.ctx)
	if err != nil || !cp.Partial || cp.PartialGeneration != through || cp.Generation != after {
		e.t.Fatalf("after storing part of (%d, %d]: checkpoint %+v, %v; want that commit partial", after, through, cp, err)
	}
}

func TestFeeder_AFailedPublicationIsPublishedWithTheNextCommit(t *testing.T) {
	for _, w := range duplicateWindows {
		t.Run(w.name, func(t *testing.T) {
			e := newFeedEnv(t, w.window)
			var once sync.Once
			l := e.start(3, WithFault(func(gen uint64) error {
				err := error(nil)
				if gen > 6 {
					once.Do(func() { err = errors.New("injected publication failure") })
				}
				return err
			}))
			e.publish("s-a")
			e.setLive("s-a", true)
			e.publish("s-b")
			l.waitPublished(e.last)
			l.stop()
			e.check()
			e.restartsRepublishNothing(2, 3)
		})
	}
}
