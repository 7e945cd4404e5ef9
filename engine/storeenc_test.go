package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/internal/testenv"
)

// TestStoredKeysAreEncodedAsEncodingJSONWould: the direct encoding of
// stored keys and sessions writes what encoding/json writes, whatever the
// session id holds.
func TestStoredKeysAreEncodedAsEncodingJSONWould(t *testing.T) {
	ids := []struct{ name, id string }{
		{"a plain id", "bench-00042"},
		{"an empty id", ""},
		{"a quote and a backslash", `a"b\c`},
		{"HTML characters", "<a>&b"},
		{"control characters", "a\x00b\tc\n\x7f"},
		{"non-ASCII text", "会话-é"},
		{"invalid UTF-8", "a\xffb\xc3"},
		{"a line separator", "a\u2028b"},
	}
	for _, tt := range ids {
		t.Run(tt.name, func(t *testing.T) {
			keys := []HitKey{{SessionID: tt.id, Seq: 7, Gen: 12, Live: true}, {SessionID: tt.id, Seq: -1}, {SessionID: tt.id, Seq: 1 << 53, Gen: 1<<64 - 1}}
			elems, err := encodeElems(keys)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range keys {
				want, _ := json.Marshal(k)
				if !bytes.Equal(elems[i], want) {
					t.Fatalf("key %d: %s, want %s", i, elems[i], want)
				}
			}
			sessions := []string{tt.id, "x", tt.id}
			want, _ := json.Marshal(sessions)
			if got := appendJSONStrings(nil, sessions); !bytes.Equal(got, want) {
				t.Fatalf("sessions: %s, want %s", got, want)
			}
		})
	}
	t.Run("no sessions are an empty array", func(t *testing.T) {
		if got := string(appendJSONStrings(nil, nil)); got != "[]" {
			t.Fatalf("got %s", got)
		}
	})
	t.Run("the meta reads back with its sessions", func(t *testing.T) {
		b, err := json.Marshal(storedMeta{searchMeta: searchMeta{Starts: []int64{3}, Keys: true}, Sessions: appendJSONStrings(nil, []string{"a", "b"})})
		if err != nil {
			t.Fatal(err)
		}
		var m searchMeta
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Sessions) != 2 || m.Sessions[1] != "b" || len(m.Starts) != 1 || !m.Keys {
			t.Fatalf("read back %+v from %s", m, b)
		}
	})
}

// kvPuts is the put path of a CursorStore in a JetStream KV bucket (as
// package shardhost's): what BenchmarkStoreKeys times.
type kvPuts struct{ kv jetstream.KeyValue }

func (s kvPuts) Put(ctx context.Context, key string, value []byte) error {
	_, err := s.kv.Put(ctx, key, value)
	return err
}

func (s kvPuts) Get(context.Context, string) ([]byte, error) { return nil, ErrCursorExpired }

// BenchmarkStoreKeys stores a first page's window of 10 000 keys (and its
// 10 000 sessions) in a JetStream KV bucket of memory storage, as a common
// phrase's first page does in the cursor bucket:
//
//	go test -run '^$' -bench StoreKeys -benchtime 200x ./engine/
func BenchmarkStoreKeys(b *testing.B) {
	env := testenv.Start(b)
	kv, err := env.JS.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "BENCH_CURSORS", Storage: jetstream.MemoryStorage})
	if err != nil {
		b.Fatal(err)
	}
	e := &Engine{store: kvPuts{kv}, maxResults: MaxSearchResults}
	keys := make([]HitKey, MaxSearchResults)
	sessions := make([]string, len(keys))
	for i := range keys {
		keys[i] = HitKey{SessionID: fmt.Sprintf("bench-%05d", i), Seq: int64(i % 60), Live: i%7 == 0}
		sessions[i] = keys[i].SessionID
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := e.storeHits(context.Background(), keys, 20, sessions, searchMeta{Truncated: true, Keys: true}); err != nil {
			b.Fatal(err)
		}
	}
}
