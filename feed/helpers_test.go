package feed

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startServer starts an in-process nats-server with JetStream in a temp
// dir; configure adjusts its options (users, permissions).
func startServer(t testing.TB, configure ...func(*server.Options)) *server.Server {
	t.Helper()
	opts := &server.Options{
		ServerName: "feed-test",
		JetStream:  true,
		StoreDir:   t.TempDir(),
		DontListen: true,
		NoSigs:     true,
		NoLog:      true,
	}
	for _, c := range configure {
		c(opts)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	return srv
}

// connect opens an in-process connection and its JetStream context.
func connect(t testing.TB, srv *server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect("", append([]nats.Option{nats.InProcessServer(srv)}, opts...)...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
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
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from golden (run with -update and review the diff):\n got: %s\nwant: %s", name, got, want)
	}
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
