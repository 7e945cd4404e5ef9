package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/internal/failover"
)

// leaseKV is what the write leases need of the lease bucket: the semantics
// of jetstream.KeyValue's Create, Update, Get and a Delete at a revision.
type leaseKV interface {
	// create creates key with v; a key held by anyone is
	// jetstream.ErrKeyExists (or a wrong-last-sequence APIError).
	create(ctx context.Context, key string, v []byte) (uint64, error)
	// update rewrites key at revision rev; another revision is a
	// wrong-last-sequence APIError.
	update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error)
	// get returns key's current value; a missing or deleted key is
	// jetstream.ErrKeyNotFound.
	get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
	// deleteAt deletes key if it is still at revision rev.
	deleteAt(ctx context.Context, key string, rev uint64) error
	// entry returns key's last record, deletion markers included (their
	// Operation is not a put); a key never written is
	// jetstream.ErrKeyNotFound. It reads from the bucket's leader where
	// the Store's permissions allow: a claim decides by it.
	entry(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
}

// jsLeases is the untenanted Store's lease bucket: nats.go's key-value
// client, which reads the bucket's stream info and may read any key, and
// the bucket's leader for entry.
type jsLeases struct {
	kv jetstream.KeyValue
	nc *nats.Conn
}

func (l jsLeases) entry(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	bucket := l.kv.Bucket()
	m, err := failover.LastMsg(ctx, l.nc, "KV_"+bucket, "$KV."+bucket+"."+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	return entryOf(bucket, key, m), nil
}

func (l jsLeases) create(ctx context.Context, key string, v []byte) (uint64, error) {
	return l.kv.Create(ctx, key, v)
}

func (l jsLeases) update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	return l.kv.Update(ctx, key, v, rev)
}

func (l jsLeases) get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return l.kv.Get(ctx, key)
}

func (l jsLeases) deleteAt(ctx context.Context, key string, rev uint64) error {
	return l.kv.Delete(ctx, key, jetstream.LastRevision(rev))
}

// Key-value headers (the bucket's wire format, as nats.go writes it).
const (
	kvOperation = "KV-Operation"
	kvDelete    = "DEL"
	kvPurge     = "PURGE"
)

// tenantLeases is a tenant's lease bucket: it writes its keys
// ($KV.<bucket>.<tenant>.<token>) by publishing, as the key-value client
// does, and reads one key by the subject form of direct get on the bucket's
// stream, which is all a tenant's permissions allow (the key-value client
// itself needs the stream's info, whose subject filter lists every key).
type tenantLeases struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	bucket string
}

func (l tenantLeases) subject(key string) string { return "$KV." + l.bucket + "." + key }

func (l tenantLeases) put(ctx context.Context, key string, v []byte, rev uint64, op string) (uint64, error) {
	m := nats.NewMsg(l.subject(key))
	m.Data = v
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	if op != "" {
		m.Header.Set(kvOperation, op)
	}
	ack, err := l.js.PublishMsg(ctx, m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// create writes key expecting no value, or the deletion marker it finds
// (a released or lapsed lease), as the key-value client's Create does.
func (l tenantLeases) create(ctx context.Context, key string, v []byte) (uint64, error) {
	rev, err := l.put(ctx, key, v, 0, "")
	if err == nil || !isWrongLastSequence(err) {
		return rev, err
	}
	e, gerr := l.entry(ctx, key)
	if gerr == nil && e.Operation() != jetstream.KeyValuePut {
		return l.put(ctx, key, v, e.Revision(), "")
	}
	return 0, fmt.Errorf("%w: %w", err, jetstream.ErrKeyExists)
}

func (l tenantLeases) update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	return l.put(ctx, key, v, rev, "")
}

func (l tenantLeases) deleteAt(ctx context.Context, key string, rev uint64) error {
	_, err := l.put(ctx, key, nil, rev, kvDelete)
	return err
}

func (l tenantLeases) get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	e, err := l.entry(ctx, key)
	if err != nil {
		return nil, err
	}
	if e.Operation() != jetstream.KeyValuePut {
		return nil, jetstream.ErrKeyNotFound
	}
	return e, nil
}

// entry returns key's last record, deletion markers included (their
// Operation is not a put); a key never written is jetstream.ErrKeyNotFound.
// A tenant may only read a key by the subject form of direct get, which any
// replica of the bucket answers.
func (l tenantLeases) entry(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	m, err := directGetLast(ctx, l.nc, "KV_"+l.bucket, l.subject(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, err
	}
	return entryOf(l.bucket, key, m), nil
}

// entryOf is the entry of key that m, its last record in the bucket's
// stream, makes.
func entryOf(bucket, key string, m *jetstream.RawStreamMsg) *leaseEntry {
	e := &leaseEntry{bucket: bucket, key: key, value: m.Data, revision: m.Sequence, created: m.Time, op: jetstream.KeyValuePut}
	switch m.Header.Get(kvOperation) {
	case kvDelete:
		e.op = jetstream.KeyValueDelete
	case kvPurge:
		e.op = jetstream.KeyValuePurge
	case "":
		// A key aged out by the bucket's max age leaves a marker.
		switch m.Header.Get(jetstream.MarkerReasonHeader) {
		case "MaxAge", "Purge":
			e.op = jetstream.KeyValuePurge
		case "Remove":
			e.op = jetstream.KeyValueDelete
		}
	}
	return e
}

// leaseEntry is one key's record, as jetstream.KeyValueEntry.
type leaseEntry struct {
	bucket, key string
	value       []byte
	revision    uint64
	created     time.Time
	op          jetstream.KeyValueOp
}

func (e *leaseEntry) Bucket() string                  { return e.bucket }
func (e *leaseEntry) Key() string                     { return e.key }
func (e *leaseEntry) Value() []byte                   { return e.value }
func (e *leaseEntry) Revision() uint64                { return e.revision }
func (e *leaseEntry) Created() time.Time              { return e.created }
func (e *leaseEntry) Delta() uint64                   { return 0 }
func (e *leaseEntry) Operation() jetstream.KeyValueOp { return e.op }
