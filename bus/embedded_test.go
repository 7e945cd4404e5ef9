package bus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestStartEmbedded_SecondInstanceOnSameDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	startServer(t, EmbeddedConfig{Dir: dir})
	_, err := StartEmbedded(context.Background(), EmbeddedConfig{Dir: dir})
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second instance: %v, want ErrDataDirLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name the directory", err)
	}
}

func TestStartEmbedded_ReleasesTheDirectoryOnShutdown(t *testing.T) {
	dir := t.TempDir()
	e, err := StartEmbedded(context.Background(), EmbeddedConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	startServer(t, EmbeddedConfig{Dir: dir})
}

func TestStartEmbedded_Listeners(t *testing.T) {
	t.Run("an in-process server has no client URL but accepts in-process connections", func(t *testing.T) {
		e := startServer(t, EmbeddedConfig{})
		if u := e.ClientURL(); u != "" {
			t.Fatalf("client URL %q, want none", u)
		}
		nc := connect(t, e)
		if !nc.IsConnected() {
			t.Fatal("not connected")
		}
	})
	t.Run("a listening server on port 0 gets a random port clients can dial", func(t *testing.T) {
		e := startServer(t, EmbeddedConfig{Listen: "127.0.0.1:0"})
		u := e.ClientURL()
		if !strings.HasPrefix(u, "nats://127.0.0.1:") || strings.HasSuffix(u, ":0") {
			t.Fatalf("client URL %q", u)
		}
		nc, err := nats.Connect(u)
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
	})
	t.Run("bad configurations are refused", func(t *testing.T) {
		for _, c := range []EmbeddedConfig{
			{},
			{Dir: t.TempDir(), Listen: "nonsense"},
			{Dir: t.TempDir(), Listen: "127.0.0.1:99999"},
			{Dir: t.TempDir(), Sync: SyncPolicy(7)},
		} {
			if e, err := StartEmbedded(context.Background(), c); err == nil {
				_ = e.Shutdown(context.Background())
				t.Fatalf("config %+v accepted", c)
			}
		}
	})
	t.Run("a Configure hook adjusts the server options", func(t *testing.T) {
		e := startServer(t, EmbeddedConfig{Configure: func(o *server.Options) { o.MaxPayload = 2 << 20 }})
		if got := connect(t, e).MaxPayload(); got != 2<<20 {
			t.Fatalf("max payload %d", got)
		}
	})
	t.Run("relaxed sync starts", func(t *testing.T) {
		e := startServer(t, EmbeddedConfig{Sync: SyncRelaxed, SyncInterval: time.Second})
		if e.Server().JetStreamConfig() == nil {
			t.Fatal("no JetStream")
		}
	})
}

func TestEnsureStream(t *testing.T) {
	e := startServer(t, EmbeddedConfig{})
	ctx := testCtx(t)
	js, err := jetstream.New(connect(t, e))
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
			if c.Name != DefaultStreamName || c.Subjects[0] != StreamSubjects || c.Storage != jetstream.FileStorage ||
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
