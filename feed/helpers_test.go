package feed

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/record"

	"github.com/dshq/dshq/internal/golden"
)

func TestMain(m *testing.M) { testnats.VerifyNoLeaks(m) }

// startServer starts a test's in-process server (testnats); configure
// adjusts its options (users, permissions, limits).
func startServer(t testing.TB, configure ...func(*server.Options)) *testnats.Server {
	t.Helper()
	return testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed, Configure: func(o *server.Options) {
		for _, c := range configure {
			c(o)
		}
	}})
}

// connect opens an in-process connection and its JetStream context.
func connect(t testing.TB, srv *testnats.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := srv.Conn(t, opts...)
	return nc, testnats.JetStream(t, nc)
}

// setup starts a server with the feed stream (cfg) and returns a publisher
// and the JetStream context.
func setup(t testing.TB, cfg StreamConfig) (*Publisher, jetstream.JetStream) {
	t.Helper()
	srv := startServer(t)
	_, js := connect(t, srv)
	if _, err := EnsureStream(testContext(t), js, cfg); err != nil {
		t.Fatalf("ensure stream: %v", err)
	}
	return NewPublisher(js), js
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wsOf(cwd string) string { return record.WorkspaceKey(&cwd) }

func tokenOf(t testing.TB, id string) string {
	t.Helper()
	tok, err := record.SubjectToken(id)
	if err != nil {
		t.Fatalf("token of %q: %v", id, err)
	}
	return tok
}

// eventMsg builds an event message.
func eventMsg(t testing.TB, gen uint64, cwd, id string, seq int64) Message {
	raw := []byte(`{"type":"user/message","seq":` + itoa(seq) + `,"time":1,"data":{}}`)
	return Message{
		V: Version, Kind: KindEvent, Generation: gen, Workspace: wsOf(cwd), Token: tokenOf(t, id), SessionID: id,
		Event: &EventBody{
			EventRecord: dshq.EventRecord{SessionID: id, Seq: seq, Type: dshq.TypeUserMessage, Time: 1, Surface: dshq.SurfaceCurrent},
			Text:        "hello " + itoa(seq), Raw: raw, RawBytes: len(raw),
		},
	}
}

// leaseMsg builds a lease message.
func leaseMsg(t testing.TB, gen uint64, cwd, id string, live bool) Message {
	return Message{V: Version, Kind: KindLease, Generation: gen, Workspace: wsOf(cwd), Token: tokenOf(t, id),
		SessionID: id, Lease: &LeaseBody{Live: live}}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// golden compares got with testdata/<name>, rewriting it under -update.
func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

// identity is a delivered or published message without its position.
func identity(t testing.TB, m Message) string {
	t.Helper()
	m.Position = 0
	b, err := Encode(&m)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return string(b)
}
