package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/query"
)

// readAll reads every session listed and checks each reads in full: n
// sessions, each with the sample's 18 events.
func readAll(t *testing.T, url string, gen uint64, want []string) {
	t.Helper()
	nc, _ := dial(t, url)
	c := query.NewClient(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	page, err := c.ListSessions(ctx, dshq.SessionListRequest{}, query.WithMinGeneration(gen))
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != len(want) {
		t.Fatalf("%d sessions listed; want %v", len(page.Items), want)
	}
	for _, id := range want {
		r, err := c.ReadSession(ctx, dshq.SessionReadRequest{SessionID: id})
		if err != nil || len(r.Events) != 18 {
			t.Fatalf("read %s: %v (%d events)", id, err, len(r.Events))
		}
	}
}

// The case: a home used with --nats-url against one server, then
// with its own embedded server (a fresh stream, other records). The
// projection records the stream it was built from and is rebuilt from the
// new one, so every session of the new stream reads (they used to read
// "not found", their records taken as already applied).
func TestRun_AHomeStartedAgainstAnotherStreamIsRebuiltFromIt(t *testing.T) {
	home := t.TempDir()
	other := testnats.Start(t, embedded.Config{Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed})
	n := start(t, Config{Home: home, Conn: natsconn.Options{URL: other.ClientURL()}, Parts: All})
	_, js := dial(t, other.ClientURL())
	var gen uint64
	var first []string
	for i := range 3 {
		id := fmt.Sprintf("cluster-%d", i)
		gen, first = publishAs(t, js, id), append(first, id)
	}
	readAll(t, other.ClientURL(), gen, first)
	if err := n.Stop(t); err != nil {
		t.Fatal(err)
	}

	n = start(t, Config{Home: home, Listen: "127.0.0.1:0", RelaxedSync: true, Parts: All})
	_, js = dial(t, n.Info.ClientURL)
	gen = publishAs(t, js, "local-0") // 19 records: fewer than the old checkpoint
	readAll(t, n.Info.ClientURL, gen, []string{"local-0"})
	if err := n.Stop(t); err != nil {
		t.Fatal(err)
	}
}
