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

// NewKVCursorStore creates or binds the KV bucket dshq.CursorBucket (memory
// storage, TTL CursorTTL).
func NewKVCursorStore(ctx context.Context, js jetstream.JetStream) (*KVCursorStore, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      dshq.CursorBucket,
		Description: "dshq: stored hits of paged searches",
		TTL:         CursorTTL,
		History:     1,
		Storage:     jetstream.MemoryStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("cursor bucket %s: %w", dshq.CursorBucket, err)
	}
	return &KVCursorStore{kv: kv}, nil
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
