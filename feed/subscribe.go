package feed

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/dshq/dshq"
)

// Start says where a subscription begins. Build one with AfterGeneration,
// AfterPosition, Live or Oldest.
type Start struct {
	mode     startMode
	gen      uint64
	pos      uint64
	orOldest bool
}

type startMode int

const (
	startAfterGeneration startMode = iota
	startAfterPosition
	startLive
)

// AfterGeneration starts with the first message committed after generation
// g: every message whose generation is greater than g, and every lease
// message whose generation is g (a lease-only commit keeps the generation
// of the commit before it, so a reader of generation g may or may not have
// seen it; a lease message is a state, and seeing it again is harmless).
// AfterGeneration(0) is the whole feed. If messages after g have aged out,
// the subscription fails with a *NotRetainedError unless OrOldest is set.
func AfterGeneration(g uint64) Start { return Start{mode: startAfterGeneration, gen: g} }

// AfterPosition starts exactly after the delivered message whose Position
// is p: the resume point of a subscriber that records the Position of the
// last message it handled. It fails with a *NotRetainedError if messages
// after p have aged out, unless OrOldest is set.
func AfterPosition(p uint64) Start { return Start{mode: startAfterPosition, pos: p} }

// Live starts with the messages published after the subscription is made.
func Live() Start { return Start{mode: startLive} }

// Oldest starts at the oldest retained message.
func Oldest() Start { return AfterGeneration(0).OrOldest() }

// OrOldest makes a start point that is no longer retained begin at the
// oldest retained message instead of failing with ErrNotRetained.
func (s Start) OrOldest() Start { s.orOldest = true; return s }

// String describes the start point.
func (s Start) String() string {
	switch s.mode {
	case startAfterPosition:
		return "after position " + strconv.FormatUint(s.pos, 10)
	case startLive:
		return "live"
	}
	return "after generation " + strconv.FormatUint(s.gen, 10)
}

// ErrNotRetained is matched (errors.Is) by every *NotRetainedError.
var ErrNotRetained = errors.New("feed start point is no longer retained")

// NotRetainedError says that some messages a subscription asked for have
// aged out of the feed, and where the oldest resumable point is.
type NotRetainedError struct {
	// Start is what was asked for.
	Start Start
	// OldestGeneration is the oldest generation AfterGeneration accepts
	// for this filter; meaningless when NoneRetained.
	OldestGeneration uint64
	// OldestPosition is the oldest position AfterPosition accepts.
	OldestPosition uint64
	// NoneRetained is true when no retained message matches the filter
	// while older messages have aged out: continuity cannot be shown, and
	// the subscriber resynchronises from the query API and starts Live.
	NoneRetained bool
}

// Error describes the gap.
func (e *NotRetainedError) Error() string {
	if e.NoneRetained {
		return fmt.Sprintf("feed: cannot start %s: older messages aged out and no retained message matches the filter (oldest position %d); resynchronise and start live", e.Start, e.OldestPosition)
	}
	if e.Start.mode == startAfterPosition {
		return fmt.Sprintf("feed: cannot start %s: messages after it aged out; the oldest position retained is %d", e.Start, e.OldestPosition)
	}
	return fmt.Sprintf("feed: cannot start %s: messages after it aged out; the oldest generation retained is %d", e.Start, e.OldestGeneration)
}

// Is reports whether target is ErrNotRetained.
func (e *NotRetainedError) Is(target error) bool { return target == ErrNotRetained }

// Subscription defaults.
const (
	// DefaultPullBytes bounds the bytes a subscription buffers.
	DefaultPullBytes = 16 << 20
	// probeInactive is how long a probe consumer that could not be
	// deleted lives on the server.
	probeInactive = 10 * time.Second
	// consumerInactive is how long a subscription's consumer outlives its
	// last pull (after Stop, or while the subscriber does not call Next; the
	// ordered consumer recreates it from its position when needed).
	consumerInactive = 30 * time.Second
)

// SubscribeOption configures Tail and Subscribe.
type SubscribeOption func(*subConfig)

type subConfig struct {
	stream string
}

// WithSubscribeStream sets the feed stream's name (dshq.FeedStream).
func WithSubscribeStream(name string) SubscribeOption {
	return func(c *subConfig) { c.stream = name }
}

// Subscription is a tail of the feed: Next returns the messages matching
// its filter, in feed order, first the retained ones from the start point,
// then live ones as they are published, as one continuous delivery (one
// ordered consumer). Use it from one goroutine; Stop ends it.
type Subscription struct {
	filter  Filter
	subject string
	iter    jetstream.MessagesContext
	// skipKey: while skipping, messages with key <= skipKey are dropped
	// (the rest of a commit being published while the subscription
	// started). Keys are monotonic, so skipping ends at the first kept one.
	skipKey  uint64
	skipping bool
	start    uint64
}

// ErrClosed is returned by Next after Stop.
var ErrClosed = errors.New("feed subscription is stopped")

// MalformedError is returned by Next for a feed message that does not
// decode or does not match its subject; the subscription stays usable
// (the next call continues after it), and AfterPosition(Position) resumes
// past it.
type MalformedError struct {
	// Position is the message's feed stream sequence.
	Position uint64
	// Subject is the subject it was published on.
	Subject string
	// Err says what is wrong with it.
	Err error
}

// Error names the message and the problem.
func (e *MalformedError) Error() string {
	return fmt.Sprintf("feed message %d on %s: %v", e.Position, e.Subject, e.Err)
}

// Unwrap returns the cause (which wraps ErrMalformed).
func (e *MalformedError) Unwrap() error { return e.Err }

// Tail starts a subscription of the messages matching f from the start
// point from. It needs only what a NATS permission confined to f's subject
// allows (see the package documentation): it creates consumers filtered
// on f.Subject() and pulls from them; it never reads the stream directly.
//
// Errors: an invalid filter (*dshq.Error), a start point no longer
// retained (*NotRetainedError), or the bus's error.
func Tail(ctx context.Context, js jetstream.JetStream, f Filter, from Start, opts ...SubscribeOption) (*Subscription, error) {
	cfg := subConfig{stream: dshq.FeedStream}
	for _, o := range opts {
		o(&cfg)
	}
	subject, err := f.Subject()
	if err != nil {
		return nil, err
	}
	s := &Subscription{filter: f, subject: subject}
	occ := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{subject},
		NamePrefix:        "dshfeed" + nuid.Next(),
		InactiveThreshold: consumerInactive,
	}
	if from.mode == startLive {
		occ.DeliverPolicy = jetstream.DeliverNewPolicy
	} else {
		pr := &prober{js: js, stream: cfg.stream, subject: subject, prefix: occ.NamePrefix}
		start, err := resolveStart(ctx, pr, from)
		if err != nil {
			return nil, err
		}
		s.start = start
		occ.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		occ.OptStartSeq = start
		if from.mode == startAfterGeneration {
			s.skipping, s.skipKey = true, 2*from.gen
		}
	}
	cons, err := js.OrderedConsumer(ctx, cfg.stream, occ)
	if err != nil {
		return nil, fmt.Errorf("tail feed %s: %w", subject, err)
	}
	iter, err := cons.Messages(jetstream.PullMaxBytes(DefaultPullBytes))
	if err != nil {
		return nil, fmt.Errorf("tail feed %s: %w", subject, err)
	}
	s.iter = iter
	return s, nil
}

// StartPosition returns the feed stream sequence the subscription began at
// (0 for a live subscription).
func (s *Subscription) StartPosition() uint64 { return s.start }

// Next returns the next matching message, waiting for one to be published
// if needed, until ctx ends (ctx.Err()). A message that does not have the
// feed's shape is a *MalformedError. After Stop, Next returns ErrClosed.
func (s *Subscription) Next(ctx context.Context) (Message, error) {
	for {
		raw, err := s.iter.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return Message{}, ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return Message{}, ErrClosed
			}
			return Message{}, fmt.Errorf("tail feed %s: %w", s.subject, err)
		}
		m, err := decodeDelivered(raw)
		if err != nil {
			return Message{}, err
		}
		if s.skipping {
			if key(m.Generation, m.Kind) <= s.skipKey {
				continue
			}
			s.skipping = false
		}
		if s.filter.wants(m.Kind) {
			return m, nil
		}
	}
}

// Stop ends the subscription; Next then returns ErrClosed.
func (s *Subscription) Stop() { s.iter.Stop() }

// Subscribe calls fn with every message matching f from the start point
// from, in feed order — the retained ones, then live ones — until ctx ends
// (it returns ctx.Err()), fn returns an error (it returns that error), or
// the subscription fails (see Tail and Subscription.Next; a malformed
// message ends it with a *MalformedError).
func Subscribe(ctx context.Context, js jetstream.JetStream, f Filter, from Start, fn func(Message) error, opts ...SubscribeOption) error {
	sub, err := Tail(ctx, js, f, from, opts...)
	if err != nil {
		return err
	}
	defer sub.Stop()
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}

// decodeDelivered decodes a delivered message and checks it against its
// subject and headers.
func decodeDelivered(raw jetstream.Msg) (Message, error) {
	md, err := raw.Metadata()
	if err != nil {
		return Message{}, fmt.Errorf("feed message metadata: %w", err)
	}
	bad := func(err error) (Message, error) {
		return Message{}, &MalformedError{Position: md.Sequence.Stream, Subject: raw.Subject(), Err: err}
	}
	m, err := Decode(raw.Data())
	if err != nil {
		return bad(err)
	}
	subj, _ := Subject(m.Workspace, m.Token, m.Kind)
	if subj != raw.Subject() {
		return bad(malformed("message for %s was published on %s", subj, raw.Subject()))
	}
	if g := raw.Headers().Get(HeaderGeneration); g != strconv.FormatUint(m.Generation, 10) {
		return bad(malformed("%s header %q is not the message's generation %d", HeaderGeneration, g, m.Generation))
	}
	m.Position, m.Pending = md.Sequence.Stream, md.NumPending
	return *m, nil
}

// key orders feed messages: twice the generation, plus one for a lease
// message (lease-only commits keep the generation of the commit before
// them and follow it). Keys never decrease along the feed.
func key(gen uint64, k Kind) uint64 {
	if k == KindLease {
		return 2*gen + 1
	}
	return 2 * gen
}

// prober finds messages with throwaway consumers filtered on the
// subscription's subject, so a subscriber confined to that subject by NATS
// permissions can run it: probe(n) is the first matching message at stream
// sequence n or later.
type prober struct {
	js      jetstream.JetStream
	stream  string
	subject string
	prefix  string
	n       int
}

// found is a probed message: its stream sequence and ordering key.
type found struct {
	seq uint64
	key uint64
	ok  bool
}

// probe creates a headers-only consumer with the given deliver policy (and
// start sequence for DeliverByStartSequencePolicy) and fetches at most one
// message without waiting. floor is the stream sequence before the
// consumer's first (for DeliverAll: the stream's first sequence - 1).
func (p *prober) probe(ctx context.Context, policy jetstream.DeliverPolicy, seq uint64) (f found, floor uint64, err error) {
	p.n++
	cfg := jetstream.ConsumerConfig{
		Name:              fmt.Sprintf("%s_p%d", p.prefix, p.n),
		DeliverPolicy:     policy,
		OptStartSeq:       seq,
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     p.subject,
		HeadersOnly:       true,
		MemoryStorage:     true,
		InactiveThreshold: probeInactive,
		Replicas:          1,
	}
	cons, err := p.js.CreateConsumer(ctx, p.stream, cfg)
	if err != nil {
		return found{}, 0, fmt.Errorf("tail feed %s: probe: %w", p.subject, err)
	}
	floor = cons.CachedInfo().AckFloor.Stream
	defer p.forget(cfg.Name)
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		return found{}, 0, fmt.Errorf("tail feed %s: probe: %w", p.subject, err)
	}
	for raw := range batch.Messages() {
		md, err := raw.Metadata()
		if err != nil {
			return found{}, 0, fmt.Errorf("tail feed %s: probe: %w", p.subject, err)
		}
		f = found{seq: md.Sequence.Stream, key: math.MaxUint64, ok: true}
		// A message without a readable generation (not published by a
		// Publisher) sorts after everything: the subscription may then
		// start at it, report it (*MalformedError) and skip by key what
		// follows it up to the start point.
		if gen, err := strconv.ParseUint(raw.Headers().Get(HeaderGeneration), 10, 64); err == nil && gen < math.MaxUint64/2 {
			f.key = key(gen, Kind(raw.Headers().Get(HeaderKind)))
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return found{}, 0, fmt.Errorf("tail feed %s: probe: %w", p.subject, err)
	}
	return f, floor, nil
}

// forget deletes a probe consumer without waiting for the answer: the
// stream's consumer limit (1000 by default) is shared by every subscriber,
// and a subscriber without the delete permission must not wait for a
// refusal NATS never answers (its probes then expire after probeInactive).
func (p *prober) forget(name string) {
	_ = p.js.Conn().Publish(apiPrefix(p.js)+"CONSUMER.DELETE."+p.stream+"."+name, nil)
}

// apiPrefix returns the JetStream API subject prefix js uses.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return "$JS.API."
}

func (p *prober) at(ctx context.Context, seq uint64) (found, error) {
	f, _, err := p.probe(ctx, jetstream.DeliverByStartSequencePolicy, seq)
	return f, err
}

// resolveStart returns the stream sequence a subscription from `from`
// begins at, after checking that nothing it asks for has aged out.
func resolveStart(ctx context.Context, p *prober, from Start) (uint64, error) {
	first, floor, err := p.probe(ctx, jetstream.DeliverAllPolicy, 0)
	if err != nil {
		return 0, err
	}
	firstSeq := floor + 1 // the stream's first sequence; 1 = nothing removed yet
	if from.mode == startAfterPosition {
		if from.pos+1 < firstSeq {
			if from.orOldest {
				return firstSeq, nil
			}
			e := &NotRetainedError{Start: from, OldestPosition: firstSeq - 1, NoneRetained: !first.ok}
			if first.ok {
				e.OldestGeneration = first.key>>1 + first.key&1
			}
			return 0, e
		}
		return from.pos + 1, nil
	}
	target := 2 * from.gen
	if firstSeq > 1 {
		// Messages have aged out. Continuity is shown only if the first
		// retained match is no later than the start point: every removed
		// match came before it.
		switch {
		case !first.ok && !from.orOldest:
			return 0, &NotRetainedError{Start: from, OldestPosition: firstSeq - 1, NoneRetained: true}
		case first.ok && first.key > target && !from.orOldest:
			return 0, &NotRetainedError{Start: from, OldestGeneration: first.key>>1 + first.key&1, OldestPosition: firstSeq - 1}
		}
	}
	if !first.ok {
		return firstSeq, nil
	}
	if first.key > target {
		return first.seq, nil
	}
	last, _, err := p.probe(ctx, jetstream.DeliverLastPolicy, 0)
	if err != nil {
		return 0, err
	}
	if !last.ok || last.key <= target {
		return max(last.seq, first.seq) + 1, nil
	}
	return searchFirstAfter(ctx, p, first.seq+1, last.seq, target)
}

// searchFirstAfter returns the sequence of the first matching message
// whose key is greater than target, given that the matches before lo have
// keys <= target and the match at hi has a key > target. probe(n) (the
// first match at n or later) is monotonic in n, so this is a binary search
// over stream sequences that jumps past runs of non-matching messages.
func searchFirstAfter(ctx context.Context, p *prober, lo, hi, target uint64) (uint64, error) {
	cand := hi
	for lo < hi {
		mid := lo + (hi-lo)/2
		f, err := p.at(ctx, mid)
		if err != nil {
			return 0, err
		}
		if !f.ok { // everything up to hi aged out meanwhile
			return cand, nil
		}
		if f.key > target {
			hi, cand = mid, f.seq
		} else {
			lo = f.seq + 1
		}
	}
	return cand, nil
}
