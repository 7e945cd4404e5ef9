package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/record"
)

// sessionLog reads and appends a session's records on its stream subject
// (CONTRACT §2) — the source of truth, not a projection. Import publishes
// through it rather than through bus.Store because the harness SDK
// validates appends with the strict fold, and a shared corpus must take the
// older message shapes the projector accepts; the records carry exactly the
// contract's headers (Nats-Msg-Id <token>:h / <token>:<seq> and
// Nats-Expected-Last-Subject-Sequence).
type sessionLog struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	stream string
}

// storedRecord is one record of a session subject.
type storedRecord struct {
	data  []byte
	seq   uint64 // stream sequence
	msgID string
}

// directBatchSize is how many records one direct get asks for.
const directBatchSize = 256

// attemptTimeout bounds one request to the server.
const attemptTimeout = 5 * time.Second

func newSessionLog(nc *nats.Conn, stream string) (*sessionLog, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &sessionLog{nc: nc, js: js, stream: stream}, nil
}

// check verifies that the stream exists, with a clear message when it does
// not.
func (l *sessionLog) check(ctx context.Context) error {
	_, err := l.js.Stream(ctx, l.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("stream %s not found on the server (start dshq serve, or the projector, first)", l.stream)
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", l.stream, err)
	}
	return nil
}

// read returns every record stored on the subject of session id, header
// record first, through batched direct gets (no consumer is created).
func (l *sessionLog) read(ctx context.Context, id string) ([]storedRecord, error) {
	subject, err := bus.Subject(id)
	if err != nil {
		return nil, err
	}
	st, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", l.stream, err)
	}
	last, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subject, err)
	}
	var out []storedRecord
	next := uint64(1)
	for {
		n, more, err := l.directBatch(ctx, subject, next, last.Sequence, func(r storedRecord) {
			out = append(out, r)
		})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", subject, err)
		}
		if n == 0 || !more {
			break
		}
		next = out[len(out)-1].seq + 1
	}
	if len(out) == 0 || out[len(out)-1].seq != last.Sequence {
		return nil, fmt.Errorf("read %s: the stream changed while it was read; try again", subject)
	}
	return out, nil
}

// directGetRequest is a batched direct get ($JS.API.DIRECT.GET.<stream>,
// nats-server 2.11+), which nats.go v1.55 has no helper for.
type directGetRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
	UpToSeq uint64 `json:"up_to_seq"`
}

// directBatch fetches up to directBatchSize records of subject from start
// through upTo; more is true when a full batch came back below upTo.
func (l *sessionLog) directBatch(ctx context.Context, subject string, start, upTo uint64, fn func(storedRecord)) (n int, more bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	inbox := l.nc.NewRespInbox()
	sub, err := l.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	body, _ := json.Marshal(directGetRequest{Seq: start, NextFor: subject, Batch: directBatchSize, UpToSeq: upTo})
	if err := l.nc.PublishMsg(&nats.Msg{Subject: "$JS.API.DIRECT.GET." + l.stream, Reply: inbox, Data: body}); err != nil {
		return 0, false, err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, false, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			return n, n == directBatchSize, nil
		case "404":
			return n, false, nil
		default:
			return n, false, fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if err != nil {
			return n, false, fmt.Errorf("direct get: bad %s %q", jetstream.SequenceHeader, m.Header.Get(jetstream.SequenceHeader))
		}
		n++
		fn(storedRecord{data: m.Data, seq: seq, msgID: m.Header.Get(jetstream.MsgIDHeader)})
		if seq >= upTo {
			return n, false, nil
		}
	}
}

// outRecord is one record to append: its index in the log (-1 = header)
// and its bytes.
type outRecord struct {
	index int64
	data  []byte
}

// msgID is the record's Nats-Msg-Id (CONTRACT §2).
func (r outRecord) msgID(token string) string {
	if r.index < 0 {
		return token + ":h"
	}
	return token + ":" + strconv.FormatInt(r.index, 10)
}

// append publishes recs on the subject of token after the record at stream
// sequence prev (0 = the subject is empty) and returns the stream sequence
// of the last one. Short runs go record by record, each with the expected
// last subject sequence of its predecessor; longer ones as atomic batches
// (as the harness SDK does), whose first record carries the expectation and
// whose all-or-nothing commit guards the rest. Transient failures are retried;
// a conflict (another writer, or an earlier attempt that was stored) is
// returned for the caller to reconcile by reading the subject again.
func (l *sessionLog) append(ctx context.Context, token string, prev uint64, recs []outRecord, stored func(n int)) (uint64, error) {
	subject := bus.SubjectPrefix + token
	if len(recs) < bus.DefaultAtomicMin {
		for _, r := range recs {
			seq, err := l.retry(ctx, func(ctx context.Context) (uint64, error) {
				return l.send(ctx, subject, token, prev, []outRecord{r})
			})
			if err != nil {
				return prev, err
			}
			prev = seq
			stored(1)
		}
		return prev, nil
	}
	for off := 0; off < len(recs); off += bus.MaxAtomicBatch {
		chunk := recs[off:min(len(recs), off+bus.MaxAtomicBatch)]
		seq, err := l.retry(ctx, func(ctx context.Context) (uint64, error) {
			return l.send(ctx, subject, token, prev, chunk)
		})
		if err != nil {
			return prev, err
		}
		prev = seq
		stored(len(chunk))
	}
	return prev, nil
}

// errDuplicate is a publish acknowledged as a duplicate of a stored msg id.
var errDuplicate = errors.New("publish acknowledged as a duplicate")

// send makes one attempt: a plain publish for one record, else an atomic
// batch (Nats-Batch-Id/-Sequence/-Commit, nats-server 2.12+).
func (l *sessionLog) send(ctx context.Context, subject, token string, prev uint64, recs []outRecord) (uint64, error) {
	msg := func(i int) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = recs[i].data
		m.Header.Set(jetstream.MsgIDHeader, recs[i].msgID(token))
		if i == 0 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(prev, 10))
		}
		return m
	}
	if len(recs) == 1 {
		ack, err := l.js.PublishMsg(ctx, msg(0))
		if err != nil {
			return 0, err
		}
		if ack.Duplicate {
			return 0, errDuplicate
		}
		return ack.Sequence, nil
	}
	id := nuid.Next()
	for i := range recs {
		m := msg(i)
		m.Header.Set("Nats-Batch-Id", id)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i < len(recs)-1 {
			if err := l.nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		ack, err := l.js.PublishMsg(ctx, m)
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	}
	return 0, errors.New("empty batch")
}

// retry runs op with bounded exponential backoff over transient failures.
func (l *sessionLog) retry(ctx context.Context, op func(context.Context) (uint64, error)) (uint64, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 20 * time.Millisecond
	b.MaxInterval = time.Second
	b.MaxElapsedTime = 30 * time.Second
	var out uint64
	err := backoff.Retry(func() error {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		seq, err := op(actx)
		switch {
		case err == nil:
			out = seq
			return nil
		case ctx.Err() != nil:
			return backoff.Permanent(ctx.Err())
		case transient(err):
			return err
		}
		return backoff.Permanent(err)
	}, backoff.WithContext(b, ctx))
	return out, err
}

// transient reports a failure worth retrying.
func transient(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting):
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 10158: the same msg id is being stored; 10176: a batch message
		// was lost in transit.
		return apiErr.ErrorCode == 10158 || apiErr.ErrorCode == 10176 || apiErr.Code == 503 || apiErr.Code == 408
	}
	return false
}

// conflict reports a refusal that means the subject is not where the
// publisher thought: a wrong last subject sequence, a duplicate msg id in a
// batch (10201), or a duplicate acknowledgement.
func conflict(err error) bool {
	if errors.Is(err, errDuplicate) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant, 10201:
			return true
		}
	}
	return false
}

// subjectToken returns the subject token of id.
func subjectToken(id string) (string, error) { return record.SubjectToken(id) }
