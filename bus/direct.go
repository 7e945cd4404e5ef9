package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/record"
)

// directBatchSize is how many records one direct get request asks for.
const directBatchSize = 256

// directGetRequest is the body of a batched direct get
// ($JS.API.DIRECT.GET.<stream>, nats-server 2.11+): up to Batch messages of
// subject NextFor from sequence Seq through UpToSeq.
type directGetRequest struct {
	Seq     uint64 `json:"seq"`
	NextFor string `json:"next_by_subj"`
	Batch   int    `json:"batch"`
	UpToSeq uint64 `json:"up_to_seq"`
}

// Record is one record as stored on a session subject: its bytes exactly as
// published, its stream sequence and its Nats-Msg-Id
// (docs/protocol.md#2-the-session-log-stream).
type Record struct {
	// Data is the record (the header record or one event), as published.
	Data []byte
	// Seq is the record's stream sequence.
	Seq uint64
	// MsgID is the record's Nats-Msg-Id: <key>:h or <key>:<seq>, key being
	// the session's log key (<token>, or <tenant>.<token>).
	MsgID string
}

// directBatch fetches one batch of subject's records from start through
// upTo and hands each to fn. It returns how many were delivered and whether
// the caller should ask for more (false once fn declines, upTo was reached
// or nothing remains). nats.go v1.55 has no batched direct get, so the
// request and its multi-message reply (ending with a 204 EOB status) are
// handled here.
func (s *Store) directBatch(ctx context.Context, subject string, start, upTo uint64,
	fn func(r Record) (bool, error)) (int, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.attempt)
	defer cancel()
	inbox := s.nc.NewRespInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return 0, false, err
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(directGetRequest{Seq: start, NextFor: subject, Batch: directBatchSize, UpToSeq: upTo})
	req := &nats.Msg{Subject: "$JS.API.DIRECT.GET." + s.opts.stream.Name, Reply: inbox, Data: body}
	if err := s.nc.PublishMsg(req); err != nil {
		return 0, false, err
	}
	n := 0
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return n, false, err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
		case "204": // end of batch
			return n, n == directBatchSize, nil
		case "404": // nothing (more) on the subject in range
			return n, false, nil
		case "408", "503":
			return n, false, fmt.Errorf("direct get: status %s %s: %w", status, m.Header.Get("Description"), nats.ErrTimeout)
		default:
			return n, false, fmt.Errorf("direct get: status %s %s", status, m.Header.Get("Description"))
		}
		seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err != nil {
			return n, false, fmt.Errorf("direct get: bad Nats-Sequence %q", m.Header.Get("Nats-Sequence"))
		}
		n++
		more, err := fn(Record{Data: m.Data, Seq: seq, MsgID: m.Header.Get(hdrMsgID)})
		if err != nil || !more || seq >= upTo {
			return n, false, err
		}
	}
}

// fetch delivers subject's records from stream sequence start through last
// to fn, in order, until fn returns false. The untenanted Store uses
// batched direct gets (the stream allows direct access): no consumer is
// created, and any replica may answer; a tenant's Store reads through a
// push consumer on its own subject (tenantReader). A transient failure
// resumes after the last record delivered, within the Store's retry bound.
func (s *Store) fetch(ctx context.Context, subject string, start, last uint64, fn func(r Record) (bool, error)) error {
	next := start
	deadline := time.Now().Add(s.opts.maxElapsed)
	for next <= last {
		n, more, err := s.reader.batch(ctx, subject, next, last, func(r Record) (bool, error) {
			next = r.Seq + 1
			return fn(r)
		})
		switch {
		case err != nil && isTransient(err) && time.Now().Before(deadline) && ctx.Err() == nil:
			continue
		case err != nil:
			return err
		case !more:
			return nil
		case n == 0:
			return fmt.Errorf("stream sequence %d is gone", next)
		}
	}
	return nil
}

// lastSeq returns the stream sequence of subject's last record, 0 when the
// subject holds none.
func (s *Store) lastSeq(ctx context.Context, subject string) (uint64, error) {
	var last uint64
	err := s.pub.retry(ctx, func(ctx context.Context) error {
		m, err := s.reader.last(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			last = 0
			return nil
		}
		if err != nil {
			return err
		}
		last = m.Sequence
		return nil
	})
	return last, err
}

// records returns every record stored on subject, header record first (nil
// when there is none). It reads up to the subject's last record at the
// call, so records appended meanwhile are not included.
func (s *Store) records(ctx context.Context, subject string) ([]Record, error) {
	last, err := s.lastSeq(ctx, subject)
	if err != nil || last == 0 {
		return nil, err
	}
	var out []Record
	err = s.fetch(ctx, subject, 1, last, func(r Record) (bool, error) {
		out = append(out, r)
		return true, nil
	})
	return out, err
}

// Records returns every record stored for session id, the header record
// first, exactly as published and without validation (what an export
// writes back). It reads through the subject's last record at the call.
// Errors: ErrInvalidArgument (bad id), ErrNotFound (nothing stored), bus
// failures.
func (s *Store) Records(ctx context.Context, id string) ([]Record, error) {
	tok, err := record.SubjectToken(id)
	if err != nil {
		return nil, wrapf(ErrInvalidArgument, id, err, "read session: %v", err)
	}
	subject := s.subjectOf(tok)
	recs, err := s.records(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("read session %q: %w", id, err)
	}
	if len(recs) == 0 {
		return nil, errorf(ErrNotFound, id, "session %q not found", id)
	}
	return recs, nil
}
