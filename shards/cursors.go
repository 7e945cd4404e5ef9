package shards

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/query/wire"
)

// KVCursorStore is a CursorStore in a JetStream KV bucket, so any replica
// of a shard can continue any cursor.
type KVCursorStore struct {
	nc *nats.Conn
	// bind returns the bucket (BindKVCursorStore binds it at first use).
	bind func(ctx context.Context) (jetstream.KeyValue, error)
}

// BindKVCursorStore returns the store of the cursor bucket the projectors
// create (NewKVCursorStore), bound at its first use: a partitioned query
// service, which may start first, neither creates the bucket nor changes
// its configuration. Until a projector has created it, every use fails.
func BindKVCursorStore(js jetstream.JetStream) *KVCursorStore {
	var (
		mu sync.Mutex // guards kv
		kv jetstream.KeyValue
	)
	return &KVCursorStore{nc: js.Conn(), bind: func(ctx context.Context) (jetstream.KeyValue, error) {
		mu.Lock()
		defer mu.Unlock()
		if kv != nil {
			return kv, nil
		}
		b, err := js.KeyValue(ctx, dshq.CursorBucket)
		if err != nil {
			return nil, fmt.Errorf("the cursor bucket %s cannot be opened: %w", dshq.CursorBucket, err)
		}
		kv = b
		return kv, nil
	}}
}

// DefaultCursorMaxBytes bounds the memory of the cursor bucket.
const DefaultCursorMaxBytes = 128 << 20

// KVCursorOption configures NewKVCursorStore.
type KVCursorOption func(*jetstream.KeyValueConfig)

// WithCursorMaxBytes bounds the cursor bucket's memory (bytes;
// DefaultCursorMaxBytes when 0, no bound when negative). When it is full,
// the oldest stored hits go first: a cursor that needed them then reports
// SESSION_QUERY_STALE_CURSOR, as after engine.CursorTTL.
func WithCursorMaxBytes(n int64) KVCursorOption {
	return func(c *jetstream.KeyValueConfig) {
		switch {
		case n > 0:
			c.MaxBytes = n
		case n < 0:
			c.MaxBytes = -1
		}
	}
}

// WithCursorReplicas sets the bucket's replica count (default 1). On a
// cluster it should match the session stream's: a bucket on a single server
// fails every paged search while that server is down.
func WithCursorReplicas(n int) KVCursorOption {
	return func(c *jetstream.KeyValueConfig) { c.Replicas = n }
}

// NewKVCursorStore creates or binds the KV bucket dshq.CursorBucket (memory
// storage, TTL engine.CursorTTL, DefaultCursorMaxBytes, the replicas asked for),
// and sets it to drop its oldest entries when full rather than refuse new
// ones.
func NewKVCursorStore(ctx context.Context, js jetstream.JetStream, opts ...KVCursorOption) (*KVCursorStore, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:      dshq.CursorBucket,
		Description: "dshq: stored hits of paged searches",
		TTL:         engine.CursorTTL,
		History:     1,
		Storage:     jetstream.MemoryStorage,
		MaxBytes:    DefaultCursorMaxBytes,
	}
	for _, o := range opts {
		o(&cfg)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cursor bucket %s: %w", dshq.CursorBucket, err)
	}
	if err := discardOldest(ctx, js, "KV_"+dshq.CursorBucket); err != nil {
		return nil, fmt.Errorf("cursor bucket %s: %w", dshq.CursorBucket, err)
	}
	return &KVCursorStore{nc: js.Conn(), bind: func(context.Context) (jetstream.KeyValue, error) { return kv, nil }}, nil
}

// discardOldest makes a key-value bucket's stream drop its oldest entries
// at its limits (a bucket refuses new ones by default).
func discardOldest(ctx context.Context, js jetstream.JetStream, stream string) error {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	cfg := st.CachedInfo().Config
	if cfg.Discard == jetstream.DiscardOld {
		return nil
	}
	cfg.Discard = jetstream.DiscardOld
	_, err = js.UpdateStream(ctx, cfg)
	return err
}

// Put stores value under key, retrying transient failures.
func (s *KVCursorStore) Put(ctx context.Context, key string, value []byte) error {
	kv, err := s.bind(ctx)
	if err != nil {
		return err
	}
	return s.retry(ctx, func(ctx context.Context) error {
		_, err := kv.Put(ctx, key, value)
		return err
	})
}

// Get returns the value under key or engine.ErrCursorExpired, retrying transient
// failures. A key a replica does not hold is looked up on the bucket's
// leader before it counts as expired: the replica that answered may not
// have stored it yet.
func (s *KVCursorStore) Get(ctx context.Context, key string) ([]byte, error) {
	kv, err := s.bind(ctx)
	if err != nil {
		return nil, err
	}
	var out []byte
	err = s.retry(ctx, func(ctx context.Context) error {
		e, err := kv.Get(ctx, key)
		if err == nil {
			out = e.Value()
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		m, err := failover.LastMsg(ctx, s.nc, "KV_"+dshq.CursorBucket, "$KV."+dshq.CursorBucket+"."+key)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return engine.ErrCursorExpired
		case err != nil:
			return err
		case m.Header.Get("KV-Operation") != "" || m.Header.Get("Nats-Marker-Reason") != "":
			return engine.ErrCursorExpired
		}
		out = m.Data
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// retry runs op until it succeeds or fails other than transiently, within
// failover.KVRetryFor; a reconnect or a leader election ends a wait at once.
func (s *KVCursorStore) retry(ctx context.Context, op func(ctx context.Context) error) error {
	return failover.Retry(ctx, s.nc, "KV_"+dshq.CursorBucket, failover.KVRetryFor, failover.KVAttempt, op)
}

// LoadCursorKey returns the deployment's cursor key: the value of
// dshq.CursorKeyName in the key-value bucket dshq.KeyBucket (file storage,
// no expiry, replicas as given when it creates the bucket, 0 = 1). The first
// process to start creates both, with a random key; every later one, and
// every replica of a shard, reads the same key, so any of them continues any
// cursor and none accepts a cursor it did not issue. A stored key of the
// wrong length is an error (delete it to have a new one made; the cursors
// of the old one then fail SESSION_QUERY_INVALID_CURSOR).
func LoadCursorKey(ctx context.Context, js jetstream.JetStream, replicas int) (wire.CursorKey, error) {
	kv, err := keyBucket(ctx, js, replicas)
	if err != nil {
		return nil, fmt.Errorf("key bucket %s: %w", dshq.KeyBucket, err)
	}
	for range 2 {
		e, err := kv.Get(ctx, dshq.CursorKeyName)
		if err == nil {
			k := wire.CursorKey(e.Value())
			if err := k.Check(); err != nil {
				return nil, fmt.Errorf("key %s in %s is %d bytes: %w", dshq.CursorKeyName, dshq.KeyBucket, len(k), err)
			}
			return k, nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("read key %s: %w", dshq.CursorKeyName, err)
		}
		k := wire.NewCursorKey()
		if _, err := kv.Create(ctx, dshq.CursorKeyName, k); err == nil {
			return k, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("create key %s: %w", dshq.CursorKeyName, err)
		}
		// Another process created it first: read its key.
	}
	return nil, fmt.Errorf("key %s in %s: created and deleted concurrently", dshq.CursorKeyName, dshq.KeyBucket)
}

// ReadCursorKey returns a function that reads the deployment's cursor key
// (LoadCursorKey) from the key bucket when first called, creating nothing:
// a partitioned query service, which issues the cursors of its merges,
// may start before the first projector created it. Until then each call
// fails with SESSION_QUERY_PERSISTENCE_FAILED.
func ReadCursorKey(js jetstream.JetStream) func(ctx context.Context) (wire.CursorKey, error) {
	var (
		mu  sync.Mutex // guards key
		key wire.CursorKey
	)
	return func(ctx context.Context) (wire.CursorKey, error) {
		mu.Lock()
		defer mu.Unlock()
		if key != nil {
			return key, nil
		}
		fail := func(err error) error {
			return &dshq.Error{Code: dshq.CodePersistenceFailed, Err: err,
				Message: fmt.Sprintf("the deployment's cursor key (%s in %s) cannot be read: %v", dshq.CursorKeyName, dshq.KeyBucket, err)}
		}
		kv, err := js.KeyValue(ctx, dshq.KeyBucket)
		if err != nil {
			return nil, fail(err)
		}
		e, err := kv.Get(ctx, dshq.CursorKeyName)
		if err != nil {
			return nil, fail(err)
		}
		k := wire.CursorKey(e.Value())
		if err := k.Check(); err != nil {
			return nil, fail(err)
		}
		key = k
		return k, nil
	}
}

// keyBucket binds the key bucket, creating it when missing.
func keyBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, dshq.KeyBucket)
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return kv, err
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      dshq.KeyBucket,
		Description: "dshq: deployment keys (the query cursors' MAC key)",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, dshq.KeyBucket)
	}
	return kv, err
}
