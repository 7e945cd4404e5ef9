package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/shards"
)

func TestKVCursorStoreIsBoundedAndDropsTheOldestWhenFull(t *testing.T) {
	ctx := context.Background()
	js := testenv.Start(t, testenv.Unprovisioned()).JS
	const bound = 64 << 10
	store, err := shards.NewKVCursorStore(ctx, js, shards.WithCursorMaxBytes(bound))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "KV_"+dshq.CursorBucket)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.MaxBytes != bound || c.Discard != jetstream.DiscardOld {
		t.Fatalf("cursor bucket max bytes %d, discard %v; want %d, discard old", c.MaxBytes, c.Discard, bound)
	}
	value := bytes.Repeat([]byte("h"), 16<<10)
	for i := 0; i < 10; i++ { // 160 KiB into 64 KiB
		if err := store.Put(ctx, fmt.Sprintf("k%d", i), value); err != nil {
			t.Fatalf("put %d into a full bucket: %v", i, err)
		}
	}
	if _, err := store.Get(ctx, "k0"); !errors.Is(err, engine.ErrCursorExpired) {
		t.Fatalf("the oldest entry: %v, want ErrCursorExpired", err)
	}
	if got, err := store.Get(ctx, "k9"); err != nil || !bytes.Equal(got, value) {
		t.Fatalf("the newest entry: %d bytes, %v", len(got), err)
	}
	// The default, again on a bucket that exists.
	if _, err := shards.NewKVCursorStore(ctx, js); err != nil {
		t.Fatal(err)
	}
	st, _ = js.Stream(ctx, "KV_"+dshq.CursorBucket)
	if c := st.CachedInfo().Config; c.MaxBytes != shards.DefaultCursorMaxBytes || c.Discard != jetstream.DiscardOld {
		t.Fatalf("cursor bucket max bytes %d, discard %v; want the default, discard old", c.MaxBytes, c.Discard)
	}
}
