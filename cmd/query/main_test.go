package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/query/wire"
)

func TestMain(m *testing.M) { testnats.VerifyNoLeaks(m) }

func TestRun(t *testing.T) {
	e := testnats.Start(t, embedded.Config{Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed})

	t.Run("a bad flag is an error", func(t *testing.T) {
		if err := run(context.Background(), []string{"--log-level", "loud"}, nil); err == nil || !strings.Contains(err.Error(), "--log-level") {
			t.Fatalf("run = %v", err)
		}
	})
	t.Run("an unreachable server is an error", func(t *testing.T) {
		err := run(context.Background(), []string{"--nats-url", "nats://127.0.0.1:1"}, nil)
		if err == nil || !strings.Contains(err.Error(), "connect to nats://127.0.0.1:1") {
			t.Fatalf("run = %v", err)
		}
	})
	t.Run("the service answers until the context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"--nats-url", e.ClientURL(), "--metrics-addr", "127.0.0.1:0"}, ready)
		}()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("run ended early: %v", err)
		case <-time.After(20 * time.Second):
			t.Fatal("service did not start")
		}
		nc := e.Dial(t)
		// No projector is running: the request fails with a clear code.
		msg, err := nc.Request(dshq.QuerySubjectPrefix+"."+wire.EndpointSessionsList, []byte(`{}`), 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := msg.Header.Get(micro.ErrorCodeHeader); got != "SESSION_QUERY_PERSISTENCE_FAILED" {
			t.Fatalf("code %q, body %s", got, msg.Data)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("run = %v", err)
		}
	})
}
