package engine

import (
	"context"
	"sync"
	"time"
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

func msDuration(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }
