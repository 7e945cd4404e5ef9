package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
	"github.com/dshq/dshq/tenancy"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// TestDeploymentSeparatesTenants runs the deployment example
// (deploy/nats-server.conf) with a real nats-server and `dshq serve` joining
// it as the trusted user. The tenants teamA and teamB each write a session
// through the harness SDK in tenant mode, in the same cwd, and call the
// tools as them. Then teamA tries to reach teamB (and the trusted APIs)
// every way it could: each attempt is refused by the server with a
// permissions violation at once (not left to time out), and each attempted
// read of teamB receives nothing; a forged caller answers as a missing one,
// and the tools never show teamB's session although its cwd is equal.
// Finally the server's log holds exactly those violations.
func TestDeploymentSeparatesTenants(t *testing.T) {
	url, natsProc := startNATS(t)
	serve, _ := startServe(t, "dshq serve", serveArgs(url, t.TempDir()))
	ctx := testCtx(t, 2*time.Minute)

	trusted := connectTrusted(t, url)
	aViolations, bViolations := make(chan error, 16), make(chan error, 16)
	a := connectTenant(t, url, "teamA", aViolations)
	b := connectTenant(t, url, "teamB", bViolations)

	// Unguessable ids, as docs/protocol.md#2-the-session-log-stream asks of
	// tenants.
	aID, bID := "a-"+uuidish(t), "b-"+uuidish(t)
	aTok, _ := record.SubjectToken(aID)
	bTok, _ := record.SubjectToken(bID)
	var lastSeq uint64
	for _, w := range []struct {
		tenant, id, text string
		nc               *nats.Conn
	}{
		{"teamA", aID, "ultramarine secret of team A", a},
		{"teamB", bID, "ultramarine secret of team B", b},
	} {
		t.Run(w.tenant+" writes a session through the harness SDK in tenant mode", func(t *testing.T) {
			store, err := bus.NewStore(ctx, w.nc, bus.WithTenant(w.tenant))
			if err != nil {
				t.Fatalf("new store as %s: %v", w.tenant, err)
			}
			h, err := store.Create(ctx, dshq.Header{Version: 2, ID: w.id, CreatedAt: 1_790_000_000_000, Cwd: dshq.Str("/srv/shared")})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := h.Close(ctx); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			seq, err := h.Append(ctx, deployEvents(t, w.text))
			if err != nil {
				t.Fatalf("append as %s: %v", w.tenant, err)
			}
			lastSeq = max(lastSeq, seq)
			back, err := h.Read(ctx, 0, -1)
			if err != nil || len(back) != 3 {
				t.Fatalf("read back: %d events, %v", len(back), err)
			}
			snap, err := store.Stat(ctx, w.id)
			if err != nil || snap == nil || !snap.Live || snap.EventCount != 3 {
				t.Fatalf("stat: %+v, %v", snap, err)
			}
		})
	}
	if t.Failed() {
		t.FailNow()
	}
	waitCaughtUp(t, query.NewClient(trusted), lastSeq)

	aTools := toolservice.NewClient(a, aID).InTenant("teamA")
	t.Run("a tenant calls a tool as its own session", func(t *testing.T) {
		r, err := aTools.Call(ctx, tools.NameSessionEventRead, json.RawMessage(`{"seq":1}`))
		if err != nil || r.IsError || !strings.Contains(r.Text, "ultramarine secret of team A") {
			t.Fatalf("tool reply: %+v, %v", r, err)
		}
	})
	t.Run("the tools show a tenant only its own sessions, even in an equal cwd", func(t *testing.T) {
		// teamA's second session, to be found by its search.
		store, err := bus.NewStore(ctx, a, bus.WithTenant("teamA"))
		if err != nil {
			t.Fatal(err)
		}
		second := "a2-" + uuidish(t)
		h, err := store.Create(ctx, dshq.Header{Version: 2, ID: second, CreatedAt: 1_790_000_000_001, Cwd: dshq.Str("/srv/shared")})
		if err != nil {
			t.Fatal(err)
		}
		seq, err := h.Append(ctx, deployEvents(t, "ultramarine notes of team A"))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := aTools.AtGeneration(seq).Call(ctx, tools.NameSessionSearch, json.RawMessage(`{"query":"ultramarine"}`))
		if err != nil || r.IsError || !strings.Contains(r.Text, second) || strings.Contains(r.Text, bID) || strings.Contains(r.Text, "team B") {
			t.Fatalf("teamA's search: %+v, %v", r, err)
		}
		hidden, err := aTools.Call(ctx, tools.NameSessionEventRead, json.RawMessage(fmt.Sprintf(`{"session_id":%q,"seq":1}`, bID)))
		if err != nil {
			t.Fatal(err)
		}
		missing, err := aTools.Call(ctx, tools.NameSessionEventRead, json.RawMessage(`{"session_id":"no-such-session","seq":1}`))
		if err != nil || !reflect.DeepEqual(hidden, missing) || !hidden.IsError {
			t.Fatalf("teamB's session as target: %+v\nmissing target: %+v (%v)", hidden, missing, err)
		}
	})
	t.Run("a Dsh-Caller-Session of another tenant answers as a missing caller", func(t *testing.T) {
		forged, err := toolservice.NewClient(a, bID).InTenant("teamA").Call(ctx, tools.NameSessionEventRead, json.RawMessage(`{"seq":1}`))
		if err != nil {
			t.Fatal(err)
		}
		none, err := toolservice.NewClient(a, "s-never-stored").InTenant("teamA").Call(ctx, tools.NameSessionEventRead, json.RawMessage(`{"seq":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(forged, none) || forged.Error == nil || forged.Error.Code != dshq.CodeToolMissingAgent || strings.Contains(forged.Text, "team B") {
			t.Fatalf("forged caller: %+v\na caller never stored: %+v", forged, none)
		}
	})
	t.Run("the trusted API names each session's tenant", func(t *testing.T) {
		page, err := query.NewClient(trusted).ListSessions(ctx, dshqListAll)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range page.Items {
			got[r.Header.ID] = r.Tenant
		}
		if len(got) != 3 || got[aID] != "teamA" || got[bID] != "teamB" {
			t.Fatalf("sessions: %v", got)
		}
	})

	var want []string // the violations the server must log, in order
	refusePublish := func(t *testing.T, subject string, body []byte, hdr nats.Header) {
		t.Helper()
		drain(aViolations)
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		answered := make(chan error, 1)
		go func() {
			_, err := a.RequestMsgWithContext(rctx, &nats.Msg{Subject: subject, Data: body, Header: hdr})
			answered <- err
		}()
		select {
		case err := <-aViolations:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), fmt.Sprintf("Publish to %q", subject)) {
				t.Fatalf("unexpected asynchronous error: %v", err)
			}
		case err := <-answered:
			t.Fatalf("the request ended before any permissions violation: %v", err)
		}
		cancel()
		if err := <-answered; err == nil {
			t.Fatal("teamA got an answer")
		}
		want = append(want, `Publish Violation - Subject "`+subject+`"`)
	}
	refuseSubscribe := func(t *testing.T, subject string) *nats.Subscription {
		t.Helper()
		drain(aViolations)
		sub, err := a.SubscribeSync(subject)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		select {
		case err := <-aViolations:
			if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), fmt.Sprintf("Subscription to %q", subject)) {
				t.Fatalf("unexpected asynchronous error: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no permissions violation within 20s")
		}
		want = append(want, `Subscription Violation - Subject "`+subject+`"`)
		return sub
	}

	t.Run("replies: teamA cannot capture teamB's tool replies", func(t *testing.T) {
		capture := refuseSubscribe(t, bus.TenantInboxPrefix("teamB")+".>")
		everything := refuseSubscribe(t, "_INBOX.>")
		r, err := toolservice.NewClient(b, bID).InTenant("teamB").Call(ctx, tools.NameSessionEventRead, json.RawMessage(`{"seq":1}`))
		if err != nil || !strings.Contains(r.Text, "ultramarine secret of team B") {
			t.Fatalf("teamB's own call: %+v, %v", r, err)
		}
		for _, sub := range []*nats.Subscription{capture, everything} {
			if m, err := sub.NextMsg(time.Second); err == nil {
				t.Fatalf("teamA received %s on %s", m.Data, m.Subject)
			}
		}
	})
	stream, leases := dshq.SessionStream, dshq.LeaseBucket
	bLease := bus.TenantLeaseKey("teamB", bTok)
	for _, c := range []struct {
		name, subject string
		body          string
		hdr           nats.Header
	}{
		// Logs: teamB's subjects in every read form, and the forms that
		// name any subject.
		{"logs: the body form of direct get", "$JS.API.DIRECT.GET." + stream, `{"last_by_subj":"dsh.log.teamB.` + bTok + `"}`, nil},
		{"logs: the subject form of direct get on teamB's subject", "$JS.API.DIRECT.GET." + stream + ".dsh.log.teamB." + bTok, "", nil},
		{"logs: a filtered consumer on teamB's subjects", "$JS.API.CONSUMER.CREATE." + stream + ".peek.dsh.log.teamB.>", consumerBody(stream, "peek", "dsh.log.teamB.>"), nil},
		{"logs: a consumer without a filter in its subject", "$JS.API.CONSUMER.CREATE." + stream + ".peek", consumerBody(stream, "peek", "dsh.log.>"), nil},
		{"logs: the projector's durable consumer, by name", "$JS.API.CONSUMER.CREATE." + stream + ".dsh-projector.dsh.log.teamA.>", consumerBody(stream, "dsh-projector", "dsh.log.teamA.>"), nil},
		{"logs: a pull from the projector's durable consumer", "$JS.API.CONSUMER.MSG.NEXT." + stream + ".dsh-projector", `{"batch":1}`, nil},
		{"logs: the stream's info (its subjects)", "$JS.API.STREAM.INFO." + stream, `{"subjects_filter":"dsh.log.>"}`, nil},
		{"logs: the stream's message get", "$JS.API.STREAM.MSG.GET." + stream, `{"last_by_subj":"dsh.log.teamB.` + bTok + `"}`, nil},
		{"logs: the stream's consumers", "$JS.API.CONSUMER.LIST." + stream, `{}`, nil},
		// Writes: teamB's sessions, and the untenanted namespace.
		{"writes: an append to teamB's session", "dsh.log.teamB." + bTok, `{"type":"turn/start","seq":3,"time":1790000000004,"data":{"turn":2}}`, nil},
		{"writes: a session of the untenanted namespace", "dsh.log." + aTok, `{}`, nil},
		{"writes: creating the stream", "$JS.API.STREAM.CREATE." + stream, `{}`, nil},
		// Leases: teamB's key, written or read.
		{"leases: teamB's key", "$KV." + leases + "." + bLease, ``, nats.Header{"KV-Operation": []string{"DEL"}}},
		{"leases: reading teamB's key", "$JS.API.DIRECT.GET.KV_" + leases + ".$KV." + leases + "." + bLease, "", nil},
		{"leases: the bucket's info (every key)", "$JS.API.STREAM.INFO.KV_" + leases, `{"subjects_filter":"$KV.>"}`, nil},
		// Tools: teamB's subjects, the trusted ones.
		{"tools: teamB's tool subject", tenancy.ToolSubject("teamB", tools.NameSessionEventRead), `{"seq":1}`, callerHeader(bID)},
		{"tools: the trusted tool subject", dshq.ToolsSubjectPrefix + "." + tools.NameSessionEventRead, `{"seq":1}`, callerHeader(bID)},
		// The trusted APIs.
		{"the query API", "dsh.query.v1.sessions.list", `{}`, nil},
		{"the projection shard", dshq.ShardSubject(dshq.DefaultShard, "sessions.list"), `{}`, nil},
		{"the admin API", "dsh.admin.v1.status", `{}`, nil},
		{"the live feed", "$JS.API.CONSUMER.CREATE.DSH_FEED", `{}`, nil},
		// The log itself cannot be changed, purged or deleted.
		{"updating the stream", "$JS.API.STREAM.UPDATE." + stream, `{}`, nil},
		{"purging the stream", "$JS.API.STREAM.PURGE." + stream, `{}`, nil},
		{"deleting the stream", "$JS.API.STREAM.DELETE." + stream, `{}`, nil},
		{"deleting a record", "$JS.API.STREAM.MSG.DELETE." + stream, `{"seq":1}`, nil},
		{"deleting the projector's consumer", "$JS.API.CONSUMER.DELETE." + stream + ".dsh-projector", ``, nil},
	} {
		t.Run("the server refuses teamA "+c.name, func(t *testing.T) {
			refusePublish(t, c.subject, []byte(c.body), c.hdr)
		})
	}
	t.Run("a consumer of teamA's subjects whose body names teamB's is refused by JetStream", func(t *testing.T) {
		drain(aViolations)
		m, err := a.RequestWithContext(ctx, "$JS.API.CONSUMER.CREATE."+stream+".mismatch.dsh.log.teamA.>", []byte(consumerBody(stream, "mismatch", "dsh.log.teamB.>")))
		if err != nil {
			t.Fatal(err)
		}
		var reply struct {
			Error *struct {
				ErrCode int `json:"err_code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &reply); err != nil || reply.Error == nil {
			t.Fatalf("reply %s", m.Data)
		}
		select {
		case err := <-aViolations:
			t.Fatalf("asynchronous error %v", err)
		default:
		}
	})
	t.Run("teamB was refused nothing", func(t *testing.T) {
		select {
		case err := <-bViolations:
			t.Fatalf("teamB: %v", err)
		default:
		}
	})
	t.Run("the server refused nothing else", func(t *testing.T) {
		if got := violationsLogged(natsProc); !slices.Equal(got, want) {
			t.Fatalf("violations logged by the server:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	serve.stop(t, 30*time.Second)
}

// consumerBody is a consumer create request for filter.
func consumerBody(stream, name, filter string) string {
	b, _ := json.Marshal(map[string]any{"stream_name": stream, "action": "create", "config": map[string]any{
		"name": name, "filter_subject": filter, "deliver_subject": bus.TenantInboxPrefix("teamA") + ".peek",
		"deliver_policy": "all", "ack_policy": "none", "mem_storage": true, "num_replicas": 1}})
	return string(b)
}

func callerHeader(id string) nats.Header {
	h := nats.Header{}
	h.Set(toolservice.CallerHeader, id)
	return h
}

// uuidish returns a random, unguessable id part: 128 bits in hex.
func uuidish(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
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

// deployEvents is a short first turn whose user message says text.
func deployEvents(t *testing.T, text string) []dshq.Event {
	t.Helper()
	msg, _ := json.Marshal(text)
	raws := []string{
		`{"type":"turn/start","seq":0,"time":1790000000001,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":1790000000002,"data":{"id":"m-1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":` + string(msg) + `}]},"surfaceOp":"append"}`,
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
