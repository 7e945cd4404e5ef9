package embedded

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestStart_SecondInstanceOnSameDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	startServer(t, Config{Dir: dir})
	_, err := Start(context.Background(), Config{Dir: dir})
	if !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second instance: %v, want ErrDataDirLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name the directory", err)
	}
}

func TestStart_ReleasesTheDirectoryOnShutdown(t *testing.T) {
	dir := t.TempDir()
	e, err := Start(context.Background(), Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	startServer(t, Config{Dir: dir})
}

func TestStart_Listeners(t *testing.T) {
	t.Run("an in-process server has no client URL but accepts in-process connections", func(t *testing.T) {
		e := startServer(t, Config{})
		if u := e.ClientURL(); u != "" {
			t.Fatalf("client URL %q, want none", u)
		}
		nc := connect(t, e)
		if !nc.IsConnected() {
			t.Fatal("not connected")
		}
	})
	t.Run("a listening server on port 0 gets a random port clients can dial", func(t *testing.T) {
		e := startServer(t, Config{Listen: "127.0.0.1:0"})
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
		for _, c := range []Config{
			{},
			{Dir: t.TempDir(), Listen: "nonsense"},
			{Dir: t.TempDir(), Listen: "127.0.0.1:99999"},
			{Dir: t.TempDir(), Sync: SyncPolicy(7)},
		} {
			if e, err := Start(context.Background(), c); err == nil {
				_ = e.Shutdown(context.Background())
				t.Fatalf("config %+v accepted", c)
			}
		}
	})
	t.Run("a Configure hook adjusts the server options", func(t *testing.T) {
		e := startServer(t, Config{Configure: func(o *server.Options) { o.MaxPayload = 2 << 20 }})
		if got := connect(t, e).MaxPayload(); got != 2<<20 {
			t.Fatalf("max payload %d", got)
		}
	})
	t.Run("relaxed sync starts", func(t *testing.T) {
		e := startServer(t, Config{Sync: SyncRelaxed, SyncInterval: time.Second})
		if e.NATSServer().JetStreamConfig() == nil {
			t.Fatal("no JetStream")
		}
	})
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// A nats-server file store can outlive its server's Shutdown by a
		// flush loop or ticker of its own (see bus's TestMain).
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*msgBlock).flushLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	)
}

// startServer starts a server in a fresh temp dir, shut down at the end of
// the test: testnats's Start, which this package's tests cannot import
// (testnats is built on it).
func startServer(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	e, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start embedded: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return e
}

// connect returns an in-process connection closed at the end of the test.
func connect(t testing.TB, e *Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := e.InProcessConn(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
