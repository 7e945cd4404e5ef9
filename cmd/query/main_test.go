package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
			done <- run(ctx, []string{"--nats-url", e.ClientURL(), "--metrics", "127.0.0.1:0"}, ready)
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
		// dsh-tools is served beside it (a micro PING answers).
		if _, err := nc.Request("$SRV.PING."+dshq.ToolsService, nil, 20*time.Second); err != nil {
			t.Fatalf("ping %s: %v", dshq.ToolsService, err)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("run = %v", err)
		}
	})
	t.Run("with --no-tools dsh-query is served alone", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan string, 1)
		done := make(chan error, 1)
		go func() { done <- run(ctx, []string{"--nats-url", e.ClientURL(), "--no-tools"}, ready) }()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("run ended early: %v", err)
		}
		nc := e.Dial(t)
		if _, err := nc.Request("$SRV.PING."+dshq.QueryService, nil, 20*time.Second); err != nil {
			t.Fatalf("ping %s: %v", dshq.QueryService, err)
		}
		if _, err := nc.Request("$SRV.PING."+dshq.ToolsService, nil, 20*time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("ping %s with --no-tools: %v, want no responders", dshq.ToolsService, err)
		}
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("run = %v", err)
		}
	})
	t.Run("the spill bucket has --replicas replicas", func(t *testing.T) {
		// One server cannot hold three replicas: the bucket is refused,
		// which shows that the flag reaches it.
		err := run(context.Background(), []string{"--nats-url", e.ClientURL(), "--replicas", "3"}, nil)
		if err == nil || !strings.Contains(err.Error(), "spill bucket") {
			t.Fatalf("run --replicas 3 on one server = %v", err)
		}
	})
	t.Run("the shared flags have one name each", func(t *testing.T) {
		err := run(context.Background(), []string{"--metrics-addr", "127.0.0.1:0"}, nil)
		if err == nil || !strings.Contains(err.Error(), "metrics-addr") {
			t.Fatalf("run --metrics-addr = %v, want it refused (the flag is --metrics, as the projector's)", err)
		}
	})
}
