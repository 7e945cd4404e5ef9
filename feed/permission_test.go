package feed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
)

// TailerPermissions is the minimal permission set of a user confined to
// tailing one workspace of the feed stream (documented in
// docs/protocol.md#56-permissions-confining-a-subscriber-to-its-workspace):
// create consumers whose filter lies inside the workspace, pull from them,
// delete them, and receive on a private inbox prefix.
func TailerPermissions(stream, workspace, inboxPrefix string) *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			"$JS.API.CONSUMER.CREATE." + stream + ".*." + dshq.FeedSubjectPrefix + workspace + ".>",
			"$JS.API.CONSUMER.MSG.NEXT." + stream + ".*",
			"$JS.API.CONSUMER.DELETE." + stream + ".*",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{inboxPrefix + ".>"}},
	}
}

func TestConfinedUserTailsItsWorkspaceAndIsRefusedAnother(t *testing.T) {
	wsA, wsB := wsOf("/ws/a"), wsOf("/ws/b")
	srv := startServer(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "projector", Password: "p"},
			{Username: "tailer", Password: "t", Permissions: TailerPermissions(dshq.FeedStream, wsA, "_INBOX_tailer")},
		}
	})
	_, adminJS := connect(t, srv, nats.UserInfo("projector", "p"))
	ctx := testContext(t)
	if _, err := EnsureStream(ctx, adminJS, StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(adminJS)
	for g := uint64(1); g <= 6; g++ {
		if err := pub.Publish(ctx, commitAt(t, g)); err != nil {
			t.Fatal(err)
		}
	}

	asyncErrs := make(chan error, 16)
	tailNC, tailJS := connect(t, srv, nats.UserInfo("tailer", "t"), nats.CustomInboxPrefix("_INBOX_tailer"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case asyncErrs <- err:
			default:
			}
		}))

	t.Run("the confined user tails its workspace from the start and live", func(t *testing.T) {
		sub, err := Tail(ctx, tailJS, Filter{Workspace: wsA}, AfterGeneration(2))
		if err != nil {
			t.Fatalf("tail workspace A: %v", err)
		}
		defer sub.Stop()
		var want []Message
		for g := uint64(3); g <= 6; g++ {
			for _, m := range commitAt(t, g) {
				if m.Workspace == wsA {
					want = append(want, m)
				}
			}
		}
		expectSame(t, "catch-up", readN(t, sub, len(want)), want)
		// The probes of the start search are deleted: only the
		// subscription's own consumer is left.
		waitConsumers(t, adminJS, 1)
		live := commitAt(t, 7)
		if err := pub.Publish(ctx, live); err != nil {
			t.Fatal(err)
		}
		expectSame(t, "live", readN(t, sub, 1), live[:1])
	})

	t.Run("the confined user tails one session of its workspace by kind", func(t *testing.T) {
		sub, err := Tail(ctx, tailJS, Filter{Workspace: wsA, SessionID: "s-0", Kinds: []Kind{KindEvent}}, AfterGeneration(6))
		if err != nil {
			t.Fatalf("tail a session of workspace A: %v", err)
		}
		defer sub.Stop()
		expectSame(t, "session", readN(t, sub, 1), commitAt(t, 7)[:1])
	})

	refused := []struct {
		name   string
		filter Filter
	}{
		{"another workspace", Filter{Workspace: wsB}},
		{"the whole feed", Filter{}},
		{"a session across workspaces", Filter{SessionID: "s-0"}},
	}
	for _, r := range refused {
		t.Run("the confined user is refused "+r.name, func(t *testing.T) {
			// NATS does not answer a request it refused: the caller sees
			// its deadline pass, and the connection reports the violation.
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			sub, err := Tail(rctx, tailJS, r.filter, AfterGeneration(0))
			if err == nil {
				sub.Stop()
				t.Fatalf("tail %+v succeeded", r.filter)
			}
			expectViolation(t, asyncErrs, "Publish to \"$JS.API.CONSUMER.CREATE.")
		})
	}

	t.Run("the confined user cannot read the stream directly", func(t *testing.T) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := tailJS.Stream(rctx, dshq.FeedStream); err == nil {
			t.Fatal("stream info succeeded")
		}
		expectViolation(t, asyncErrs, "Publish to \"$JS.API.STREAM.INFO.")
		if _, err := tailNC.Subscribe(dshq.FeedSubjectPrefix+">", func(*nats.Msg) {}); err != nil {
			t.Fatal(err)
		}
		_ = tailNC.Flush()
		expectViolation(t, asyncErrs, "Subscription to \"dsh.feed.>\"")
	})
}

// expectViolation waits for the connection's report of a permissions
// violation whose text contains what.
func expectViolation(t *testing.T, errs <-chan error, what string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), what) {
				return
			}
		case <-timeout:
			t.Fatalf("no permissions violation for %s was reported", what)
		}
	}
}

// waitConsumers waits until the feed stream has n consumers.
func waitConsumers(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	ctx := testContext(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := js.Stream(ctx, dshq.FeedStream)
		if err != nil {
			t.Fatal(err)
		}
		got := st.CachedInfo().State.Consumers
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream has %d consumers, want %d", got, n)
		}
	}
}

func TestTailWorksWithoutTheDeletePermission(t *testing.T) {
	wsA := wsOf("/ws/a")
	perms := TailerPermissions(dshq.FeedStream, wsA, "_INBOX_tailer")
	perms.Publish.Allow = perms.Publish.Allow[:2] // no CONSUMER.DELETE
	srv := startServer(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "projector", Password: "p"},
			{Username: "tailer", Password: "t", Permissions: perms},
		}
	})
	_, adminJS := connect(t, srv, nats.UserInfo("projector", "p"))
	ctx := testContext(t)
	if _, err := EnsureStream(ctx, adminJS, StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(adminJS)
	for g := uint64(1); g <= 8; g++ {
		if err := pub.Publish(ctx, commitAt(t, g)); err != nil {
			t.Fatal(err)
		}
	}
	_, tailJS := connect(t, srv, nats.UserInfo("tailer", "t"), nats.CustomInboxPrefix("_INBOX_tailer"),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	sub, err := Tail(ctx, tailJS, Filter{Workspace: wsA}, AfterGeneration(4))
	if err != nil {
		t.Fatalf("tail without the delete permission: %v", err)
	}
	defer sub.Stop()
	var want []Message
	for g := uint64(5); g <= 8; g++ {
		for _, m := range commitAt(t, g) {
			if m.Workspace == wsA {
				want = append(want, m)
			}
		}
	}
	expectSame(t, "catch-up", readN(t, sub, len(want)), want)
}
