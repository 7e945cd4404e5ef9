package testenv_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/projection"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

func TestStack(t *testing.T) {
	env := testenv.Start(t, testenv.Listen())
	log, err := os.ReadFile("../../testdata/sample.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	id, last := env.PublishLog(t, log)
	if id != "s-7f3c" || last != env.Last() || last < 2 {
		t.Fatalf("published %q up to %d (last %d)", id, last, env.Last())
	}
	p := env.StartProjector(t)
	env.SetLease(t, "", id, true)
	testenv.WaitGeneration(t, p, last)

	t.Run("a log published twice is refused as a harness's would be", func(t *testing.T) {
		_, err := env.JS.Publish(context.Background(), dshq.LogSubjectPrefix+"s-7f3c", []byte(`{}`),
			jetstream.WithExpectLastSequencePerSubject(1))
		if err == nil {
			t.Fatal("a record expecting a stale subject sequence was stored")
		}
	})
	t.Run("the projector holds the session, live", func(t *testing.T) {
		deadline := time.Now().Add(testenv.WaitTimeout)
		for {
			var live, ok bool
			err := p.View(context.Background(), last, func(s projection.Snapshot) error {
				_, ok = s.Session(id)
				live = s.IsLive(id)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if ok && live {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("session stored %v, live %v", ok, live)
			}
			time.Sleep(5 * time.Millisecond) // poll interval, not a wait for a condition
		}
	})
	t.Run("dsh-query answers, and without a shard says the projection is unreachable", func(t *testing.T) {
		c := env.ServeQuery(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.ListSessions(ctx, dshq.SessionListRequest{})
		var de *dshq.Error
		if !errors.As(err, &de) || de.Code != dshq.CodePersistenceFailed {
			t.Fatalf("list sessions: %v", err)
		}
	})
	t.Run("a client dials the listener", func(t *testing.T) {
		if nc := env.Server.Dial(t); !nc.IsConnected() {
			t.Fatal("not connected")
		}
	})
}
