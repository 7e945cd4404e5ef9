package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools/toolservice"
)

// TestServeAllInOne runs `dshq serve` the way a newcomer does — its own
// embedded NATS server, data under --home — with a harness process writing
// through it; checks the answers against what the harness wrote; stops it
// with SIGTERM (a clean exit) and starts it again on the same home, where it
// comes back at the same generation with the same answers.
func TestServeAllInOne(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	home := t.TempDir()
	args := []string{"serve", "--home", home, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}
	serve, ready := startServe(t, "dshq serve (embedded)", args)
	url, _ := ready["nats"].(string)
	if !strings.HasPrefix(url, "nats://127.0.0.1:") || ready["embedded"] != true {
		t.Fatalf("ready line: %v", ready)
	}

	facts := filepath.Join(t.TempDir(), "sim0.json")
	sim := startProc(t, "harnesssim 0", bins.harnesssim, []string{"--nats-url", url, "--index", "0", "--facts", facts, "--bulk", "2"}, nil)
	if err := sim.wait(t, 2*time.Minute); err != nil {
		t.Fatalf("harnesssim: %v", err)
	}
	c := loadCorpus(t, []string{facts})

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	q := query.NewClient(nc)
	last := streamLastSeq(t, nc)
	waitCaughtUp(t, q, last)
	waitNoneLive(t, q)
	checkCorpus(t, ctx, q, func(_ int, caller string) *toolservice.Client { return toolservice.NewClient(nc, caller) }, c)
	before := takeSnapshot(t, ctx, q, c)
	nc.Close()
	serve.stop(t, 30*time.Second)

	t.Run("a restart on the same home serves the same projection", func(t *testing.T) {
		restarted, ready := startServe(t, "dshq serve (embedded, restarted)", args)
		if gen, _ := ready["generation"].(float64); uint64(gen) != last {
			t.Errorf("restarted at generation %v, want %d", ready["generation"], last)
		}
		url, _ := ready["nats"].(string)
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		after := takeSnapshot(t, ctx, query.NewClient(nc), c)
		for _, k := range before.keys {
			if before.answers[k] != after.answers[k] {
				t.Errorf("%s:\nbefore %s\n after %s", k, before.answers[k], after.answers[k])
			}
		}
		restarted.stop(t, 30*time.Second)
	})
}
