package node

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/internal/tenanttest"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/tenancy"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// hostileLengths are the length classes of an untrusted value: empty, one
// byte, either side of the 512-byte id limit, 3100 (the spill id that used
// to close the service's connection: its object-store subject passed the
// server's 4096-byte control line), 4096, and as much as the payload holds
// (0 here; fill computes it per request).
var hostileLengths = []int{0, 1, 511, 512, 513, 3100, 4096, -1}

// hostileRequest is one request of the table: its subject, caller header
// and body, built around an untrusted value.
type hostileRequest struct {
	subject string
	caller  string // the Dsh-Caller-Session header, "" for none
	body    func(v string) string
	// inCaller puts the value in the caller header instead of the body.
	inCaller bool
}

// fill returns a value of n bytes ('a's), or for n < 0 the longest value
// that keeps body and header within the payload.
func fill(n int, max int64, r hostileRequest) string {
	if n >= 0 {
		return strings.Repeat("a", n)
	}
	room := int(max) - 512 - len(r.subject) - len(r.caller) - len(r.body(""))
	return strings.Repeat("a", room)
}

// jsonString encodes v as a JSON string.
func jsonString(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// queryHostile returns the query API's requests: every endpoint, each of
// its fields (and an unknown field) carrying the value.
func queryHostile() map[string]hostileRequest {
	q := func(ep string) string { return dshq.QuerySubjectPrefix + "." + ep }
	out := map[string]hostileRequest{}
	add := func(name, ep, tmpl string) {
		out[ep+" "+name] = hostileRequest{subject: q(ep), body: func(v string) string {
			return strings.ReplaceAll(tmpl, "$V", jsonString(v))
		}}
	}
	for _, ep := range wire.Endpoints {
		unknown := ep + " unknown field"
		out[unknown] = hostileRequest{subject: q(ep), body: func(v string) string { return "{" + jsonString(v) + ":1}" }}
	}
	for _, ep := range []string{wire.EndpointSessionsRead, wire.EndpointSessionsSurface, wire.EndpointEventsList} {
		add("sessionId", ep, `{"sessionId":$V}`)
		add("cursor", ep, `{"sessionId":"s-7f3c","cursor":$V}`)
	}
	for _, ep := range []string{wire.EndpointSessionsTrace, wire.EndpointSessionsStat} {
		add("sessionId", ep, `{"sessionId":$V}`)
	}
	add("cursor", wire.EndpointSessionsList, `{"cursor":$V}`)
	add("cwd", wire.EndpointSessionsFilter, `{"filters":[{"kind":"cwd","values":[$V]}]}`)
	add("cursor", wire.EndpointSessionsFilter, `{"filters":[],"cursor":$V}`)
	add("query", wire.EndpointSessionsSearch, `{"query":$V}`)
	add("id filter", wire.EndpointSessionsSearch, `{"query":"retry","sessionFilters":[{"kind":"id","values":[$V]}]}`)
	add("cursor", wire.EndpointSessionsSearch, `{"query":"retry","cursor":$V}`)
	add("sessionIds", wire.EndpointSessionsTitles, `{"sessionIds":[$V]}`)
	add("sessionId", wire.EndpointEventsFilter, `{"sessionId":$V,"filters":[]}`)
	add("type filter", wire.EndpointEventsFilter, `{"sessionId":"s-7f3c","filters":[{"kind":"type","values":[$V]}]}`)
	add("text filter", wire.EndpointEventsFilter, `{"sessionId":"s-7f3c","filters":[{"kind":"text","text":$V}]}`)
	add("sessionId", wire.EndpointEventsSearch, `{"sessionId":$V,"query":"retry"}`)
	add("query", wire.EndpointEventsSearch, `{"sessionId":"s-7f3c","query":$V}`)
	add("cursor", wire.EndpointEventsSearch, `{"sessionId":"s-7f3c","query":"retry","cursor":$V}`)
	add("sessionId", wire.EndpointEventsRead, `{"sessionId":$V,"seq":1}`)
	add("sessionId", wire.EndpointEventsTrace, `{"sessionId":$V,"seq":1}`)
	return out
}

// toolsHostile returns the tools' requests on subject(endpoint): every tool,
// spill.read and list, with the value as the caller, as each argument and
// as an unknown argument.
func toolsHostile(subject func(endpoint string) string, caller string) map[string]hostileRequest {
	out := map[string]hostileRequest{}
	add := func(name, ep, tmpl string) {
		out[ep+" "+name] = hostileRequest{subject: subject(ep), caller: caller, body: func(v string) string {
			return strings.ReplaceAll(tmpl, "$V", jsonString(v))
		}}
	}
	valid := map[string]string{
		tools.NameSessionSearch:      `{"query":"retry"}`,
		tools.NameSessionEventSearch: `{"query":"retry"}`,
		tools.NameSessionTrace:       `{}`,
		tools.NameSessionEventTrace:  `{"seq":1}`,
		tools.NameSessionEventRead:   `{"seq":1}`,
		toolservice.EndpointList:     `{}`,
	}
	for ep, body := range valid {
		out[ep+" caller"] = hostileRequest{subject: subject(ep), inCaller: true, body: func(string) string { return body }}
		add("unknown argument", ep, `{$V:1}`)
	}
	add("query", tools.NameSessionSearch, `{"query":$V}`)
	add("session_ids", tools.NameSessionSearch, `{"query":"retry","session_ids":[$V]}`)
	add("cwd", tools.NameSessionSearch, `{"query":"retry","parent_session_ids":[$V]}`)
	add("query", tools.NameSessionEventSearch, `{"query":$V}`)
	add("session_id", tools.NameSessionEventSearch, `{"query":"retry","session_id":$V}`)
	add("session_id", tools.NameSessionTrace, `{"session_id":$V}`)
	add("session_id", tools.NameSessionEventTrace, `{"seq":1,"session_id":$V}`)
	add("session_id", tools.NameSessionEventRead, `{"seq":1,"session_id":$V}`)
	add("id", toolservice.EndpointSpillRead, `{"id":$V}`)
	add("unknown argument", toolservice.EndpointSpillRead, `{"id":"x",$V:1}`)
	out[toolservice.EndpointSpillRead+" caller"] = hostileRequest{subject: subject(toolservice.EndpointSpillRead), inCaller: true,
		body: func(string) string { return `{"id":"` + strings.Repeat("a", 22) + `"}` }}
	return out
}

// adminHostile returns dsh-admin's requests with the value as the body or
// as an unknown field.
func adminHostile() map[string]hostileRequest {
	out := map[string]hostileRequest{}
	for _, ep := range []string{admin.EndpointStatus, admin.EndpointStats, admin.EndpointRebuild} {
		subject := dshq.AdminSubjectPrefix + "." + ep
		out[ep+" body"] = hostileRequest{subject: subject, body: func(v string) string { return v }}
		out[ep+" unknown field"] = hostileRequest{subject: subject, body: func(v string) string { return "{" + jsonString(v) + ":1}" }}
	}
	return out
}

// send sends r with value v and reports whether an answer came, and the
// error code it carries ("" for a success).
func send(t *testing.T, nc *nats.Conn, r hostileRequest, v string) (code string) {
	t.Helper()
	msg := nats.NewMsg(r.subject)
	msg.Data = []byte(r.body(v))
	caller := r.caller
	if r.inCaller {
		caller = v
	}
	if caller != "" || r.inCaller {
		msg.Header.Set(toolservice.CallerHeader, caller)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		t.Fatalf("%s with a %d-byte value: no answer: %v", r.subject, len(v), err)
	}
	if c := reply.Header.Get(micro.ErrorCodeHeader); c != "" {
		return c
	}
	var tr toolservice.Reply
	if json.Unmarshal(reply.Data, &tr) == nil && tr.IsError && tr.Error != nil {
		return string(tr.Error.Code)
	}
	return ""
}

// answering checks that every service nc may use still answers a normal
// request: the tools on toolSubject, and unless tenant (whose credential
// reaches only its tools) dsh-query and dsh-admin.
func answering(t *testing.T, nc *nats.Conn, toolSubject func(string) string, caller string, tenant bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !tenant {
		page, err := query.NewClient(nc).ListSessions(ctx, dshq.SessionListRequest{})
		if err != nil || len(page.Items) == 0 {
			t.Fatalf("dsh-query no longer answers: %v, %+v", err, page)
		}
		if _, err := admin.NewClient(nc).Status(ctx); err != nil {
			t.Fatalf("dsh-admin no longer answers: %v", err)
		}
	}
	msg := nats.NewMsg(toolSubject(tools.NameSessionTrace))
	msg.Header.Set(toolservice.CallerHeader, caller)
	msg.Data = []byte(`{}`)
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		t.Fatalf("dsh-tools no longer answers: %v", err)
	}
	var r toolservice.Reply
	if err := json.Unmarshal(reply.Data, &r); err != nil || r.IsError || !strings.Contains(r.Text, "s-7f3c") {
		t.Fatalf("dsh-tools answers %s (%v)", reply.Data, err)
	}
}

// payloadSized returns the names of table whose requests carry the
// payload-sized value (the last length class): every one, or under the race
// detector, where decoding a body of about 1 MiB costs about a second (and
// analysing a search phrase of that size several), one per subject and place
// (body or caller header), so that every endpoint still decodes the largest
// value in each place it takes one: its unknown field where it has one (the
// whole body is decoded to refuse it), else its first field by name. Every
// field still meets every other length class.
func payloadSized(table map[string]hostileRequest) map[string]bool {
	type place struct {
		subject  string
		inCaller bool
	}
	names := slices.Sorted(maps.Keys(table))
	unknown := func(n string) bool {
		return strings.HasSuffix(n, " unknown field") || strings.HasSuffix(n, " unknown argument")
	}
	// The unknown fields first, each place's representative the first.
	slices.SortStableFunc(names, func(a, b string) int {
		switch ua, ub := unknown(a), unknown(b); {
		case ua && !ub:
			return -1
		case ub && !ua:
			return 1
		}
		return 0
	})
	seen := map[place]bool{}
	out := map[string]bool{}
	for _, n := range names {
		p := place{table[n].subject, table[n].inCaller}
		out[n] = !raceEnabled || !seen[p]
		seen[p] = true
	}
	return out
}

// runHostile sends every request of table with a value of every length
// class (the payload-sized one as payloadSized says) and checks after each
// request group that every service answers.
func runHostile(t *testing.T, nc *nats.Conn, table map[string]hostileRequest, toolSubject func(string) string, caller string, tenant bool) {
	sized := payloadSized(table)
	for name, r := range table {
		t.Run(name, func(t *testing.T) {
			for _, n := range hostileLengths {
				if n < 0 && !sized[name] {
					continue
				}
				v := fill(n, nc.MaxPayload(), r)
				code := send(t, nc, r, v)
				if code != "" && !strings.HasPrefix(code, "SESSION_QUERY_") && code != string(dshq.CodeInvalidArgs) {
					t.Errorf("%d-byte value: code %q", len(v), code)
				}
			}
			answering(t, nc, toolSubject, caller, tenant)
		})
	}
}

// TestHostileRequestsLeaveEveryServiceAnswering sends every endpoint of
// dsh-query, dsh-tools and dsh-admin an untrusted value of every length
// class in every field (and the tools' caller header) through the embedded
// stack: each request is answered, and every service answers normal
// requests afterwards (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys).
// It costs some 75 requests of about 1 MiB: 4 s; under the race detector,
// where decoding them took 80 s, each endpoint gets the largest size once
// per place (payloadSized).
func TestHostileRequestsLeaveEveryServiceAnswering(t *testing.T) {
	n := start(t, Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Parts: All})
	nc, js := dial(t, n.Info.ClientURL)
	publishSample(t, js)
	trusted := func(ep string) string { return dshq.ToolsSubjectPrefix + "." + ep }
	waitAnswering(t, nc, trusted, "s-7f3c")

	t.Run("dsh-query", func(t *testing.T) { runHostile(t, nc, queryHostile(), trusted, "s-7f3c", false) })
	t.Run("dsh-tools", func(t *testing.T) { runHostile(t, nc, toolsHostile(trusted, "s-7f3c"), trusted, "s-7f3c", false) })
	t.Run("dsh-admin", func(t *testing.T) { runHostile(t, nc, adminHostile(), trusted, "s-7f3c", false) })
	if exited, err := n.Exited(); exited {
		t.Fatalf("the node stopped: %v", err)
	}
}

// TestHostileToolCallsOfATenantLeaveEveryServiceAnswering is the same for
// the deployment's harness credential: a tenant's requests on its tool
// subjects, against a node that joins a server with tenant users.
func TestHostileToolCallsOfATenantLeaveEveryServiceAnswering(t *testing.T) {
	const tenant = "acme"
	e := tenanttest.StartListening(t, tenant)
	start(t, Config{Home: t.TempDir(), Conn: natsconn.Options{URL: e.ClientURL(), User: "trusted", Password: tenanttest.TrustedPassword}, Parts: All})
	tnc, _ := tenanttest.ConnectTenant(t, e, tenant)
	t.Cleanup(tnc.Close)
	store, err := bus.NewStore(context.Background(), tnc, bus.WithTenant(tenant))
	if err != nil {
		t.Fatal(err)
	}
	importSample(t, store)
	subject := func(ep string) string { return tenancy.ToolSubject(tenant, ep) }
	waitAnswering(t, tnc, subject, "s-7f3c")
	runHostile(t, tnc, toolsHostile(subject, "s-7f3c"), subject, "s-7f3c", true)

	// The trusted side is still up too.
	trusted, err := e.InProcessConn(nats.UserInfo("trusted", tenanttest.TrustedPassword))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(trusted.Close)
	answering(t, trusted, func(ep string) string { return dshq.ToolsSubjectPrefix + "." + ep }, "s-7f3c", false)
}

// importSample imports the sample session through store.
func importSample(t *testing.T, store *bus.Store) {
	t.Helper()
	f, err := os.Open("../projection/testdata/upstream-2.5.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := record.NewReader(f)
	hdr, err := r.Header()
	if err != nil {
		t.Fatal(err)
	}
	var events []dshq.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	if _, err := store.Import(context.Background(), hdr, events); err != nil {
		t.Fatal(err)
	}
}

// waitAnswering waits until the tools trace the sample session.
func waitAnswering(t *testing.T, nc *nats.Conn, subject func(string) string, caller string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msg := nats.NewMsg(subject(tools.NameSessionTrace))
		msg.Header.Set(toolservice.CallerHeader, caller)
		msg.Data = []byte(`{}`)
		reply, err := nc.RequestMsg(msg, 5*time.Second)
		if err == nil && strings.Contains(string(reply.Data), "s-7f3c") && !strings.Contains(string(reply.Data), `"isError":true`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sample session was not traced: %v %v", err, reply)
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}
