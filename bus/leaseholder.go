package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/record"
)

// WithLeaseHolder names the Store's write leases for people: the holder
// (LeaseValue.Holder) a refused writer is told about — the machine and the
// program, as "laptop-b (dshq watch)". Default: none.
func WithLeaseHolder(name string) Option { return func(o *storeOptions) { o.holder = name } }

// Lease returns the value of session id's write lease, or nil when no
// writer holds it (the session is not live). Errors: ErrInvalidArgument
// (bad id), bus failures.
func (s *Store) Lease(ctx context.Context, id string) (*LeaseValue, error) {
	tok, err := record.SubjectToken(id)
	if err != nil {
		return nil, wrapf(ErrInvalidArgument, id, err, "lease of session: %v", err)
	}
	var out *LeaseValue
	err = s.pub.retry(ctx, func(ctx context.Context) error {
		e, err := s.kv.get(ctx, s.leaseKey(tok))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			out = nil
			return nil
		}
		if err != nil {
			return err
		}
		out = nil
		if e.Operation() != jetstream.KeyValuePut {
			return nil
		}
		var v LeaseValue
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			v = LeaseValue{SessionID: id}
		}
		out = &v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lease of session %q: %w", id, err)
	}
	return out, nil
}

// Describe names the lease's holder for a refusal: " (held by H since
// 15:04:05 UTC)", or "" when it names none.
func (v *LeaseValue) Describe() string {
	if v == nil || v.Holder == "" {
		return ""
	}
	since := ""
	if v.AcquiredAt > 0 {
		since = " since " + time.UnixMilli(v.AcquiredAt).UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return fmt.Sprintf(" (held by %s%s)", v.Holder, since)
}

// holderOf describes who holds lease key for a refusal (best effort: ""
// when the key cannot be read in a second or names no holder).
func (s *Store) holderOf(ctx context.Context, key string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	e, err := s.kv.get(ctx, key)
	if err != nil || e.Operation() != jetstream.KeyValuePut {
		return ""
	}
	var v LeaseValue
	if json.Unmarshal(e.Value(), &v) != nil {
		return ""
	}
	return v.Describe()
}
