package feed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/dshq/dshq"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultPublishTimeout bounds how long Publish retries a commit whose
// publication fails transiently (when ctx has no earlier deadline).
const DefaultPublishTimeout = 30 * time.Second

// Publisher publishes the projector's commits to the feed stream. It is
// safe for concurrent use; Publish calls are serialized so that one
// commit's messages are contiguous in the stream.
type Publisher struct {
	js      jetstream.JetStream
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

// WithPublishStream sets the feed stream's name (DefaultStream).
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
	p := &Publisher{js: js, stream: DefaultStream, timeout: DefaultPublishTimeout}
	for _, o := range opts {
		o(p)
	}
	return p
}

// ErrGenerationRegressed is wrapped by Publish's refusal of a commit whose
// generation is below one this Publisher already published: generations
// must not decrease along the feed, or resume by generation would skip.
var ErrGenerationRegressed = errors.New("feed generation regressed")

// Publish publishes one commit's messages, in order, as produced by
// FromCommit: all carry the same generation. Each message gets the headers
// Dsh-Generation, Dsh-Kind, Dsh-Commit (<index>/<count>) and
// Dsh-Feed-Version, and — unless the commit holds only lease messages — the
// deterministic Nats-Msg-Id "<generation>:<index>", so the same commit
// published again within the stream's duplicate window is stored once.
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
// If Publish fails, the commit may be partly published: the caller must
// publish it again (same messages) before any later commit.
func (p *Publisher) Publish(ctx context.Context, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	out, gen, err := p.prepare(msgs)
	if err != nil {
		return err
	}
	return p.publishPrepared(ctx, out, gen, p.publishRetrying)
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
			out[i].id = strconv.FormatUint(gen, 10) + ":" + strconv.Itoa(i)
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

func (p *Publisher) publishRetrying(ctx context.Context, out []outgoing) error {
	if _, ok := ctx.Deadline(); !ok && p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 0 // ctx bounds the retries
	var last error
	err := backoff.Retry(func() error {
		last = p.publishOnce(ctx, out)
		if last != nil && ctx.Err() != nil {
			return backoff.Permanent(last)
		}
		return last
	}, backoff.WithContext(b, ctx))
	if err == nil {
		return nil
	}
	if last != nil {
		return last
	}
	return err
}

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
			f, err := p.js.PublishMsgAsync(o.msg, opts...)
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

// ErrNoCheckpoint is returned by LastPublishedGeneration when the feed
// stream holds no message (it is new, or everything aged out).
var ErrNoCheckpoint = errors.New("feed stream holds no message")

// LastPublishedGeneration returns the generation of the last commit
// completely published to the feed, read from the stream's last message
// (and, when that message ends a partly published commit, from the message
// before that commit). It needs stream read access ($JS.API.STREAM.INFO and
// direct get on the feed stream).
//
// The projector's rule on start: let P be this generation and C its own
// checkpoint. If P < C, re-derive the commits after P up to C, with the
// same batching as before the restart, and Publish them before anything
// else (their message ids make the already-stored part a duplicate). With
// ErrNoCheckpoint, re-publish the last commit only. Lease-only commits are
// not re-derived: the projector publishes the current live set instead.
func (p *Publisher) LastPublishedGeneration(ctx context.Context) (uint64, error) {
	st, err := p.js.Stream(ctx, p.stream)
	if err != nil {
		return 0, fmt.Errorf("read feed checkpoint: %w", err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return 0, ErrNoCheckpoint
	}
	gen, index, err := readPlace(ctx, st, state.LastSeq)
	if err != nil {
		return 0, err
	}
	if index.last {
		return gen, nil
	}
	prev := state.LastSeq - uint64(index.index) - 1
	if prev == 0 {
		return 0, nil // the feed began with this partly published commit
	}
	if prev < state.FirstSeq {
		return 0, fmt.Errorf("read feed checkpoint: the commit before the partly published generation %d aged out of the feed", gen)
	}
	gen, _, err = readPlace(ctx, st, prev)
	return gen, err
}

type commitPlace struct {
	index int
	last  bool
}

// readPlace reads a stored message's generation and place in its commit.
func readPlace(ctx context.Context, st jetstream.Stream, seq uint64) (uint64, commitPlace, error) {
	raw, err := st.GetMsg(ctx, seq)
	if err != nil {
		return 0, commitPlace{}, fmt.Errorf("read feed message %d: %w", seq, err)
	}
	gen, err := strconv.ParseUint(raw.Header.Get(HeaderGeneration), 10, 64)
	if err != nil {
		return 0, commitPlace{}, dshq.Errorf(dshq.CodeInvalidRequest, "feed message %d: bad %s header %q", seq, HeaderGeneration, raw.Header.Get(HeaderGeneration))
	}
	i, n, err := parseCommitHeader(raw.Header.Get(HeaderCommit))
	if err != nil {
		return 0, commitPlace{}, dshq.Errorf(dshq.CodeInvalidRequest, "feed message %d: %v", seq, err)
	}
	return gen, commitPlace{index: i, last: i == n-1}, nil
}
