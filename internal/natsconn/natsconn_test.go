package natsconn

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

func TestConnect(t *testing.T) {
	url := testnats.Start(t, embedded.Config{
		Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed,
		Configure: func(o *server.Options) {
			o.Users = []*server.User{{Username: "trusted", Password: "s3cret"}}
		},
	}).ClientURL()

	t.Run("the right user and password connect, named and reconnecting forever", func(t *testing.T) {
		nc, err := Connect(Options{URL: url, Name: "dshq-test", User: "trusted", Password: "s3cret"})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if got := nc.Opts.Name; got != "dshq-test" {
			t.Fatalf("name %q", got)
		}
		if nc.Opts.MaxReconnect != -1 || nc.Opts.ReconnectWait != ReconnectWait {
			t.Fatalf("reconnect %d every %v; want forever every %v", nc.Opts.MaxReconnect, nc.Opts.ReconnectWait, ReconnectWait)
		}
	})
	t.Run("a connection without a name is called dshq", func(t *testing.T) {
		nc, err := Connect(Options{URL: url, User: "trusted", Password: "s3cret"})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if nc.Opts.Name != "dshq" {
			t.Fatalf("name %q", nc.Opts.Name)
		}
	})
	t.Run("an inbox prefix is the connection's", func(t *testing.T) {
		nc, err := Connect(Options{URL: url, User: "trusted", Password: "s3cret", InboxPrefix: "_INBOX_t1"})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if in := nc.NewInbox(); !strings.HasPrefix(in, "_INBOX_t1.") {
			t.Fatalf("inbox %q", in)
		}
	})
	t.Run("a wrong password is refused, naming the URL", func(t *testing.T) {
		_, err := Connect(Options{URL: url, User: "trusted", Password: "nope"})
		if !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "connect to "+url) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("bad options fail before dialling", func(t *testing.T) {
		for name, o := range map[string]Options{
			"no URL":              {},
			"a cert without key":  {URL: url, TLSCert: "cert.pem"},
			"a key without cert":  {URL: url, TLSKey: "key.pem"},
			"a missing nkey seed": {URL: url, NKey: t.TempDir() + "/none.nk"},
		} {
			if nc, err := Connect(o); err == nil {
				nc.Close()
				t.Fatalf("%s: connected", name)
			}
		}
	})
	t.Run("Drain closes the connection", func(t *testing.T) {
		nc, err := Connect(Options{URL: url, User: "trusted", Password: "s3cret"})
		if err != nil {
			t.Fatal(err)
		}
		// Closed by the drain, however long this machine takes: the wait
		// is bounded by the test binary's deadline only.
		wait := time.Hour
		if d, ok := t.Deadline(); ok {
			wait = time.Until(d)
		}
		if drained := drain(nc, wait); !drained || !nc.IsClosed() {
			t.Fatalf("drained %v (false: closed by the timeout or a failure), closed %v", drained, nc.IsClosed())
		}
	})
}

func TestRedactedHidesCredentialsInURLs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://trusted:secret@n1:4222,nats://n2:4222", "nats://trusted:xxxxx@n1:4222,nats://n2:4222"},
		{"nats://s3cr3t-token@n1:4222", "nats://xxxxx@n1:4222"},
	}
	for _, tt := range tests {
		if got := Redacted(tt.in); got != tt.want {
			t.Errorf("Redacted(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
