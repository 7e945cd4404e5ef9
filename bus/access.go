package bus

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/internal/failover"
)

// logReader is how a Store reads the session log. A Store without a tenant
// reads it as it always has (streamReader: stream info and batched direct
// gets, which name any subject); a tenant's Store reads only its own log
// subjects, in the forms its permissions allow (tenantReader:
// docs/protocol.md#2-the-session-log-stream).
type logReader interface {
	// first returns the first record of subject at or after stream
	// sequence seq; jetstream.ErrMsgNotFound when there is none.
	first(ctx context.Context, subject string, seq uint64) (*jetstream.RawStreamMsg, error)
	// header returns the first record of subject, as first(subject, 1),
	// and the subject's record count when the reader learns it in passing
	// (nil otherwise).
	header(ctx context.Context, subject string) (*jetstream.RawStreamMsg, *uint64, error)
	// last returns the last record of subject; jetstream.ErrMsgNotFound
	// when there is none.
	last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error)
	// count returns how many records subject holds.
	count(ctx context.Context, subject string) (uint64, error)
	// subjects returns the log subjects of the Store's namespace (its
	// tenant's, or the untenanted dsh.log.<token>) with their record
	// counts.
	subjects(ctx context.Context) (map[string]uint64, error)
	// batch delivers subject's records from stream sequence start through
	// upTo to fn, in order, until fn declines; it returns how many it
	// delivered and whether the caller should ask for more (see
	// Store.fetch).
	batch(ctx context.Context, subject string, start, upTo uint64, fn func(r Record) (bool, error)) (int, bool, error)
	// leaderReads reports whether first and last are answered by the
	// stream's leader (on a cluster; otherwise any replica may answer and
	// may not have stored yet what the leader acknowledged).
	leaderReads() bool
}

// streamReader is the untenanted Store's reader: the stream's own API. The
// lookups that decide what a writer does next (a subject's first and last
// record: whether a session exists, its tail, whether a retried publish
// was stored) are answered by the stream's leader (failover.FirstMsg,
// failover.LastMsg): on a cluster, a direct get may be answered by a
// follower that has not stored yet what the leader acknowledged. Bulk
// reads (batch) take direct gets from any replica, continued from the
// leader where one lags.
type streamReader struct{ s *Store }

func (r streamReader) first(ctx context.Context, subject string, seq uint64) (*jetstream.RawStreamMsg, error) {
	return failover.FirstMsg(ctx, r.s.nc, r.s.opts.stream.Name, subject, seq)
}

func (r streamReader) header(ctx context.Context, subject string) (*jetstream.RawStreamMsg, *uint64, error) {
	m, err := r.first(ctx, subject, 1)
	return m, nil, err
}

func (r streamReader) last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return failover.LastMsg(ctx, r.s.nc, r.s.opts.stream.Name, subject)
}

func (r streamReader) count(ctx context.Context, subject string) (uint64, error) {
	info, err := r.s.stream.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, err
	}
	return info.State.Subjects[subject], nil
}

// subjects lists the subjects of the Store's namespace only: dsh.log.* for
// the untenanted one (tenants' subjects have two tokens), dsh.log.<tenant>.*
// for a tenant's (Namespace).
func (r streamReader) subjects(ctx context.Context) (map[string]uint64, error) {
	info, err := r.s.stream.Info(ctx, jetstream.WithSubjectFilter(r.s.subjectOf("*")))
	if err != nil {
		return nil, err
	}
	return info.State.Subjects, nil
}

func (r streamReader) leaderReads() bool { return true }

func (r streamReader) batch(ctx context.Context, subject string, start, upTo uint64, fn func(r Record) (bool, error)) (int, bool, error) {
	return r.s.directBatch(ctx, subject, start, upTo, fn)
}
