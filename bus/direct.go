package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/record"
)

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

// directBatch delivers one batch of subject's records from start through
// upTo (the subject's last record as the stream's leader reported it) to
// fn: a batched direct get, which any replica answers, continued from the
// leader where the replica has not stored everything yet (failover.Batch).
// It returns how many were delivered and whether the caller should ask for
// more. The attempt is bounded by the Store's attempt timeout and
// interrupted by a reconnect or a leader election (failover.Watch).
func (s *Store) directBatch(ctx context.Context, subject string, start, upTo uint64,
	fn func(r Record) (bool, error)) (int, bool, error) {
	actx, release := s.pub.watch.Attempt(ctx, s.opts.attempt)
	defer release()
	n, more, err := failover.Batch(actx, s.nc, s.opts.stream.Name, subject, start, upTo, func(m failover.Msg) (bool, error) {
		return fn(Record{Data: m.Data, Seq: m.Seq, MsgID: m.Header.Get(hdrMsgID)})
	})
	if err != nil && failover.Interrupted(actx) {
		err = fmt.Errorf("%w: %w", failover.ErrInterrupted, err)
	}
	return n, more, err
}

// fetch delivers subject's records from stream sequence start through last
// (the subject's last record as the stream's leader reported it) to fn, in
// order, until fn returns false. The untenanted Store uses batched direct
// gets (the stream allows direct access): no consumer is created, any
// replica may answer, and the leader continues where a replica lags
// (directBatch); a tenant's Store reads through a push consumer on its own
// subject (tenantReader). A transient failure resumes after the last record
// delivered, within the Store's retry bound, after the publisher's backoff
// or at once when a reconnect or a leader election wakes it.
func (s *Store) fetch(ctx context.Context, subject string, start, last uint64, fn func(r Record) (bool, error)) error {
	next := start
	deadline := time.Now().Add(s.opts.maxElapsed)
	pause := retryInitialInterval
	for next <= last {
		woken := s.pub.watch.Changed()
		var fnErr error
		n, more, err := s.reader.batch(ctx, subject, next, last, func(r Record) (bool, error) {
			next = r.Seq + 1
			more, err := fn(r)
			fnErr = err
			return more, err
		})
		switch {
		case fnErr != nil:
			return fnErr
		case err != nil && isTransient(err) && time.Now().Before(deadline) && ctx.Err() == nil:
			if errors.Is(err, failover.ErrInterrupted) {
				continue
			}
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-woken:
			case <-ctx.Done():
			}
			t.Stop()
			pause = min(2*pause, retryMaxInterval)
			continue
		case err != nil:
			return err
		case !more:
			return nil
		case n == 0:
			return fmt.Errorf("stream sequence %d is gone", next)
		}
		pause = retryInitialInterval
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
