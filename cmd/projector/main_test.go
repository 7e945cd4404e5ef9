package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/internal/testnats"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

func TestRun_ProjectsServesQueriesAndMetricsUntilCancelled(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t, testenv.Listen())
	nc := env.Server.Dial(t)
	js := testnats.JetStream(t, nc)
	f, err := os.Open("../../projection/testdata/upstream-2.5.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last uint64
	for sc := bufio.NewScanner(f); sc.Scan(); {
		last = env.Publish(t, "dsh.log.s-7f3c", bytes.Clone(sc.Bytes()))
	}

	runCtx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"--nats-url", env.URL(), "--data", t.TempDir(), "--metrics", "127.0.0.1:0", "--log-level", "warn"}, io.Discard, ready)
	}()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("run failed: %v", err)
	}

	// The shard answers with the generation it has applied.
	deadline := time.Now().Add(20 * time.Second)
	for {
		body, _ := json.Marshal(map[string]any{"minGeneration": last, "timeoutMs": 5000})
		msg, err := nc.Request(dshq.ShardSubject(dshq.DefaultShard, "sessions.list"), body, 10*time.Second)
		if err == nil && strings.Contains(string(msg.Data), `"s-7f3c"`) {
			var reply struct{ Generation uint64 }
			if err := json.Unmarshal(msg.Data, &reply); err != nil || reply.Generation < last {
				t.Fatalf("reply %s: generation below %d", msg.Data, last)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sessions.list answer with the session: %v", err)
		}
	}
	// The split projector serves dsh-admin and publishes the live feed.
	status, err := admin.NewClient(nc).Status(ctx)
	if err != nil || status.Generation != last {
		t.Errorf("admin status = %+v, %v; want generation %d", status, err, last)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		cp, err := feed.NewPublisher(js).Checkpoint(ctx)
		if err == nil && cp.Generation == last {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("feed checkpoint %+v (%v), want generation %d", cp, err, last)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"dshq_projector_generation 19", `dshq_projector_records_applied_total{kind="event"} 18`, "dshq_projector_index_docs 7"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not stop")
	}
}

func TestRun_RefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a missing data directory is refused", []string{"--nats-url", "nats://127.0.0.1:1"}, "--data is required"},
		{"stray arguments are refused", []string{"--data", "x", "extra"}, "unexpected arguments"},
		{"an unknown log level is refused", []string{"--data", "x", "--log-level", "loud"}, "--log-level"},
		{"a TLS cert without its key is refused", []string{"--data", "x", "--tls-cert", "c.pem"}, "go together"},
		{"a batch size below one is refused", []string{"--data", "x", "--batch-size", "0", "--nats-url", "nats://127.0.0.1:1"}, "batch size"},
		{"a shard out of its partitioning is refused", []string{"--data", "x", "--shard", "2", "--shards", "2", "--no-feed"}, "--shard 2 --shards 2"},
		{"a partitioned projector with the feed is refused", []string{"--data", "x", "--shard", "0", "--shards", "2"}, "--no-feed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := run(context.Background(), c.args, io.Discard, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

// TestRun_ServesItsShard: a partitioned projector projects only its
// shard's sessions and serves them on its partitioning's own subjects,
// never on the unpartitioned shard's.
func TestRun_ServesItsShard(t *testing.T) {
	env := testenv.Start(t, testenv.Listen())
	nc := env.Server.Dial(t)
	ids := map[int]string{}
	for i := 0; len(ids) < 2; i++ {
		id := fmt.Sprintf("s-%d", i)
		if _, ok := ids[dshq.ShardOf(id, 2)]; ok {
			continue
		}
		ids[dshq.ShardOf(id, 2)] = id
		env.PublishLog(t, []byte(fmt.Sprintf(`{"type":"session","version":2,"id":%q,"createdAt":1,"isSeeded":false}`, id)))
	}
	runCtx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"--nats-url", env.URL(), "--data", t.TempDir(), "--shard", "1", "--shards", "2", "--no-feed", "--log-level", "warn"}, io.Discard, ready)
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run failed: %v", err)
	}
	body, _ := json.Marshal(map[string]any{"minGeneration": env.Last(), "timeoutMs": 5000})
	// The shard's subscriptions may reach the server after ready: no
	// responders is retried.
	var msg *nats.Msg
	var err error
	for deadline := time.Now().Add(20 * time.Second); ; {
		msg, err = nc.Request(dshq.ShardSubject(dshq.ShardToken(1, 2), "sessions.list"), body, 20*time.Second)
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(msg.Data), strconv.Quote(ids[1])) || strings.Contains(string(msg.Data), strconv.Quote(ids[0])) {
		t.Errorf("shard 1of2 lists %s; want %s alone", msg.Data, ids[1])
	}
	if _, err := nc.Request(dshq.ShardSubject(dshq.DefaultShard, "sessions.list"), body, time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("the unpartitioned shard answered (%v): a partitioned projector must not serve it", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
}
