package feed

import (
	"errors"
	"strings"
	"testing"

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
	if _, err := pub.LastPublishedGeneration(ctx); !errors.Is(err, ErrNoCheckpoint) {
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
	if g, err := pub.LastPublishedGeneration(ctx); err != nil || g != 4 {
		t.Fatalf("after a partial commit: last published generation = %d, %v; want 4", g, err)
	}
	// On restart it publishes the commit again: only the rest is stored.
	restarted := NewPublisher(js)
	if err := restarted.Publish(ctx, commit); err != nil {
		t.Fatal(err)
	}
	if g, err := restarted.LastPublishedGeneration(ctx); err != nil || g != 9 {
		t.Fatalf("after republishing: last published generation = %d, %v; want 9", g, err)
	}
	sub, err := Tail(ctx, js, Filter{}, AfterGeneration(4))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	var got []Message
	for len(got) < len(commit) {
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	expectSame(t, "completed commit", got, commit)
	if n := streamMsgs(t, pub); n != uint64(len(commitAt(t, 4))+len(commit)) {
		t.Fatalf("stream holds %d messages, want %d", n, len(commitAt(t, 4))+len(commit))
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
	if g, err := pub.LastPublishedGeneration(ctx); err != nil || g != 3 {
		t.Fatalf("last published generation = %d, %v; want 3", g, err)
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
