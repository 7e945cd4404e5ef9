package toolservice_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// harnessPermissions is the deployment's harness credential (DESIGN.md,
// Security): publish session records and call the tools, never the trusted
// query API.
var harnessPermissions = &server.Permissions{
	Publish:   &server.SubjectPermission{Allow: []string{"dsh.log.>", "dsh.tools.v1.>"}},
	Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
}

// TestHarnessCredential proves that separation: a harness user can call
// dsh.tools.v1.* (as its session) but cannot reach dsh.query.v1.*, which a
// trusted user can.
func TestHarnessCredential(t *testing.T) {
	opts := &server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Users: []*server.User{
			{Username: "trusted", Password: "t"},
			{Username: "harness", Password: "h", Permissions: harnessPermissions},
		},
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	trusted, err := nats.Connect(srv.ClientURL(), nats.UserInfo("trusted", "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(trusted.Close)
	denied := make(chan error, 4)
	harness, err := nats.Connect(srv.ClientURL(), nats.UserInfo("harness", "h"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { denied <- err }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(harness.Close)

	tl, err := tools.New(corpus(t))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := toolservice.Serve(context.Background(), trusted, tl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	// A stand-in for the trusted API on its real subject.
	sub, err := trusted.Subscribe("dsh.query.v1.sessions.list", func(m *nats.Msg) { _ = m.Respond([]byte(`{"items":[]}`)) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := trusted.Flush(); err != nil {
		t.Fatal(err)
	}

	t.Run("the harness calls a tool as its session", func(t *testing.T) {
		r, err := toolservice.NewClient(harness, "me").Call(context.Background(), tools.NameSessionTrace, json.RawMessage(`{}`))
		if err != nil || r.IsError {
			t.Fatalf("err %v, reply %+v", err, r)
		}
	})
	t.Run("the harness cannot reach the trusted query API", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if _, err := harness.RequestWithContext(ctx, "dsh.query.v1.sessions.list", []byte(`{}`)); err == nil {
			t.Fatal("the harness got an answer from the trusted API")
		}
		select {
		case err := <-denied:
			if err == nil {
				t.Fatal("no permission violation reported")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no permission violation reported")
		}
	})
	t.Run("a trusted user reaches the query API", func(t *testing.T) {
		if _, err := trusted.Request("dsh.query.v1.sessions.list", []byte(`{}`), 5*time.Second); err != nil {
			t.Fatal(err)
		}
	})
}
