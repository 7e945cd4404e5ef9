package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/feed/feedcommit"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/internal/testnats"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// start runs cfg until the test ends (or Stop); it fails the test when the
// node does not become ready.
func start(t *testing.T, cfg Config) *testenv.Running[Info] {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testenv.Quiet()
	}
	return testenv.RunUntilReady(t, func(ctx context.Context, ready func(Info)) error { return Run(ctx, cfg, ready) })
}

// dial connects to url for the test's duration.
func dial(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js.Conn(), js
}

// publishSample publishes the sample session's records and returns them.
func publishSample(t *testing.T, js jetstream.JetStream) [][]byte {
	t.Helper()
	f, err := os.Open("../projection/testdata/upstream-2.5.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
		if _, err := js.Publish(context.Background(), "dsh.log.s-7f3c", sc.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return lines
}

func TestRun_EmbeddedServesMetricsAndStopsCleanly(t *testing.T) {
	n := start(t, Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Metrics: "127.0.0.1:0", Parts: All})
	if !n.Info.Embedded || !strings.HasPrefix(n.Info.ClientURL, "nats://127.0.0.1:") || !strings.HasSuffix(n.Info.MetricsURL, "/metrics") {
		t.Fatalf("ready info %+v", n.Info)
	}
	_, js := dial(t, n.Info.ClientURL)
	publishSample(t, js)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(n.Info.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "dshq_projector_generation 19") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never reported generation 19:\n%s", body)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if err := n.Stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func TestRun_ExternalServerIsUsedAsIs(t *testing.T) {
	e := testnats.Start(t, embedded.Config{Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed})
	n := start(t, Config{Home: t.TempDir(), Conn: natsconn.Options{URL: e.ClientURL()}, Parts: Parts{Projector: true, Query: true}})
	if n.Info.Embedded || n.Info.ClientURL != e.ClientURL() {
		t.Fatalf("ready info %+v, want the external server %s", n.Info, e.ClientURL())
	}
	_, js := dial(t, e.ClientURL())
	// The node provisioned the streams on the external server.
	for _, name := range []string{"DSH_SESSIONS", dshq.FeedStream} {
		if _, err := js.Stream(context.Background(), name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	if err := n.Stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func TestRun_StopsWithTheErrorOfAFailingPart(t *testing.T) {
	t.Run("a metrics address that cannot be bound fails the start", func(t *testing.T) {
		err := Run(context.Background(), Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Metrics: "256.0.0.1:1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
		if err == nil || !strings.Contains(err.Error(), "metrics listener") {
			t.Fatalf("err = %v, want a metrics listener error", err)
		}
	})
	t.Run("a negative fold cache is refused", func(t *testing.T) {
		err := Run(context.Background(), Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Parts: Parts{Projector: true}, Projection: ProjectionConfig{FoldCacheBytes: -1}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
		if err == nil || !strings.Contains(err.Error(), "negative") {
			t.Fatalf("err = %v, want a negative fold cache error", err)
		}
	})
	t.Run("a part failing while running stops the node with its error", func(t *testing.T) {
		errKilled := fmt.Errorf("killed between commit and publish: %w", feedcommit.ErrStop)
		n := start(t, Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Parts: Parts{Projector: true},
			feedFault: func(uint64) error { return errKilled }})
		_, js := dial(t, n.Info.ClientURL)
		publishSample(t, js)
		if err := n.Wait(t); !errors.Is(err, errKilled) {
			t.Fatalf("node stopped with %v, want %v", err, errKilled)
		}
	})
}

func TestRun_FeedHasEveryCommitOnceAfterACrashBeforePublishing(t *testing.T) {
	home := t.TempDir()
	errKilled := fmt.Errorf("killed between commit and publish: %w", feedcommit.ErrStop)
	base := Config{Home: home, Listen: "127.0.0.1:0", RelaxedSync: true, Parts: Parts{Projector: true}, Projection: ProjectionConfig{BatchSize: 3}}

	// First life: commits through generation 6 reach the feed, the commit
	// after that is in bbolt but the process dies before publishing it.
	crashing := base
	crashing.feedFault = func(gen uint64) error {
		if gen > 6 {
			return errKilled
		}
		return nil
	}
	n := start(t, crashing)
	_, js := dial(t, n.Info.ClientURL)
	lines := publishSample(t, js)
	if err := n.Wait(t); !errors.Is(err, errKilled) {
		t.Fatalf("first life ended with %v, want %v", err, errKilled)
	}

	// Second life: the feed catches up to the projection, then follows.
	n = start(t, base)
	_, js = dial(t, n.Info.ClientURL)
	want := uint64(len(lines))
	pub := feed.NewPublisher(js)
	deadline := time.Now().Add(20 * time.Second)
	for {
		cp, err := pub.Checkpoint(context.Background())
		if err == nil && cp.Generation == want && !cp.Partial {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("feed checkpoint %+v (%v), want generation %d", cp, err, want)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	events := map[int64]int{}
	sessions := 0
	for _, m := range readFeed(t, js) {
		switch m.Kind {
		case feed.KindSession:
			sessions++
		case feed.KindEvent:
			events[m.Event.Seq]++
		}
	}
	if sessions != 1 {
		t.Errorf("%d session messages, want 1", sessions)
	}
	for seq := int64(0); seq < int64(len(lines)-1); seq++ {
		if events[seq] != 1 {
			t.Errorf("event %d is in the feed %d times, want once", seq, events[seq])
		}
	}
	if len(events) != len(lines)-1 {
		t.Errorf("%d distinct events in the feed, want %d", len(events), len(lines)-1)
	}
}

// readFeed returns every message of the feed stream.
func readFeed(t *testing.T, js jetstream.JetStream) []feed.Message {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, dshq.FeedStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []feed.Message
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("feed message %d: %v", seq, err)
		}
		m, err := feed.Decode(raw.Data)
		if err != nil {
			t.Fatalf("feed message %d: %v", seq, err)
		}
		out = append(out, *m)
	}
	return out
}

func TestRun_AFailedPublicationIsRepublishedWithTheNextCommit(t *testing.T) {
	failed := make(chan uint64, 1)
	cfg := Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Parts: Parts{Projector: true}, Projection: ProjectionConfig{BatchSize: 3},
		feedFault: func(gen uint64) error {
			if gen > 4 {
				select {
				case failed <- gen: // the first commit past 4 fails once
					return errors.New("injected feed publication failure")
				default:
				}
			}
			return nil
		}}
	n := start(t, cfg)
	_, js := dial(t, n.Info.ClientURL)
	lines := publishSample(t, js)
	want := uint64(len(lines))
	pub := feed.NewPublisher(js)
	deadline := time.Now().Add(20 * time.Second)
	for {
		cp, err := pub.Checkpoint(context.Background())
		if err == nil && cp.Generation == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("feed checkpoint %+v (%v), want generation %d", cp, err, want)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if len(failed) != 1 {
		t.Fatal("no publication failed")
	}
	events := map[int64]int{}
	for _, m := range readFeed(t, js) {
		if m.Kind == feed.KindEvent {
			events[m.Event.Seq]++
		}
	}
	for seq := int64(0); seq < int64(len(lines)-1); seq++ {
		if events[seq] != 1 {
			t.Errorf("event %d is in the feed %d times, want once", seq, events[seq])
		}
	}
}

// publishAs publishes the sample session's records as session id and
// returns the stream sequence of the last.
func publishAs(t *testing.T, js jetstream.JetStream, id string) uint64 {
	t.Helper()
	data, err := os.ReadFile("../projection/testdata/upstream-2.5.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
		line := strings.Replace(sc.Text(), `"id":"s-7f3c"`, `"id":"`+id+`"`, 1)
		ack, err := js.Publish(context.Background(), "dsh.log."+id, []byte(line))
		if err != nil {
			t.Fatal(err)
		}
		last = ack.Sequence
	}
	return last
}

// waitFeed waits until the feed's checkpoint is generation gen, complete.
func waitFeed(t *testing.T, js jetstream.JetStream, gen uint64) {
	t.Helper()
	pub := feed.NewPublisher(js)
	deadline := time.Now().Add(20 * time.Second)
	for {
		cp, err := pub.Checkpoint(context.Background())
		if err == nil && cp.Generation == gen && !cp.Partial {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("feed checkpoint %+v (%v), want generation %d", cp, err, gen)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
}

// The reproduction: a projection rebuilt from the stream (its
// directory lost), a rebuild swapped in, then plain restarts, with a
// duplicate window every restart outlasts.
func TestRun_TheFeedNeitherDropsNorRepeatsAcrossRebuildsAndRestarts(t *testing.T) {
	home := t.TempDir()
	const window = 100 * time.Millisecond
	logs := &testenv.Buffer{}
	base := Config{Home: home, Listen: "127.0.0.1:0", RelaxedSync: true, Parts: Parts{Projector: true},
		Projection: ProjectionConfig{BatchSize: 3}, Feed: FeedConfig{Duplicates: window},
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	n := start(t, base)
	_, js := dial(t, n.Info.ClientURL)
	waitFeed(t, js, publishAs(t, js, "s-a"))
	n.Stop(t)

	if err := os.RemoveAll(filepath.Join(home, "projection")); err != nil {
		t.Fatal(err)
	}
	rebuilt := base
	rebuilt.Projection = ProjectionConfig{BatchSize: 7, RebuildOnStart: true}
	n = start(t, rebuilt)
	_, js = dial(t, n.Info.ClientURL)
	waitFeed(t, js, publishAs(t, js, "s-b"))
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "rebuilt projection swapped in") {
		if time.Now().After(deadline) {
			t.Fatalf("the rebuild was not swapped in:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	n.Stop(t)

	for i := 0; i < 3; i++ {
		time.Sleep(window) // what the feed holds is outside the duplicate window
		mark := len(logs.String())
		n = start(t, base)
		_, js = dial(t, n.Info.ClientURL)
		msgs := readFeed(t, js)
		n.Stop(t)
		if l := logs.String()[mark:]; strings.Contains(l, "published the changes") || strings.Contains(l, "re-published") {
			t.Errorf("plain restart %d published again:\n%s", i+1, l)
		}
		checkOnce(t, msgs, "s-a", "s-b")
	}
}

// checkOnce checks that msgs hold each session's session message and
// events exactly once, in non-decreasing feed order.
func checkOnce(t *testing.T, msgs []feed.Message, ids ...string) {
	t.Helper()
	count := map[string]int{}
	var key uint64
	for i, m := range msgs {
		k := 2 * m.Generation
		if m.Kind == feed.KindLease {
			k++
		}
		if k < key {
			t.Errorf("feed message %d at generation %d after key %d: generations decreased", i, m.Generation, key)
		}
		key = k
		switch m.Kind {
		case feed.KindSession:
			count[m.SessionID+" session"]++
		case feed.KindEvent:
			count[fmt.Sprintf("%s event %d", m.SessionID, m.Event.Seq)]++
		}
	}
	for _, id := range ids {
		want := []string{id + " session"}
		for seq := 0; seq < 18; seq++ {
			want = append(want, fmt.Sprintf("%s event %d", id, seq))
		}
		for _, w := range want {
			if count[w] != 1 {
				t.Errorf("%s is in the feed %d times, want once", w, count[w])
			}
		}
	}
}

func TestRun_ServeStartsOnASmallDisk(t *testing.T) {
	const store = 2_000_000_000 // JetStream's store on a 2 GB file system
	small := func(o *serverOptions) { o.JetStreamMaxStore = store }
	t.Run("the feed is sized to the store", func(t *testing.T) {
		n := start(t, Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Parts: All, configureServer: small})
		_, js := dial(t, n.Info.ClientURL)
		st, err := js.Stream(context.Background(), dshq.FeedStream)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.MaxBytes; got <= 0 || got > store/4 {
			t.Fatalf("feed max bytes %d, want at most a quarter of the %d-byte store", got, store)
		}
		serves(t, js.Conn(), "on a small disk")
		if err := n.Stop(t); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a feed size the store cannot hold is refused with the reason", func(t *testing.T) {
		err := Run(context.Background(), Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Parts: All, configureServer: small,
			Feed: FeedConfig{MaxBytes: 8 << 30}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil)
		if err == nil || !strings.Contains(err.Error(), "insufficient storage resources") || !strings.Contains(err.Error(), "8589934592") {
			t.Fatalf("an 8 GiB feed on a 2 GB store: %v, want the server's refusal with the size", err)
		}
	})
}

// A home whose feed stream syncs every write (created before the feed
// persisted asynchronously) gets an asynchronous one on start; the
// projection's records are not published again, later ones are.
func TestRun_AFeedThatSyncsEveryWriteIsReplacedOnStart(t *testing.T) {
	home := t.TempDir()
	logs := &testenv.Buffer{}
	base := Config{Home: home, Listen: "127.0.0.1:0", RelaxedSync: true, Parts: Parts{Projector: true},
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	n := start(t, base)
	_, js := dial(t, n.Info.ClientURL)
	ctx := context.Background()
	if err := js.DeleteStream(ctx, dshq.FeedStream); err != nil {
		t.Fatal(err)
	}
	if _, err := feed.EnsureStream(ctx, js, feed.StreamConfig{SyncWrites: true}); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, js, publishAs(t, js, "s-a"))
	n.Stop(t)

	n = start(t, base)
	_, js = dial(t, n.Info.ClientURL)
	st, err := js.Stream(ctx, dshq.FeedStream)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.PersistMode != jetstream.AsyncPersistMode {
		t.Fatalf("feed persist mode %v after the start, want async", c.PersistMode)
	}
	if !strings.Contains(logs.String(), "feed stream replaced") {
		t.Errorf("the replacement was not logged:\n%s", logs)
	}
	gen := publishAs(t, js, "s-b")
	waitFeed(t, js, gen)
	msgs := readFeed(t, js)
	checkOnce(t, msgs, "s-b")
	for _, m := range msgs {
		if m.SessionID == "s-a" {
			t.Fatalf("the replacement feed republished s-a: %+v", m)
		}
	}
}
