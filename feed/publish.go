package feed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/failover"
)

// DefaultPublishTimeout bounds how long Publish retries a commit whose
// publication fails transiently (when ctx has no earlier deadline).
const DefaultPublishTimeout = 30 * time.Second

// Publisher publishes the projector's commits to the feed stream. It is
// safe for concurrent use; Publish calls are serialized so that one
// commit's messages are contiguous in the stream.
type Publisher struct {
	js jetstream.JetStream
	// async publishes the messages: its acknowledgements time out after
	// publishAttemptTimeout, so that those a failover lost do not stay
	// pending (past 4000 of them an asynchronous publish stalls for good).
	async   jetstream.JetStream
	stream  string
	timeout time.Duration

	// mu serializes Publish and guards last.
	mu sync.Mutex
	// last is the generation of the last commit this Publisher published
	// (valid when haveLast).
	last     uint64
	haveLast bool
}

// PublisherOption configures NewPublisher.
type PublisherOption func(*Publisher)

// WithPublishStream sets the feed stream's name (dshq.FeedStream).
func WithPublishStream(name string) PublisherOption {
	return func(p *Publisher) { p.stream = name }
}

// WithPublishTimeout sets how long Publish retries (DefaultPublishTimeout).
func WithPublishTimeout(d time.Duration) PublisherOption {
	return func(p *Publisher) { p.timeout = d }
}

// NewPublisher returns a Publisher on js. The stream must exist
// (EnsureStream).
func NewPublisher(js jetstream.JetStream, opts ...PublisherOption) *Publisher {
	p := &Publisher{js: js, async: js, stream: dshq.FeedStream, timeout: DefaultPublishTimeout}
	for _, o := range opts {
		o(p)
	}
	if async, err := jetstream.New(js.Conn(), jetstream.WithPublishAsyncTimeout(publishAttemptTimeout)); err == nil {
		p.async = async
	}
	return p
}

// MsgID returns the Nats-Msg-Id of message m, the index-th of its commit:
// "<generation>:<kind>:<token>" followed by what identifies the change
// within the session — the event seq (event), the seq and new surface
// (surface), the title's event seq (title), the index in the commit (a
// lease inside a data commit) — or "<generation>:quarantine:<stream seq>".
// It depends on the change, not on its place in the commit, so a commit
// re-derived after a crash in another order still matches what was
// already stored.
func MsgID(m *Message, index int) string {
	g := strconv.FormatUint(m.Generation, 10) + ":" + string(m.Kind) + ":"
	switch m.Kind {
	case KindEvent:
		return g + m.Token + ":" + strconv.FormatInt(m.Event.Seq, 10)
	case KindSurface:
		return g + m.Token + ":" + strconv.FormatInt(m.Surface.Seq, 10) + ":" + m.Surface.To
	case KindTitle:
		return g + m.Token + ":" + strconv.FormatInt(m.Title.EventSeq, 10)
	case KindLease:
		return g + m.Token + ":" + strconv.Itoa(index)
	case KindQuarantine:
		return g + strconv.FormatUint(m.Quarantine.StreamSeq, 10)
	}
	return g + m.Token // session
}

// ErrGenerationRegressed is wrapped by Publish's refusal of a commit whose
// generation is below one this Publisher already published: generations
// must not decrease along the feed, or resume by generation would skip.
var ErrGenerationRegressed = errors.New("feed generation regressed")

// Publish publishes one commit's messages, in order, as produced by
// FromCommit: all carry the same generation. Each message gets the headers
// Dsh-Generation, Dsh-Kind, Dsh-Commit (<index>/<count>) and
// Dsh-Feed-Version, and — unless the commit holds only lease messages — the
// deterministic Nats-Msg-Id of MsgID, so the same commit published again
// within the stream's duplicate window is stored once.
// Lease-only commits (which keep the generation of the commit before them)
// carry no message id: a lease message is a state, and seeing it twice is
// harmless.
//
// Transient failures are retried with backoff until ctx ends or the
// publish timeout passes. A message that is malformed or larger than the
// connection's maximum payload is refused before anything is published
// (*dshq.Error wrapping ErrMalformed); a generation below the last one
// published wraps ErrGenerationRegressed.
//
// A retry after a failed attempt publishes only the messages the stream
// does not hold yet (see Resume), so it stores nothing twice whatever the
// duplicate window. If Publish fails, the commit may be partly published:
// the caller must Resume it (same changes, in any order) before any later
// commit.
func (p *Publisher) Publish(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	out, gen, err := p.prepare(msgs)
	if err != nil {
		return err
	}
	return p.publishPrepared(ctx, out, gen, func(ctx context.Context, out []outgoing) error {
		return p.publishRetrying(ctx, out, p.publishOnce)
	})
}

// publishPrepared publishes a prepared commit with send (one attempt or
// retrying), serialized with every other publication.
func (p *Publisher) publishPrepared(ctx context.Context, out []outgoing, gen uint64, send func(context.Context, []outgoing) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.haveLast && gen < p.last {
		return fmt.Errorf("publish feed commit at generation %d after generation %d: %w", gen, p.last, ErrGenerationRegressed)
	}
	if err := send(ctx, out); err != nil {
		return fmt.Errorf("publish feed commit at generation %d: %w", gen, err)
	}
	p.last, p.haveLast = gen, true
	return nil
}

type outgoing struct {
	msg *nats.Msg
	id  string
}

// prepare validates and encodes a commit.
func (p *Publisher) prepare(msgs []Message) ([]outgoing, uint64, error) {
	gen := msgs[0].Generation
	leaseOnly := true
	for i := range msgs {
		if msgs[i].Generation != gen {
			return nil, 0, malformed("commit mixes generations %d and %d", gen, msgs[i].Generation)
		}
		if msgs[i].Kind != KindLease {
			leaseOnly = false
		}
	}
	max := int(p.js.Conn().MaxPayload())
	out := make([]outgoing, len(msgs))
	ids := make(map[string]int, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		data, err := Encode(m)
		if err != nil {
			return nil, 0, err
		}
		subj, err := Subject(m.Workspace, m.Token, m.Kind)
		if err != nil {
			return nil, 0, err
		}
		nm := nats.NewMsg(subj)
		nm.Data = data
		nm.Header.Set(HeaderGeneration, strconv.FormatUint(gen, 10))
		nm.Header.Set(HeaderKind, string(m.Kind))
		nm.Header.Set(HeaderCommit, commitHeader(i, len(msgs)))
		nm.Header.Set(HeaderVersion, strconv.Itoa(Version))
		if !leaseOnly {
			out[i].id = MsgID(m, i)
			if j, dup := ids[out[i].id]; dup {
				return nil, 0, malformed("messages %d and %d of the commit are the same change (%s)", j, i, out[i].id)
			}
			ids[out[i].id] = i
		}
		if size := len(data) + headerSize(nm) + len(out[i].id) + 16; max > 0 && size > max {
			return nil, 0, malformed("message %d of the commit (%s) is %d bytes, more than the maximum payload %d", i, m.Kind, size, max)
		}
		out[i].msg = nm
	}
	return out, gen, nil
}

func headerSize(m *nats.Msg) int {
	n := 12 // NATS/1.0 line and the blank line
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// publishRetrying publishes out with first, then retries with publishRest
// (a failed attempt may have stored part of it) until ctx ends or the
// publish timeout passes.
func (p *Publisher) publishRetrying(ctx context.Context, out []outgoing, first func(context.Context, []outgoing) error) error {
	if _, ok := ctx.Deadline(); !ok && p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0 // ctx bounds the retries
	b.Reset()
	// An attempt whose acknowledgements can no longer come (the connection
	// dropped, the feed stream elected a new leader) is abandoned and
	// retried at once, and a retry waiting for its turn wakes up then: a
	// failover holds the projector (which waits for the previous commit's
	// publication) only as long as the cluster takes to recover.
	watch := failover.For(p.js.Conn(), failover.StreamLeaderElected(p.stream))
	send := first
	for {
		changed := watch.Changed()
		actx, release := watch.Attempt(ctx, publishAttemptTimeout)
		err := send(actx, out)
		cut := failover.Interrupted(actx)
		release()
		send = p.publishRest
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return err
		case cut:
			continue
		}
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-t.C:
		case <-changed:
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// Resume publishes the messages of one commit (as for Publish) that the
// feed does not hold yet: a message whose id is among those of its
// generation at the feed's tail — the part of the commit stored before a
// crash or a failed attempt, in whatever order it was derived — is left
// out; the rest is published as Publish does, each message keeping its
// place "<index>/<count>" in the whole commit, so that Checkpoint then
// counts the commit complete. It reads the tail (one direct get per stored
// message of the commit), so it is for the first publication after a
// start or a failure, not for every commit. Errors are Publish's.
func (p *Publisher) Resume(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	out, gen, err := p.prepare(msgs)
	if err != nil {
		return err
	}
	return p.publishPrepared(ctx, out, gen, func(ctx context.Context, out []outgoing) error {
		return p.publishRetrying(ctx, out, p.publishRest)
	})
}

// publishRest publishes the messages of out whose ids the feed's tail does
// not hold (one attempt).
func (p *Publisher) publishRest(ctx context.Context, out []outgoing) error {
	rest, err := p.unstored(ctx, out)
	if err != nil {
		return err
	}
	return p.publishOnce(ctx, rest)
}

// unstored returns the messages of out (one commit) that are not among
// the messages of its generation at the feed's tail. Lease-only commits
// carry no ids: all of them are returned.
func (p *Publisher) unstored(ctx context.Context, out []outgoing) ([]outgoing, error) {
	if len(out) == 0 || out[0].id == "" {
		return out, nil
	}
	st, err := p.js.Stream(ctx, p.stream)
	if err != nil {
		return nil, fmt.Errorf("read feed tail: %w", err)
	}
	state := st.CachedInfo().State
	prefix := out[0].id[:strings.IndexByte(out[0].id, ':')+1]
	r := &tailReader{ctx: ctx, st: st, first: state.FirstSeq}
	stored := map[string]bool{}
	// At most the whole commit, and the lease-only messages that may follow
	// a data commit, can be at the tail.
	for seq, budget := state.LastSeq, 2*len(out)+64; seq >= state.FirstSeq && seq > 0 && budget > 0; seq, budget = seq-1, budget-1 {
		pl, err := r.read(seq)
		if err != nil {
			return nil, err
		}
		if pl.id == "" {
			continue // a lease-only commit
		}
		if !strings.HasPrefix(pl.id, prefix) {
			break
		}
		stored[pl.id] = true
	}
	if len(stored) == 0 {
		return out, nil
	}
	rest := make([]outgoing, 0, len(out)-min(len(stored), len(out)))
	for _, o := range out {
		if !stored[o.id] {
			rest = append(rest, o)
		}
	}
	return rest, nil
}

// publishAttemptTimeout bounds one attempt at a commit's publication.
const publishAttemptTimeout = 10 * time.Second

// publishWindow bounds the acknowledgements Publish waits for at once
// (below the client's async pending limit).
const publishWindow = 256

// publishOnce pipelines the commit's messages on one connection (so they
// are stored in order), publishWindow at a time, and waits for every
// acknowledgement.
func (p *Publisher) publishOnce(ctx context.Context, out []outgoing) error {
	for start := 0; start < len(out); start += publishWindow {
		end := min(start+publishWindow, len(out))
		futures := make([]jetstream.PubAckFuture, 0, end-start)
		for _, o := range out[start:end] {
			opts := []jetstream.PublishOpt{jetstream.WithExpectStream(p.stream)}
			if o.id != "" {
				opts = append(opts, jetstream.WithMsgID(o.id))
			}
			f, err := p.async.PublishMsgAsync(o.msg, opts...)
			if err != nil {
				return err
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// ErrNoCheckpoint is returned by Checkpoint and LastPublishedGeneration
// when the feed stream holds no message (it is new, or everything aged
// out: then the error also wraps ErrAgedOut).
var ErrNoCheckpoint = errors.New("feed stream holds no message")

// ErrAgedOut is wrapped by Checkpoint's ErrNoCheckpoint when the stream
// held messages once and all of them aged out: the feed's last generation
// is unknown. Checkpoint also returns it (with the partial commit's
// fields set) when the oldest retained messages are a partly published
// commit: where that commit began is unknown.
var ErrAgedOut = errors.New("every feed message aged out")

// Checkpoint is where the feed's publication stands.
type Checkpoint struct {
	// Generation is the generation of the last commit completely
	// published.
	Generation uint64
	// Partial is true when a later commit was published only in part (the
	// publisher stopped in its middle); PartialGeneration is its
	// generation and PartialPublished how many of its messages are stored.
	Partial           bool
	PartialGeneration uint64
	PartialPublished  int
}

// Checkpoint reads where the feed's publication stands from the stream's
// last message (and, when that message ends a partly published commit,
// from the message before that commit). It needs stream read access
// ($JS.API.STREAM.INFO and direct get on the feed stream).
//
// The projector's rule on start, with its own checkpoint C: if the feed
// has a partial commit, re-derive the changes of the records after
// Generation up to PartialGeneration as one commit at PartialGeneration
// and publish it (its message ids are derived from the changes, so the
// part already stored is not stored again, whatever the order); then, if
// the feed is behind C, re-derive the changes after that up to C as one
// commit at C and publish it; only then publish new commits. With
// ErrNoCheckpoint (an empty feed) publish the commit at C. Lease changes
// are not re-derived: the projector publishes the current live set.
func (p *Publisher) Checkpoint(ctx context.Context) (Checkpoint, error) {
	st, err := p.js.Stream(ctx, p.stream)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read feed checkpoint: %w", err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		if state.LastSeq > 0 {
			return Checkpoint{}, fmt.Errorf("%w: %w", ErrNoCheckpoint, ErrAgedOut)
		}
		return Checkpoint{}, ErrNoCheckpoint
	}
	r := &tailReader{ctx: ctx, st: st, first: state.FirstSeq}
	// The last data commit's messages (lease-only commits, which carry no
	// message id, are skipped) are contiguous at the tail, whatever order a
	// re-publication stored them in: count them.
	seq, last, err := r.dataBefore(state.LastSeq + 1)
	if err != nil || seq == 0 {
		return Checkpoint{}, err // seq 0: only lease-only commits retained
	}
	prefix := strconv.FormatUint(last.gen, 10) + ":"
	stored := 0
	for seq >= state.FirstSeq && seq > 0 {
		pl, err := r.read(seq)
		if err != nil {
			return Checkpoint{}, err
		}
		if !strings.HasPrefix(pl.id, prefix) {
			break
		}
		stored++
		seq--
	}
	if stored >= last.count {
		return Checkpoint{Generation: last.gen}, nil
	}
	cp := Checkpoint{Partial: true, PartialGeneration: last.gen, PartialPublished: stored}
	if seq == 0 {
		return cp, nil // the feed began with this partly published commit
	}
	if seq < state.FirstSeq {
		return cp, fmt.Errorf("read feed checkpoint: the commit before the partly published generation %d: %w", last.gen, ErrAgedOut)
	}
	_, prev, err := r.dataBefore(seq + 1)
	cp.Generation = prev.gen
	return cp, err
}

// LastPublishedGeneration returns Checkpoint's Generation: the generation
// of the last commit completely published to the feed.
func (p *Publisher) LastPublishedGeneration(ctx context.Context) (uint64, error) {
	cp, err := p.Checkpoint(ctx)
	return cp.Generation, err
}

// place is what the headers of a stored feed message say.
type place struct {
	gen   uint64
	count int    // messages in its commit
	id    string // Nats-Msg-Id, "" in a lease-only commit
}

// tailReader reads stored feed messages' headers.
type tailReader struct {
	ctx   context.Context
	st    jetstream.Stream
	first uint64
}

// dataBefore returns the last message before seq that belongs to a data
// commit (one with message ids), or seq 0 when there is none.
func (r *tailReader) dataBefore(seq uint64) (uint64, place, error) {
	for s := seq - 1; s >= r.first && s > 0; s-- {
		pl, err := r.read(s)
		if err != nil {
			return 0, place{}, err
		}
		if pl.id != "" {
			return s, pl, nil
		}
	}
	return 0, place{}, nil
}

// read reads a stored message's generation, commit size and message id.
func (r *tailReader) read(seq uint64) (place, error) {
	raw, err := r.st.GetMsg(r.ctx, seq)
	if err != nil {
		return place{}, fmt.Errorf("read feed message %d: %w", seq, err)
	}
	gen, err := strconv.ParseUint(raw.Header.Get(HeaderGeneration), 10, 64)
	if err != nil {
		return place{}, dshq.Errorf(dshq.CodeInvalidRequest, "feed message %d: bad %s header %q", seq, HeaderGeneration, raw.Header.Get(HeaderGeneration))
	}
	_, n, err := parseCommitHeader(raw.Header.Get(HeaderCommit))
	if err != nil {
		return place{}, dshq.Errorf(dshq.CodeInvalidRequest, "feed message %d: %v", seq, err)
	}
	return place{gen: gen, count: n, id: raw.Header.Get(nats.MsgIdHdr)}, nil
}
