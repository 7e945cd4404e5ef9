package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/dshq/dshq/internal/failover"
)

// Headers of a session record (docs/protocol.md#2-the-session-log-stream) and
// of an atomic batch (nats-server 2.12+).
const (
	hdrMsgID           = jetstream.MsgIDHeader
	hdrExpectedSubjSeq = jetstream.ExpectedLastSubjSeqHeader
	hdrBatchID         = "Nats-Batch-Id"
	hdrBatchSeq        = "Nats-Batch-Sequence"
	hdrBatchCommit     = "Nats-Batch-Commit"
)

// MaxAtomicBatch is the largest atomic batch the server accepts by default;
// a longer Append is published as consecutive atomic batches.
const MaxAtomicBatch = 1000

// JetStream error codes the publisher reacts to.
const (
	errCodeBatchDuplicate  jetstream.ErrorCode = 10201 // atomic batch holds a stored msg id
	errCodeDupInProcess    jetstream.ErrorCode = 10158 // the same msg id is being stored
	errCodeBatchIncomplete jetstream.ErrorCode = 10176 // a batch message was lost in transit
)

// outRecord is one record to publish on a session subject.
type outRecord struct {
	msgID string
	data  []byte
}

// headerMsgID is the Nats-Msg-Id of a session's header record
// (docs/protocol.md#2-the-session-log-stream): <key>:h, key being the session's
// log key (its token, or <tenant>.<token>).
func headerMsgID(key string) string { return key + ":h" }

// eventMsgID is the Nats-Msg-Id of a session's event seq
// (docs/protocol.md#2-the-session-log-stream): <key>:<seq>.
func eventMsgID(key string, seq int64) string { return key + ":" + strconv.FormatInt(seq, 10) }

// publisher publishes a session's records with deduplication and the
// expected-last-subject-sequence guard, retrying transient failures.
type publisher struct {
	nc         *nats.Conn
	js         jetstream.JetStream
	reader     logReader
	name       string // the stream's name
	watch      *failover.Watch
	maxElapsed time.Duration
	attempt    time.Duration // per-attempt request timeout
	retries    atomic.Int64  // attempts retried after a transient failure
	notice     func(error)   // WithRetryNotice, nil = none
}

// DefaultAtomicMin is the smallest Append published as an atomic batch.
// Smaller appends go record by record, each guarded by the exact stream
// sequence of its predecessor: an atomic batch costs the server a staging
// store (about 20 ms), which only pays off once it saves enough per-record
// round trips and fsyncs (see BenchmarkAppend).
const DefaultAtomicMin = 32

// publish stores recs on subject, in order, after the record at stream
// sequence prev (0 = none). Fewer than atomicMin records (or atomicMin <= 0)
// go one by one, each with the expected last subject sequence of its
// predecessor; more go in atomic batches of at most MaxAtomicBatch, where
// only the first record can carry the expectation (the server refuses it on
// a subject already written in the same batch) and the batch's
// all-or-nothing, isolated commit guards the rest. stored(i, seq) is called
// for each record once it is known to be stored, in order; seq is 0 inside
// an atomic batch, where only the last record's sequence is reported.
//
// A retried attempt after an ambiguous failure never stores a record twice
// (Nats-Msg-Id) nor out of order (expected sequence): a conflict is resolved
// by checking whether the records are already stored.
func (p *publisher) publish(ctx context.Context, subject string, prev uint64, recs []outRecord, atomicMin int,
	stored func(i int, seq uint64)) error {
	if atomicMin <= 0 || len(recs) < atomicMin {
		for i := range recs {
			seq, err := p.publishChunk(ctx, subject, prev, recs[i:i+1])
			if err != nil {
				return err
			}
			stored(i, seq)
			prev = seq
		}
		return nil
	}
	for off := 0; off < len(recs); off += MaxAtomicBatch {
		chunk := recs[off:min(len(recs), off+MaxAtomicBatch)]
		last, err := p.publishChunk(ctx, subject, prev, chunk)
		if err != nil {
			return err
		}
		for j := range chunk {
			seq := uint64(0)
			if j == len(chunk)-1 {
				seq = last
			}
			stored(off+j, seq)
		}
		prev = last
	}
	return nil
}

func (p *publisher) publishChunk(ctx context.Context, subject string, prev uint64, recs []outRecord) (uint64, error) {
	var (
		last       uint64
		doubtSince time.Time // since when a duplicate looks like another writer's
	)
	err := p.run(ctx, func(actx context.Context) error {
		seq, err := p.send(actx, subject, prev, recs)
		if err == nil {
			last = seq
			return nil
		}
		if n, ok := refusedAt(err); ok && n < prev {
			// The subject holds this writer's acknowledged records
			// through prev: a server that says it ends before them
			// is a former leader that has not yet learnt it lost its
			// leadership (a paused server resuming). Asked again.
			return fmt.Errorf("%w: the server that refused holds %s through sequence %d, this writer's acknowledged records through %d",
				errStaleReplica, subject, n, prev)
		}
		if isConflict(err) {
			// A previous attempt may have stored the chunk already.
			seq, ok, cerr := p.confirm(actx, subject, prev, recs, leaderLast(err))
			if cerr != nil {
				return cerr // transient lookup failure: retry the whole step
			}
			if ok {
				last = seq
				return nil
			}
			if isDuplicate(err) && !p.reader.leaderReads() {
				// A duplicate is most likely a previous attempt's
				// record, and a tenant's lookup may have been answered
				// by a replica that has not stored it yet: it is asked
				// again for replicaSettle before the duplicate counts
				// as another writer's.
				if doubtSince.IsZero() {
					doubtSince = time.Now()
				}
				if time.Since(doubtSince) < replicaSettle {
					return fmt.Errorf("%w: a duplicate of msg id %s, not found on %s", errStaleReplica, recs[0].msgID, subject)
				}
			}
			if isDuplicate(err) {
				// The stream holds one of these msg ids, but not as
				// this subject's records: another writer took it
				// (on another subject, within the duplicate window).
				// Nothing of the chunk was stored.
				return backoff.Permanent(&Error{Kind: ErrMsgIDInUse, Err: err, Message: fmt.Sprintf(
					"the stream already holds a record with msg id %s (or another of this append's) that is not this session's: nothing was stored; the id is free again after the stream's duplicate window", recs[0].msgID)})
			}
			return backoff.Permanent(err)
		}
		return err
	})
	return last, err
}

// send makes one attempt: a plain publish for one record, otherwise an
// atomic batch. Only the first record carries the expected last subject
// sequence: the server refuses the header on a subject already written in
// the same batch, and the batch is applied all-or-nothing in isolation, so
// the first record's check guards the whole chunk.
func (p *publisher) send(ctx context.Context, subject string, prev uint64, recs []outRecord) (uint64, error) {
	msg := func(i int) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = recs[i].data
		m.Header.Set(hdrMsgID, recs[i].msgID)
		if i == 0 {
			m.Header.Set(hdrExpectedSubjSeq, strconv.FormatUint(prev, 10))
		}
		return m
	}
	if len(recs) == 1 {
		// No retry inside the attempt: run retries, and a leader
		// election wakes it up.
		ack, err := p.js.PublishMsg(ctx, msg(0), jetstream.WithRetryAttempts(0))
		if err != nil {
			return 0, err
		}
		if ack.Duplicate {
			return 0, &duplicateAck{seq: ack.Sequence}
		}
		return ack.Sequence, nil
	}
	id := nuid.Next()
	for i := range recs {
		m := msg(i)
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		if i < len(recs)-1 {
			// Staged without a reply; a lost one makes the commit fail
			// as an incomplete batch, which is retried whole.
			if err := p.nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set(hdrBatchCommit, "1")
		ack, err := p.js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(0))
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	}
	panic("unreachable")
}

// errDuplicateAck is a publish acknowledged as a duplicate of a stored msg
// id: resolved like a conflict, by checking what is stored.
var errDuplicateAck = errors.New("publish acknowledged as duplicate")

// duplicateAck is errDuplicateAck with the sequence the acknowledgement
// names: the record's that holds the msg id.
type duplicateAck struct{ seq uint64 }

func (d *duplicateAck) Error() string {
	return fmt.Sprintf("%v (the stored record's sequence is %d)", errDuplicateAck, d.seq)
}

func (d *duplicateAck) Is(target error) bool { return target == errDuplicateAck }

// replicaSettle is how long a lookup answered by any replica (a tenant's)
// is asked again before a duplicate msg id it does not find on the
// session's subject counts as another writer's: far longer than a current
// follower takes to store what its leader acknowledged.
const replicaSettle = 2 * time.Second

// errStaleReplica: the replica that answered a lookup has not stored yet
// what the stream's leader said it holds; the lookup is retried.
var errStaleReplica = errors.New("the replica that answered is behind the stream's leader")

// wrongLastSeqRe finds, in a wrong last sequence refusal (10071), the
// subject's last sequence on the leader.
var wrongLastSeqRe = regexp.MustCompile(`wrong last sequence: (\d+)`)

// leaderLast returns what a conflict says of the subject's last stream
// sequence on the stream's leader: the one a wrong last sequence refusal
// names (0 = it says nothing). A duplicate acknowledgement names the
// sequence of the record that holds the msg id, which may be on another
// subject (another writer took the id): no bound on this one.
func leaderLast(err error) uint64 {
	n, _ := refusedAt(err)
	return n
}

// refusedAt returns the subject's last stream sequence that a wrong last
// sequence refusal (10071) names, on the server that refused; ok is false
// for any other error.
func refusedAt(err error) (n uint64, ok bool) {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		if m := wrongLastSeqRe.FindStringSubmatch(apiErr.Description); m != nil {
			n, err := strconv.ParseUint(m[1], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// confirm reports whether recs are stored on subject right after prev: the
// subject's last record has the chunk's last msg id and bytes, and the
// chunk's first record follows prev. It returns the last record's sequence.
// atLeast is the subject's last sequence on the stream's leader as the
// refusal named it (0 = unknown): a tenant's Store reads from any replica,
// and one that has not stored that far is asked again (errStaleReplica),
// never taken for the truth.
func (p *publisher) confirm(ctx context.Context, subject string, prev uint64, recs []outRecord, atLeast uint64) (uint64, bool, error) {
	last, err := p.reader.last(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		if atLeast > 0 {
			return 0, false, fmt.Errorf("%w: %s holds nothing, the leader sequence %d", errStaleReplica, subject, atLeast)
		}
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if last.Sequence < atLeast {
		return 0, false, fmt.Errorf("%w: %s ends at sequence %d, on the leader at %d", errStaleReplica, subject, last.Sequence, atLeast)
	}
	want := recs[len(recs)-1]
	if last.Header.Get(hdrMsgID) != want.msgID || !bytes.Equal(last.Data, want.data) {
		return 0, false, nil
	}
	if len(recs) > 1 || prev > 0 {
		first, err := p.reader.first(ctx, subject, prev+1)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// The chunk's last record is stored after prev, so a record
			// follows prev: the replica that answered is behind.
			return 0, false, fmt.Errorf("%w: nothing after sequence %d of %s", errStaleReplica, prev, subject)
		}
		if err != nil {
			return 0, false, err
		}
		if first.Header.Get(hdrMsgID) != recs[0].msgID || !bytes.Equal(first.Data, recs[0].data) {
			return 0, false, nil
		}
	}
	return last.Sequence, true, nil
}

// isConflict reports a refusal that may mean "already stored": a wrong last
// subject sequence, a duplicate msg id in a batch, or a duplicate ack.
//
// The constant form of a wrong last sequence (10164) is not one: a
// replicated stream's leader answers it while another message of the
// subject is still in flight between its proposal and its application —
// which includes the previous record of the same writer for a moment after
// its acknowledgement was sent. It is retried (isTransient).
func isConflict(err error) bool {
	if errors.Is(err, errDuplicateAck) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, errCodeBatchDuplicate:
			return true
		}
	}
	return false
}

// isDuplicate reports a refusal for a msg id the stream holds already: a
// duplicate acknowledgement, or an atomic batch holding a stored msg id.
func isDuplicate(err error) bool {
	if errors.Is(err, errDuplicateAck) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeBatchDuplicate
}

// isTransient reports a failure worth retrying: the server, the route to it
// or the stream's leader is temporarily unavailable, the attempt timed out
// (failover.Transient), or the stream refused a publish for a moment (a
// message id or another message of the subject still in flight, a batch
// message lost in transit), or a lease claim raced with a change of the key.
func isTransient(err error) bool {
	if failover.Transient(err) || errors.Is(err, errLeaseChanged) || errors.Is(err, errStaleReplica) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeDupInProcess, errCodeBatchIncomplete, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return true
		}
	}
	return false
}

// Retry pacing: the first retry after 20 ms, growing to retryMaxInterval.
// A retry waiting for its turn is woken at once by a reconnect or a leader
// election (failover.Watch), so the cap only paces retries while the cluster
// has no leader and the advisories cannot be followed.
const (
	retryInitialInterval = 20 * time.Millisecond
	retryMaxInterval     = 500 * time.Millisecond
)

// retry runs op with the publisher's bounded backoff, retrying transient
// failures only.
func (p *publisher) retry(ctx context.Context, op func(ctx context.Context) error) error {
	return p.run(ctx, func(actx context.Context) error {
		err := op(actx)
		if err != nil && !isTransient(err) && !failover.Interrupted(actx) {
			return backoff.Permanent(err)
		}
		return err
	})
}

// run calls op, each attempt bounded by the attempt timeout and interrupted
// when its answer can no longer come (failover.Watch), until it succeeds, fails
// with a backoff.Permanent error, or the retries run out (maxElapsed) or ctx
// ends. An interrupted attempt is retried at once; a waiting retry wakes up
// at a reconnect or a leader election.
func (p *publisher) run(ctx context.Context, op func(actx context.Context) error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = retryInitialInterval
	b.MaxInterval = retryMaxInterval
	b.MaxElapsedTime = p.maxElapsed
	b.Reset()
	for {
		woken := p.watch.Changed()
		actx, release := p.watch.Attempt(ctx, p.attempt)
		err := op(actx)
		cut := failover.Interrupted(actx)
		release()
		if err == nil {
			return nil
		}
		var perm *backoff.PermanentError
		if errors.As(err, &perm) {
			return perm.Err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
		if !cut && !isTransient(err) {
			return err
		}
		p.retries.Add(1)
		if p.notice != nil {
			p.notice(err)
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop {
			return err
		}
		if cut {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-woken:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		}
	}
}
