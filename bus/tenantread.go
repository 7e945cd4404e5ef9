package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
)

// A tenant's Store reads only its own log subjects, in the two forms its
// permissions allow (docs/protocol.md#2-the-session-log-stream):
//
//   - the subject form of direct get, $JS.API.DIRECT.GET.<stream>.<subject>,
//     for the last record of a subject (the server serves nothing else in
//     that form, and refuses the body forms that name any subject);
//   - push consumers created with the filtered create subject,
//     $JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>, whose filter the
//     server checks against the body, delivering to the tenant's own inbox,
//     for everything else: a subject's first record, its record count
//     (num_pending at creation), a range of records, the last record of
//     each of its subjects (List).
//
// Consumers are ephemeral (random names, memory storage, one replica) and
// acknowledged all-at-once every half window, so that at most
// consumerWindow records are in flight; a consumer nobody listens to is
// removed by the server after consumerIdle. The tenant cannot delete
// consumers (that permission would name any consumer of the stream), so it
// never tries.

// consumerWindow is the most unacknowledged deliveries of one read.
const consumerWindow = 256

// consumerIdle is how long the server keeps a read's consumer once its
// reader stopped listening.
const consumerIdle = 5 * time.Second

// tenantReader reads a tenant's log subjects (see above).
type tenantReader struct{ s *Store }

func (r tenantReader) stream() string { return r.s.opts.stream.Name }

// leaderReads is false: any replica answers a tenant's reads.
func (r tenantReader) leaderReads() bool { return false }

// last returns the last record of subject through the subject form of
// direct get.
func (r tenantReader) last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return directGetLast(ctx, r.s.nc, r.stream(), subject)
}

// directGetLast asks $JS.API.DIRECT.GET.<stream>.<subject> (no body) for the
// last record of subject; jetstream.ErrMsgNotFound when it holds none.
func directGetLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+stream+"."+subject, nil)
	if err != nil {
		return nil, err
	}
	switch status := m.Header.Get("Status"); status {
	case "":
	case "404":
		return nil, jetstream.ErrMsgNotFound
	case "408", "503":
		return nil, fmt.Errorf("direct get %s: status %s %s: %w", subject, status, m.Header.Get("Description"), nats.ErrTimeout)
	default:
		return nil, fmt.Errorf("direct get %s: status %s %s", subject, status, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("direct get %s: bad %s %q", subject, jetstream.SequenceHeader, m.Header.Get(jetstream.SequenceHeader))
	}
	at, err := time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("direct get %s: bad %s %q", subject, jetstream.TimeStampHeaer, m.Header.Get(jetstream.TimeStampHeaer))
	}
	return &jetstream.RawStreamMsg{Subject: m.Header.Get(jetstream.SubjectHeader), Sequence: seq, Header: m.Header, Data: m.Data, Time: at}, nil
}

// first returns the first record of subject at or after seq: the first
// delivery of a consumer starting there.
func (r tenantReader) first(ctx context.Context, subject string, seq uint64) (*jetstream.RawStreamMsg, error) {
	m, _, err := r.firstPending(ctx, subject, seq)
	return m, err
}

// header returns the first record of subject and its record count: the
// consumer's pending count from the subject's start.
func (r tenantReader) header(ctx context.Context, subject string) (*jetstream.RawStreamMsg, *uint64, error) {
	m, pending, err := r.firstPending(ctx, subject, 1)
	if err != nil {
		return nil, nil, err
	}
	return m, &pending, nil
}

// firstPending returns the first record of subject at or after seq and how
// many records it holds from seq on.
func (r tenantReader) firstPending(ctx context.Context, subject string, seq uint64) (*jetstream.RawStreamMsg, uint64, error) {
	var out *jetstream.RawStreamMsg
	pending, err := r.consume(ctx, consumerRead{filter: subject, start: seq, window: 1}, func(m *nats.Msg, meta *nats.MsgMetadata) (bool, error) {
		out = &jetstream.RawStreamMsg{Subject: m.Subject, Sequence: meta.Sequence.Stream, Header: m.Header, Data: m.Data, Time: meta.Timestamp}
		return false, nil
	})
	if err != nil {
		return nil, 0, err
	}
	if out == nil {
		return nil, 0, jetstream.ErrMsgNotFound
	}
	return out, pending, nil
}

// count returns how many records subject holds: the pending count of a
// consumer of all of them, which delivers nothing the reader waits for.
func (r tenantReader) count(ctx context.Context, subject string) (uint64, error) {
	return r.consume(ctx, consumerRead{filter: subject, start: 1, window: 1, headersOnly: true, countOnly: true}, nil)
}

// subjects lists the tenant's log subjects: a consumer of the last record of
// each, then the count of each.
func (r tenantReader) subjects(ctx context.Context) (map[string]uint64, error) {
	prefix := dshq.LogSubjectPrefix + r.s.opts.tenant + "."
	out := map[string]uint64{}
	_, err := r.consume(ctx, consumerRead{filter: prefix + "*", lastPerSubject: true, window: consumerWindow, headersOnly: true},
		func(m *nats.Msg, _ *nats.MsgMetadata) (bool, error) {
			out[m.Subject] = 0
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	for subject := range out {
		n, err := r.count(ctx, subject)
		if err != nil {
			return nil, err
		}
		out[subject] = n
	}
	return out, nil
}

// batch delivers subject's records from start through upTo with one
// consumer. It never asks for more: the consumer delivers the whole range.
func (r tenantReader) batch(ctx context.Context, subject string, start, upTo uint64, fn func(r Record) (bool, error)) (int, bool, error) {
	n := 0
	_, err := r.consume(ctx, consumerRead{filter: subject, start: start, window: consumerWindow}, func(m *nats.Msg, meta *nats.MsgMetadata) (bool, error) {
		seq := meta.Sequence.Stream
		if seq > upTo {
			return false, nil
		}
		n++
		more, err := fn(Record{Data: m.Data, Seq: seq, MsgID: m.Header.Get(hdrMsgID)})
		return more && seq < upTo, err
	})
	return n, false, err
}

// consumerRead says what one consumer reads.
type consumerRead struct {
	filter string
	// start is the first stream sequence (lastPerSubject: unused).
	start uint64
	// lastPerSubject delivers the last record of each subject of filter.
	lastPerSubject bool
	// window is the consumer's max_ack_pending.
	window int
	// headersOnly delivers headers without data.
	headersOnly bool
	// countOnly returns the pending count without waiting for deliveries.
	countOnly bool
}

// consumerCreate is the body of $JS.API.CONSUMER.CREATE.
type consumerCreate struct {
	Stream string                   `json:"stream_name"`
	Config jetstream.ConsumerConfig `json:"config"`
	Action string                   `json:"action"`
}

// consumerCreated is the part of its reply a read needs.
type consumerCreated struct {
	Error      *jetstream.APIError `json:"error,omitempty"`
	NumPending uint64              `json:"num_pending"`
}

// consume creates a push consumer for c on a fresh inbox of the Store's
// connection and calls fn for every delivery, in stream order, until fn
// returns false, every record pending at creation was delivered, or an
// error. It returns the number of records pending at creation. Each
// delivery is awaited for at most the Store's attempt timeout; an idle
// consumer times out as nats.ErrTimeout (transient). A delivery that is not
// on the filter's subjects fails the read: the server never sends one, and a
// foreign record must never pass for the tenant's own.
func (r tenantReader) consume(ctx context.Context, c consumerRead, fn func(*nats.Msg, *nats.MsgMetadata) (bool, error)) (uint64, error) {
	nc := r.s.nc
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	name, err := consumerName()
	if err != nil {
		return 0, err
	}
	cfg := jetstream.ConsumerConfig{
		Name: name, FilterSubject: c.filter, DeliverSubject: inbox,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: c.start,
		AckPolicy: jetstream.AckAllPolicy, AckWait: 30 * time.Second, MaxAckPending: c.window,
		HeadersOnly: c.headersOnly, InactiveThreshold: consumerIdle, Replicas: 1, MemoryStorage: true,
	}
	if c.lastPerSubject {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverLastPerSubjectPolicy, 0
	}
	body, err := json.Marshal(consumerCreate{Stream: r.stream(), Config: cfg, Action: "create"})
	if err != nil {
		return 0, err
	}
	actx, cancel := context.WithTimeout(ctx, r.s.opts.attempt)
	reply, err := nc.RequestWithContext(actx, "$JS.API.CONSUMER.CREATE."+r.stream()+"."+name+"."+c.filter, body)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("read %s: create consumer: %w", c.filter, err)
	}
	var created consumerCreated
	if err := json.Unmarshal(reply.Data, &created); err != nil {
		return 0, fmt.Errorf("read %s: create consumer: bad reply %q: %w", c.filter, reply.Data, err)
	}
	if created.Error != nil {
		return 0, fmt.Errorf("read %s: create consumer: %w", c.filter, created.Error)
	}
	pending := created.NumPending
	if c.countOnly || pending == 0 {
		return pending, nil
	}
	var delivered, unacked uint64
	var lastSeq uint64
	for delivered < pending {
		mctx, cancel := context.WithTimeout(ctx, r.s.opts.attempt)
		m, err := sub.NextMsgWithContext(mctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no delivery within %v: %w", r.s.opts.attempt, nats.ErrTimeout)
			}
			return pending, fmt.Errorf("read %s: %w", c.filter, err)
		}
		if status := m.Header.Get("Status"); status != "" {
			if status == "100" { // idle heartbeat or flow control: not asked for
				continue
			}
			return pending, fmt.Errorf("read %s: status %s %s: %w", c.filter, status, m.Header.Get("Description"), nats.ErrTimeout)
		}
		meta, err := m.Metadata()
		if err != nil {
			return pending, fmt.Errorf("read %s: delivery metadata: %w", c.filter, err)
		}
		if !onFilter(m.Subject, c.filter) {
			return pending, fmt.Errorf("read %s: the server delivered a record of %q", c.filter, m.Subject)
		}
		if meta.Sequence.Stream <= lastSeq {
			continue // a redelivery of a record already handed on
		}
		lastSeq = meta.Sequence.Stream
		delivered++
		if unacked++; unacked*2 >= uint64(c.window) && delivered < pending {
			// All-at-once: everything delivered so far, opening the window.
			if err := m.Respond(nil); err != nil {
				return pending, fmt.Errorf("read %s: ack: %w", c.filter, err)
			}
			unacked = 0
		}
		more, err := fn(m, meta)
		if err != nil || !more {
			return pending, err
		}
	}
	return pending, nil
}

// onFilter reports whether subject is filter or, for a filter ending in
// ".*", one token under it.
func onFilter(subject, filter string) bool {
	if prefix, ok := strings.CutSuffix(filter, "*"); ok {
		rest, ok := strings.CutPrefix(subject, prefix)
		return ok && rest != "" && !strings.Contains(rest, ".")
	}
	return subject == filter
}

// consumerName returns a fresh consumer name: 128 random bits in hex.
func consumerName() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
