package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
)

// TestImportRidesThroughALeaderElection SIGKILLs the session stream's
// leader on a three-server cluster and runs dshq import at once, through
// the surviving servers: the import waits out the election (the SDK's
// failover-aware path, saying so on stderr) and stores every file, with no
// retry by hand; a second import finds them all present.
func TestImportRidesThroughALeaderElection(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	c := startNATSCluster(t, 3)
	mon := connectCluster(t, c, "e2e-monitor", 0)
	if _, err := bus.NewStore(ctx, mon, bus.WithStreamConfig(bus.StreamConfig{Replicas: 3})); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(mon)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{dshq.SessionStream, "KV_" + dshq.LeaseBucket} {
		waitStreamCurrent(t, js, s, 3, startTimeout)
	}
	data, err := os.ReadFile(filepath.Join("..", "capture", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "7d1c2a40-0000-4000-8000-00000000a001"
	dir := t.TempDir()
	var files []string
	for i := range 20 {
		sid := fmt.Sprintf("7d1c2a40-0000-4000-8000-%012d", i)
		p := filepath.Join(dir, sid+".jsonl")
		if err := os.WriteFile(p, bytes.ReplaceAll(data, []byte(id), []byte(sid)), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}

	leader := waitStreamLeader(t, js, dshq.SessionStream, "", 30*time.Second)
	nd := c.node(t, leader)
	first := slices.IndexFunc(c.nodes, func(n *clusterNode) bool { return n != nd })
	c.kill(t, nd)
	killed := time.Now()

	home := t.TempDir()
	importOnce := func() (importCounts, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bins.dshq, append([]string{"import", "--json", "--nats-url", c.urls(first), "--user", "trusted"}, files...)...)
		cmd.Env = append(os.Environ(), "DSH_NATS_PASSWORD="+trustedPassword, "HOME="+home)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("dshq import right after the leader's SIGKILL: %v\nstderr: %s", err, stderr.Bytes())
		}
		var sum importCounts
		if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
			t.Fatalf("import --json: %v\n%s", err, stdout.Bytes())
		}
		return sum, stderr.String()
	}
	sum, stderr := importOnce()
	t.Logf("import done %v after the SIGKILL of %s; its stderr: %q", time.Since(killed).Round(time.Millisecond), leader, strings.TrimSpace(stderr))
	if len(sum.Imported) != len(files) || len(sum.Refused) != 0 {
		t.Fatalf("import: %d imported, %d refused of %d files", len(sum.Imported), len(sum.Refused), len(files))
	}
	if again, _ := importOnce(); len(again.Present) != len(files) {
		t.Fatalf("a second import: %d present of %d", len(again.Present), len(files))
	}
}

// importCounts is what the test reads of dshq import --json.
type importCounts struct {
	Imported []json.RawMessage `json:"imported"`
	Present  []json.RawMessage `json:"present"`
	Refused  []json.RawMessage `json:"refused"`
}
