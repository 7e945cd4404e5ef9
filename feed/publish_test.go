package feed

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
)

func streamMsgs(t *testing.T, p *Publisher) uint64 {
	t.Helper()
	st, err := p.js.Stream(testContext(t), p.stream)
	if err != nil {
		t.Fatal(err)
	}
	return st.CachedInfo().State.Msgs
}

func TestRepublishedCommitIsStoredOnce(t *testing.T) {
	pub, _ := setup(t, StreamConfig{})
	ctx := testContext(t)
	commit := commitAt(t, 5) // three messages
	for i := 0; i < 3; i++ {
		if err := pub.Publish(ctx, commit); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if n := streamMsgs(t, pub); n != 3 {
		t.Fatalf("stream holds %d messages after publishing one commit three times, want 3", n)
	}
	if g, err := pub.LastPublishedGeneration(ctx); err != nil || g != 5 {
		t.Fatalf("last published generation = %d, %v; want 5", g, err)
	}
}

func TestPartlyPublishedCommitIsCompletedByRepublishing(t *testing.T) {
	pub, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	if _, err := pub.Checkpoint(ctx); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("empty feed: %v, want ErrNoCheckpoint", err)
	}
	if err := pub.Publish(ctx, commitAt(t, 4)); err != nil {
		t.Fatal(err)
	}
	// The projector crashes after publishing two of the four messages of
	// generation 9's commit.
	commit := append(commitAt(t, 8), commitAt(t, 9)...)
	for i := range commit {
		commit[i].Generation = 9
	}
	out, _, err := pub.prepare(commit)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.publishOnce(ctx, out[:2]); err != nil {
		t.Fatal(err)
	}
	cp, err := pub.Checkpoint(ctx)
	want := Checkpoint{Generation: 4, Partial: true, PartialGeneration: 9, PartialPublished: 2}
	if err != nil || cp != want {
		t.Fatalf("after a partial commit: checkpoint %+v, %v; want %+v", cp, err, want)
	}
	if g, err := pub.LastPublishedGeneration(ctx); err != nil || g != 4 {
		t.Fatalf("last published generation = %d, %v; want 4", g, err)
	}
	// On restart it re-derives the commit, in another order, and publishes
	// it: only the two missing messages are stored.
	rederived := []Message{commit[3], commit[1], commit[2], commit[0]}
	restarted := NewPublisher(js)
	if err := restarted.Publish(ctx, rederived); err != nil {
		t.Fatal(err)
	}
	if cp, err := restarted.Checkpoint(ctx); err != nil || cp != (Checkpoint{Generation: 9}) {
		t.Fatalf("after republishing: checkpoint %+v, %v; want generation 9 complete", cp, err)
	}
	sub, err := Tail(ctx, js, Filter{}, AfterGeneration(4))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	expectSame(t, "completed commit", readN(t, sub, 4), []Message{commit[0], commit[1], commit[3], commit[2]})
	if n := streamMsgs(t, pub); n != uint64(len(commitAt(t, 4))+len(commit)) {
		t.Fatalf("stream holds %d messages, want %d", n, len(commitAt(t, 4))+len(commit))
	}
}

func TestResumeStoresOnlyWhatTheFeedLacksWhateverTheDuplicateWindow(t *testing.T) {
	const window = 100 * time.Millisecond // the shortest the server takes
	pub, js := setup(t, StreamConfig{Duplicates: window})
	ctx := testContext(t)
	if err := pub.Publish(ctx, commitAt(t, 4)); err != nil {
		t.Fatal(err)
	}
	commit := append(commitAt(t, 8), commitAt(t, 9)...)
	for i := range commit {
		commit[i].Generation = 9
	}
	out, _, err := pub.prepare(commit)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.publishOnce(ctx, out[:2]); err != nil { // a crash after two messages
		t.Fatal(err)
	}
	time.Sleep(window) // the server would store those two again
	rederived := []Message{commit[3], commit[1], commit[2], commit[0]}
	restarted := NewPublisher(js)
	for i := 0; i < 2; i++ { // a second Resume finds the commit complete
		if err := restarted.Resume(ctx, rederived); err != nil {
			t.Fatal(err)
		}
	}
	if n := streamMsgs(t, pub); n != uint64(len(commitAt(t, 4))+len(commit)) {
		t.Fatalf("stream holds %d messages, want %d", n, len(commitAt(t, 4))+len(commit))
	}
	if cp, err := restarted.Checkpoint(ctx); err != nil || cp != (Checkpoint{Generation: 9}) {
		t.Fatalf("after resuming: checkpoint %+v, %v; want generation 9 complete", cp, err)
	}
}

func TestCheckpointOfAFeedWhoseMessagesAllAgedOut(t *testing.T) {
	pub, _ := setup(t, StreamConfig{MaxAge: 200 * time.Millisecond, Duplicates: 100 * time.Millisecond})
	ctx := testContext(t)
	if _, err := pub.Checkpoint(ctx); !errors.Is(err, ErrNoCheckpoint) || errors.Is(err, ErrAgedOut) {
		t.Fatalf("new feed: %v, want ErrNoCheckpoint alone", err)
	}
	if err := pub.Publish(ctx, commitAt(t, 4)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for streamMsgs(t, pub) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the feed's messages did not age out")
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if _, err := pub.Checkpoint(ctx); !errors.Is(err, ErrNoCheckpoint) || !errors.Is(err, ErrAgedOut) {
		t.Fatalf("aged-out feed: %v, want ErrNoCheckpoint wrapping ErrAgedOut", err)
	}
}

func TestMessageIDsNameTheChange(t *testing.T) {
	ms := sampleMessages(t)
	got := map[Kind]string{}
	for i := range ms {
		got[ms[i].Kind] = MsgID(&ms[i], i)
	}
	want := map[Kind]string{
		KindSession:    "42:session:s-7f3c",
		KindEvent:      "42:event:s-7f3c:1",
		KindSurface:    "42:surface:s-7f3c:5:shadowed",
		KindTitle:      "42:title:s-7f3c:2",
		KindLease:      "42:lease:s-7f3c:4",
		KindQuarantine: "43:quarantine:43",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s message id %q, want %q", k, got[k], w)
		}
	}
	pub, _ := setup(t, StreamConfig{})
	twice := []Message{eventMsg(t, 3, "/a", "s", 1), eventMsg(t, 3, "/a", "s", 1)}
	if err := pub.Publish(testContext(t), twice); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "same change") {
		t.Fatalf("a commit with the same change twice: %v, want ErrMalformed", err)
	}
}

func TestLeaseOnlyCommitsAtOneGenerationAreAllStored(t *testing.T) {
	pub, _ := setup(t, StreamConfig{})
	ctx := testContext(t)
	if err := pub.Publish(ctx, commitAt(t, 3)); err != nil {
		t.Fatal(err)
	}
	for _, live := range []bool{true, false, true} {
		if err := pub.Publish(ctx, []Message{leaseMsg(t, 3, "/ws/a", "s-0", live)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := streamMsgs(t, pub); n != 4 {
		t.Fatalf("stream holds %d messages, want 1 event and 3 leases", n)
	}
	if cp, err := pub.Checkpoint(ctx); err != nil || cp != (Checkpoint{Generation: 3}) {
		t.Fatalf("checkpoint %+v, %v; want generation 3 complete", cp, err)
	}
}

func TestPublishRefusesBadCommits(t *testing.T) {
	pub, _ := setup(t, StreamConfig{})
	ctx := testContext(t)
	huge := eventMsg(t, 2, "/ws/a", "s", 0)
	huge.Event.Text = strings.Repeat("x", 2<<20)
	noBody := eventMsg(t, 2, "/ws/a", "s", 0)
	noBody.Event = nil
	tests := []struct {
		name   string
		commit []Message
		want   error
	}{
		{"a commit mixing generations is refused", []Message{eventMsg(t, 2, "/a", "s", 0), eventMsg(t, 3, "/a", "s", 1)}, ErrMalformed},
		{"a message larger than the maximum payload is refused", []Message{huge}, ErrMalformed},
		{"a message without its body is refused", []Message{noBody}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pub.Publish(ctx, tt.commit)
			if !errors.Is(err, tt.want) || dshq.ErrorCode(err) != dshq.CodeInvalidRequest {
				t.Fatalf("publish: %v, want %v with code %s", err, tt.want, dshq.CodeInvalidRequest)
			}
		})
	}
	if n := streamMsgs(t, pub); n != 0 {
		t.Fatalf("refused commits stored %d messages", n)
	}
	if err := pub.Publish(ctx, commitAt(t, 7)); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, commitAt(t, 6)); !errors.Is(err, ErrGenerationRegressed) {
		t.Fatalf("publishing generation 6 after 7: %v, want ErrGenerationRegressed", err)
	}
}

func TestEnsureStreamRefusesAConflictingStream(t *testing.T) {
	_, js := setup(t, StreamConfig{})
	ctx := testContext(t)
	if _, err := EnsureStream(ctx, js, StreamConfig{}); err != nil {
		t.Fatalf("ensuring the same stream again: %v", err)
	}
	_, err := EnsureStream(ctx, js, StreamConfig{MaxMsgs: 10})
	if !errors.Is(err, ErrStreamConflict) || !strings.Contains(err.Error(), "max_msgs") {
		t.Fatalf("ensure with other limits: %v, want ErrStreamConflict naming max_msgs", err)
	}
	if _, err := UpdateStream(ctx, js, StreamConfig{MaxMsgs: 10}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, err := EnsureStream(ctx, js, StreamConfig{MaxMsgs: 10}); err != nil {
		t.Fatalf("ensure after update: %v", err)
	}
}

func TestEnsureStreamAdoptsAnExistingStreamsLimitsAndAppliesTheOnesGiven(t *testing.T) {
	_, js := setup(t, StreamConfig{MaxBytes: 64 << 20, MaxAge: time.Hour})
	ctx := testContext(t)
	st, err := EnsureStream(ctx, js, StreamConfig{Adopt: true})
	if err != nil {
		t.Fatalf("adopt with nothing given: %v", err)
	}
	if c := st.CachedInfo().Config; c.MaxBytes != 64<<20 || c.MaxAge != time.Hour {
		t.Fatalf("adopting changed the limits: max bytes %d, max age %v", c.MaxBytes, c.MaxAge)
	}
	st, err = EnsureStream(ctx, js, StreamConfig{MaxBytes: 32 << 20, Adopt: true})
	if err != nil {
		t.Fatalf("adopt with max bytes given: %v", err)
	}
	if c := st.CachedInfo().Config; c.MaxBytes != 32<<20 || c.MaxAge != time.Hour {
		t.Fatalf("after adopting with max bytes: max bytes %d, max age %v; want 32 MiB and the hour kept", c.MaxBytes, c.MaxAge)
	}
}

func TestEnsureStreamSizesANewStreamToTheStorageJetStreamHas(t *testing.T) {
	const store = 2 << 30 // a 2 GiB store, as on a small disk
	small := func(o *server.Options) { o.JetStreamMaxStore = store }
	t.Run("the default size cannot be reserved on a small store", func(t *testing.T) {
		_, js := connect(t, startServer(t, small))
		_, err := EnsureStream(testContext(t), js, StreamConfig{MaxBytes: 8 << 30})
		if err == nil || !strings.Contains(err.Error(), "cannot reserve") || !strings.Contains(err.Error(), "insufficient storage resources") {
			t.Fatalf("an 8 GiB feed on a 2 GiB store: %v, want the server's refusal explained", err)
		}
	})
	t.Run("a budget sizes the default to a quarter of it", func(t *testing.T) {
		_, js := connect(t, startServer(t, small))
		st, err := EnsureStream(testContext(t), js, StreamConfig{Budget: store})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.MaxBytes; got != store/4 {
			t.Fatalf("max bytes %d, want a quarter of the budget (%d)", got, store/4)
		}
	})
	t.Run("a large budget keeps the default", func(t *testing.T) {
		_, js := connect(t, startServer(t))
		st, err := EnsureStream(testContext(t), js, StreamConfig{Budget: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.CachedInfo().Config.MaxBytes; got != DefaultMaxBytes {
			t.Fatalf("max bytes %d, want DefaultMaxBytes", got)
		}
	})
}

func TestANewStreamPersistsAsynchronouslyAndCompressesItsBlocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  StreamConfig
		want jetstream.PersistModeType
	}{
		{"a single-replica feed persists asynchronously", StreamConfig{}, jetstream.AsyncPersistMode},
		{"SyncWrites keeps the server's sync of every write", StreamConfig{SyncWrites: true}, jetstream.DefaultPersistMode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, js := setup(t, tc.cfg)
			st, err := js.Stream(testContext(t), dshq.FeedStream)
			if err != nil {
				t.Fatal(err)
			}
			if c := st.CachedInfo().Config; c.PersistMode != tc.want || c.Compression != jetstream.S2Compression {
				t.Fatalf("persist mode %v, compression %v; want %v and s2", c.PersistMode, c.Compression, tc.want)
			}
		})
	}
}

func TestAdoptingAStreamTurnsOnCompression(t *testing.T) {
	srv := startServer(t)
	_, js := connect(t, srv)
	ctx := testContext(t)
	old := StreamConfig{}.withDefaults().jsConfig()
	old.Compression = jetstream.NoCompression
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	st, err := EnsureStream(ctx, js, StreamConfig{Adopt: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; c.Compression != jetstream.S2Compression {
		t.Fatalf("compression %v after adopting, want s2", c.Compression)
	}
}

func TestReplaceSyncedStreamContinuesItsSequenceAsAgedOut(t *testing.T) {
	pub, js := setup(t, StreamConfig{SyncWrites: true, MaxAge: time.Hour})
	ctx := testContext(t)
	for gen := uint64(3); gen <= 5; gen++ {
		if err := pub.Publish(ctx, commitAt(t, gen)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := js.Stream(ctx, dshq.FeedStream)
	if err != nil {
		t.Fatal(err)
	}
	last := before.CachedInfo().State.LastSeq
	replaced, err := ReplaceSyncedStream(ctx, js, StreamConfig{})
	if err != nil || !replaced {
		t.Fatalf("replace: %v, %v; want the synced stream replaced", replaced, err)
	}
	st, err := js.Stream(ctx, dshq.FeedStream)
	if err != nil {
		t.Fatal(err)
	}
	info := st.CachedInfo()
	if info.Config.PersistMode != jetstream.AsyncPersistMode || info.Config.MaxAge != time.Hour {
		t.Fatalf("replacement: persist mode %v, max age %v; want async and the old stream's hour", info.Config.PersistMode, info.Config.MaxAge)
	}
	if info.State.Msgs != 0 || info.State.LastSeq != last {
		t.Fatalf("replacement holds %d messages, last sequence %d; want none after sequence %d", info.State.Msgs, info.State.LastSeq, last)
	}
	if _, err := NewPublisher(js).Checkpoint(ctx); !errors.Is(err, ErrAgedOut) {
		t.Fatalf("checkpoint of the replacement: %v, want ErrAgedOut (the projector publishes nothing again)", err)
	}
	if _, err := Tail(ctx, js, Filter{Workspace: wsOf("/ws/a")}, AfterGeneration(3)); !errors.Is(err, ErrNotRetained) {
		t.Fatalf("resuming into the old history: %v, want ErrNotRetained", err)
	}
	if err := NewPublisher(js).Publish(ctx, commitAt(t, 6)); err != nil {
		t.Fatal(err)
	}
	if again, err := ReplaceSyncedStream(ctx, js, StreamConfig{}); err != nil || again {
		t.Fatalf("replacing the asynchronous stream: %v, %v; want it left as it is", again, err)
	}
	if n := streamMsgs(t, pub); n == 0 {
		t.Fatal("the replacement lost what was published to it")
	}
}
