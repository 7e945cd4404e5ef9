package bus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

func TestEnsureStream(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	js, err := jetstream.New(e.Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("creating twice is idempotent and sets the contract's configuration", func(t *testing.T) {
		for range 2 {
			st, err := EnsureStream(ctx, js, StreamConfig{})
			if err != nil {
				t.Fatal(err)
			}
			c := st.CachedInfo().Config
			if c.Name != dshq.SessionStream || c.Subjects[0] != dshq.LogSubjects || c.Storage != jetstream.FileStorage ||
				!c.AllowAtomicPublish || !c.DenyDelete || !c.DenyPurge || c.Duplicates != DefaultDuplicates {
				t.Fatalf("config %+v", c)
			}
		}
	})
	t.Run("an existing stream with other subjects and storage is a conflict naming both", func(t *testing.T) {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}, Storage: jetstream.MemoryStorage})
		if err != nil {
			t.Fatal(err)
		}
		_, err = EnsureStream(ctx, js, StreamConfig{Name: "OTHER"})
		if !errors.Is(err, ErrStreamConflict) {
			t.Fatalf("got %v, want ErrStreamConflict", err)
		}
		for _, part := range []string{"subjects is [other.>], want [dsh.log.>]", "storage is Memory", "deny_purge"} {
			if !strings.Contains(err.Error(), part) {
				t.Fatalf("error %q does not name %q", err, part)
			}
		}
		info, _ := js.Stream(ctx, "OTHER")
		if info.CachedInfo().Config.Subjects[0] != "other.>" {
			t.Fatal("conflicting stream was updated")
		}
	})
	t.Run("a lease bucket with another TTL is a conflict", func(t *testing.T) {
		_, err := EnsureLeaseBucket(ctx, js, StreamConfig{LeaseTTL: time.Minute})
		if !errors.Is(err, ErrStreamConflict) || !strings.Contains(err.Error(), "ttl is 15s, want 1m0s") {
			t.Fatalf("got %v", err)
		}
	})
}
