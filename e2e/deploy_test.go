package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// TestDeploymentSeparatesHarnessFromTrustedAPI runs the deployment example
// (deploy/nats-server.conf) with a real nats-server and `dshq serve` joining
// it as the trusted user. The harness credential writes a session through the
// harness SDK and calls a tool as that session; its requests to the trusted
// query API, the internal shard subjects and the admin API are refused by the
// server with a permissions violation (not left to time out).
func TestDeploymentSeparatesHarnessFromTrustedAPI(t *testing.T) {
	url, natsProc := startNATS(t)
	serve, _ := startServe(t, "dshq serve", serveArgs(url, t.TempDir()))
	ctx := testCtx(t, 2*time.Minute)

	trusted := connectTrusted(t, url)
	violations := make(chan error, 16)
	harness := connectHarness(t, url, violations)

	const id = "deploy-session-1"
	var lastSeq uint64
	t.Run("the harness writes a session through the harness SDK", func(t *testing.T) {
		store, err := bus.NewStore(ctx, harness)
		if err != nil {
			t.Fatalf("new store with the harness credential: %v", err)
		}
		h, err := store.Create(ctx, dshq.Header{Version: 2, ID: id, CreatedAt: 1_790_000_000_000, Cwd: dshq.Str("/srv/deploy")})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := h.Close(ctx); err != nil {
				t.Errorf("close: %v", err)
			}
		}()
		lastSeq, err = h.Append(ctx, deployEvents(t))
		if err != nil {
			t.Fatalf("append with the harness credential: %v", err)
		}
		back, err := h.Read(ctx, 0, -1)
		if err != nil || len(back) != 3 {
			t.Fatalf("read back: %d events, %v", len(back), err)
		}
		snap, err := store.Stat(ctx, id)
		if err != nil || snap == nil || !snap.Live || snap.EventCount != 3 {
			t.Fatalf("stat: %+v, %v", snap, err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	waitCaughtUp(t, query.NewClient(trusted), lastSeq)

	t.Run("the harness calls a tool as its session", func(t *testing.T) {
		r, err := toolservice.NewClient(harness, id).Call(ctx, tools.NameSessionEventRead, json.RawMessage(`{"seq":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if r.IsError || !strings.Contains(r.Text, "ultramarine deployment check") {
			t.Fatalf("tool reply: %+v", r)
		}
	})

	t.Run("the tool wire contract names the caller in the Dsh-Caller-Session header", func(t *testing.T) {
		for _, tc := range []struct {
			caller  string
			isError bool
			code    dshq.Code
		}{
			{caller: id},
			{caller: "", isError: true, code: dshq.CodeToolMissingAgent},
		} {
			msg := nats.NewMsg("dsh.tools.v1." + tools.NameSessionTrace)
			msg.Data = []byte(`{}`)
			if tc.caller != "" {
				msg.Header.Set("Dsh-Caller-Session", tc.caller)
			}
			m, err := harness.RequestMsgWithContext(ctx, msg)
			if err != nil {
				t.Fatal(err)
			}
			var r toolservice.Reply
			if err := json.Unmarshal(m.Data, &r); err != nil {
				t.Fatalf("reply %s: %v", m.Data, err)
			}
			var code dshq.Code
			if r.Error != nil {
				code = r.Error.Code
			}
			if r.IsError != tc.isError || code != tc.code || (!r.IsError && !strings.HasPrefix(r.Text, "Session "+id+" — ")) {
				t.Errorf("caller %q: reply %s", tc.caller, m.Data)
			}
		}
	})

	refused := []string{
		"dsh.query.v1.sessions.list",
		query.ShardSubject(query.DefaultShard, "sessions.list"),
		"dsh.admin.v1.status",
		// The log itself cannot be changed, purged or deleted,
		"$JS.API.STREAM.UPDATE.DSH_SESSIONS",
		"$JS.API.STREAM.PURGE.DSH_SESSIONS",
		"$JS.API.STREAM.DELETE.DSH_SESSIONS",
		"$JS.API.STREAM.MSG.DELETE.DSH_SESSIONS",
		// nor the live feed read.
		"$JS.API.CONSUMER.CREATE.DSH_FEED",
	}
	for _, subject := range refused {
		t.Run(fmt.Sprintf("the server refuses the harness a request to %s", subject), func(t *testing.T) {
			drain(violations)
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			answered := make(chan error, 1)
			go func() {
				_, err := harness.RequestWithContext(rctx, subject, []byte(`{}`))
				answered <- err
			}()
			select {
			case err := <-violations:
				if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), fmt.Sprintf("Publish to %q", subject)) {
					t.Fatalf("unexpected asynchronous error: %v", err)
				}
			case err := <-answered:
				t.Fatalf("the request ended before any permissions violation: %v", err)
			}
			cancel()
			if err := <-answered; err == nil {
				t.Fatal("the harness got an answer")
			}
		})
	}

	t.Run("the server refuses the harness a subscription to other inboxes", func(t *testing.T) {
		drain(violations)
		sub, err := harness.SubscribeSync("_INBOX.>")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		select {
		case err := <-violations:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `Subscription to "_INBOX.>"`) {
				t.Fatalf("unexpected asynchronous error: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no permissions violation within 20s")
		}
	})

	t.Run("the trusted user reaches the query API", func(t *testing.T) {
		page, err := query.NewClient(trusted).ListSessions(ctx, dshqListAll)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 1 || page.Items[0].Header.ID != id {
			t.Fatalf("sessions: %+v", page.Items)
		}
	})

	t.Run("the server refused nothing else", func(t *testing.T) {
		var want []string
		for _, subject := range refused {
			want = append(want, `Publish Violation - Subject "`+subject+`"`)
		}
		want = append(want, `Subscription Violation - Subject "_INBOX.>"`)
		if got := violationsLogged(natsProc); !slices.Equal(got, want) {
			t.Fatalf("violations logged by the server:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})

	serve.stop(t, 30*time.Second)
}

var violationRe = regexp.MustCompile(`(Publish|Subscription) Violation - Subject "[^"]*"`)

// violationsLogged returns the permission violations the server logged, in
// order, from "Publish Violation" / "Subscription Violation" on.
func violationsLogged(p *proc) []string {
	lines, _ := p.out.since(0)
	var out []string
	for _, l := range lines {
		if m := violationRe.FindString(l); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// deployEvents is a short first turn.
func deployEvents(t *testing.T) []dshq.Event {
	t.Helper()
	raws := []string{
		`{"type":"turn/start","seq":0,"time":1790000000001,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":1790000000002,"data":{"id":"m-1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"ultramarine deployment check"}]},"surfaceOp":"append"}`,
		`{"type":"turn/end","seq":2,"time":1790000000003,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
	out := make([]dshq.Event, len(raws))
	for i, r := range raws {
		e, err := record.ParseEvent([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = e
	}
	return out
}

// drain empties errs.
func drain(errs <-chan error) {
	for {
		select {
		case <-errs:
		default:
			return
		}
	}
}
