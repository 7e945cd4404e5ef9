// Package testnats starts the embedded nats-server with JetStream of one
// test, shut down when the test ends, and connections to it, closed then
// too. It is the first layer of the test stack (testenv adds the stream, a
// projector and dsh-query; tenanttest the users of tenant mode). The tests
// of the packages that stack is built from (bus, query, microhost,
// projection, feed) and of the processes that need only a server use it
// directly.
package testnats

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/dshq/dshq/embedded"
)

// Server is a test's embedded server.
type Server struct {
	*embedded.Server
}

// Start starts an embedded server with cfg (Dir defaults to a directory of
// t's own) and shuts it down when t ends, failing t if that fails. The
// zero Config is embedded's default: in-process only, sync_interval always;
// tests that need no power-loss durability ask for embedded.SyncRelaxed.
func Start(t testing.TB, cfg embedded.Config) *Server {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	e, err := embedded.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start embedded nats: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Shutdown(context.Background()); err != nil {
			t.Errorf("shut down embedded nats: %v", err)
		}
	})
	return &Server{Server: e}
}

// Conn returns an in-process connection (opts applied after the in-process
// option), closed when t ends.
func (s *Server) Conn(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := s.InProcessConn(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Dial returns a connection over the server's listener (Config.Listen must
// be set), closed when t ends.
func (s *Server) Dial(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	url := s.ClientURL()
	if url == "" {
		t.Fatal("dial: the server has no listener (set embedded.Config.Listen)")
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns the JetStream context of nc.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// Stragglers are the goroutines a nats-server file store can leave behind
// its server's Shutdown now and then (its state flush loop, the access-time
// ticker it registers, an idle message block's flush loop): the server's
// own, which nothing outside it can stop. Every other goroutine is still
// checked.
func Stragglers() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*msgBlock).flushLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	}
}

// VerifyNoLeaks runs the package's tests (call it from TestMain) and fails
// when a goroutine outlives them, but for the server's Stragglers and the
// extra ones the package names.
func VerifyNoLeaks(m *testing.M, extra ...goleak.Option) {
	goleak.VerifyTestMain(m, append(Stragglers(), extra...)...)
}
