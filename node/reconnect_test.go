package node

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq/internal/testenv"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools/toolservice"
)

// serves waits until the node answers a query and a tool call over nc.
func serves(t *testing.T, nc *nats.Conn, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, qerr := query.NewClient(nc).ListSessions(ctx, dshq.SessionListRequest{})
		_, terr := toolservice.NewClient(nc, "s-7f3c").Call(ctx, "session_search", json.RawMessage(`{"query":"retry budget"}`))
		cancel()
		if qerr == nil && terr == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the node does not serve: query %v, tool %v", what, qerr, terr)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

func TestRun_AConnectionTheServerClosesIsReplacedAndTheNodeServesAgain(t *testing.T) {
	external := func(t *testing.T) natsconn.Options {
		return natsconn.Options{URL: testnats.Start(t, embedded.Config{Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed}).ClientURL()}
	}
	tests := []struct {
		name string
		conn func(*testing.T) natsconn.Options
	}{
		{"the embedded server and its in-process connection", func(*testing.T) natsconn.Options { return natsconn.Options{} }},
		{"a deployment at --nats-url", external},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conns := make(chan *nats.Conn, 4)
			logs := &testenv.Buffer{}
			n := start(t, Config{Home: t.TempDir(), Conn: tt.conn(t), Listen: "127.0.0.1:0", RelaxedSync: true, Parts: All,
				Logger: slog.New(slog.NewTextHandler(logs, nil)), onConnect: func(nc *nats.Conn) { conns <- nc }})
			client, js := dial(t, n.Info.ClientURL)
			publishSample(t, js)
			serves(t, client, "before")

			// The node's connection sends a subject past the server's
			// 4096-byte control-line limit: the server closes it, and
			// nats.go does not reconnect after that.
			first := <-conns
			if err := first.Publish(strings.Repeat("x", 5000), nil); err != nil {
				t.Fatal(err)
			}
			select {
			case second := <-conns:
				if second == first {
					t.Fatal("the node reused its closed connection")
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the node made no new connection; log:\n%s", logs)
			}
			if !first.IsClosed() {
				t.Fatal("the server did not close the connection")
			}
			serves(t, client, "after the server closed its connection")
			if l := logs.String(); !strings.Contains(l, "nats connection closed by the server") || !strings.Contains(l, "maximum control line exceeded") {
				t.Errorf("the log does not say why the node reconnected:\n%s", l)
			}
			if err := n.Stop(t); err != nil {
				t.Fatalf("stop: %v", err)
			}
		})
	}
}

func TestRun_ANodeWhoseCredentialsTheServerRefusesExitsWithTheReason(t *testing.T) {
	var opts *server.Options
	e := testnats.Start(t, embedded.Config{Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed,
		Configure: func(o *server.Options) {
			o.Users = []*server.User{{Username: "dshq", Password: "first"}}
			opts = o
		}})
	logs := &testenv.Buffer{}
	n := start(t, Config{Home: t.TempDir(), Conn: natsconn.Options{URL: e.ClientURL(), User: "dshq", Password: "first"},
		Parts: Parts{Query: true, Tools: true}, Logger: slog.New(slog.NewTextHandler(logs, nil))})

	// The operator changes the password: the server closes the node's
	// connection and refuses the old one from then on.
	changed := *opts
	changed.Users = []*server.User{{Username: "dshq", Password: "second"}}
	if err := e.NATSServer().ReloadOptions(&changed); err != nil {
		t.Fatal(err)
	}
	err := n.Wait(t)
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("node ended with %v, want an authorization violation", err)
	}
	if !strings.Contains(logs.String(), "nats connection closed by the server") {
		t.Errorf("the log does not say the connection closed:\n%s", logs)
	}
}
