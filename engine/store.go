package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
)

// CursorTTL is how long the stored hits of a paged search are kept.
const CursorTTL = time.Hour

// MemoryCursorStore is a CursorStore in this process's memory: for a single
// process and for tests.
type MemoryCursorStore struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex // guards entries
	entries map[string]memEntry
}

type memEntry struct {
	value   []byte
	expires time.Time
}

// NewMemoryCursorStore returns a MemoryCursorStore that keeps values for ttl.
func NewMemoryCursorStore(ttl time.Duration) *MemoryCursorStore {
	return &MemoryCursorStore{ttl: ttl, now: time.Now, entries: map[string]memEntry{}}
}

// Put stores value under key.
func (s *MemoryCursorStore) Put(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, e := range s.entries {
		if now.After(e.expires) {
			delete(s.entries, k)
		}
	}
	s.entries[key] = memEntry{value: value, expires: now.Add(s.ttl)}
	return nil
}

// Get returns the value under key or ErrCursorExpired.
func (s *MemoryCursorStore) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok || s.now().After(e.expires) {
		return nil, ErrCursorExpired
	}
	return e.value, nil
}

// KVCursorStore is a CursorStore in a JetStream KV bucket, so any replica
// of a shard can continue any cursor.
type KVCursorStore struct {
	kv jetstream.KeyValue
}

// DefaultCursorMaxBytes bounds the memory of the cursor bucket.
const DefaultCursorMaxBytes = 128 << 20

// KVCursorOption configures NewKVCursorStore.
type KVCursorOption func(*jetstream.KeyValueConfig)

// WithCursorMaxBytes bounds the cursor bucket's memory (bytes;
// DefaultCursorMaxBytes when 0, no bound when negative). When it is full,
// the oldest stored hits go first: a cursor that needed them then reports
// SESSION_QUERY_STALE_CURSOR, as after CursorTTL.
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

// NewKVCursorStore creates or binds the KV bucket dshq.CursorBucket (memory
// storage, TTL CursorTTL, DefaultCursorMaxBytes), and sets it to drop its
// oldest entries when full rather than refuse new ones.
func NewKVCursorStore(ctx context.Context, js jetstream.JetStream, opts ...KVCursorOption) (*KVCursorStore, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket:      dshq.CursorBucket,
		Description: "dshq: stored hits of paged searches",
		TTL:         CursorTTL,
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
	return &KVCursorStore{kv: kv}, nil
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

// Put stores value under key.
func (s *KVCursorStore) Put(ctx context.Context, key string, value []byte) error {
	_, err := s.kv.Put(ctx, key, value)
	return err
}

// Get returns the value under key or ErrCursorExpired.
func (s *KVCursorStore) Get(ctx context.Context, key string) ([]byte, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrCursorExpired
	}
	if err != nil {
		return nil, err
	}
	return e.Value(), nil
}

func msDuration(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
