package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// clusterDoc is the page whose deployments the tests below run.
const clusterDoc = "../docs/cluster.md"

// docProc is one command of a deployment in docs/cluster.md.
type docProc struct {
	bin  string   // "projector" or "query"
	args []string // with $URLS and the data directories made the test's
}

// docDeployment reads the sh block under heading in docs/cluster.md: one
// command a line, a trailing comment dropped. $URLS becomes url, every
// /var/lib/dshq/NAME a directory under dir, and, since the test runs one
// nats-server, which holds one replica of a stream, --replicas 3 becomes
// --replicas 1.
func docDeployment(t testing.TB, heading, url, dir string) []docProc {
	t.Helper()
	b, err := os.ReadFile(clusterDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", clusterDoc, heading)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("%s: no sh block under %q", clusterDoc, heading)
	}
	block, _, _ = strings.Cut(block, "```")
	var out []docProc
	for line := range strings.Lines(block) {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		p := docProc{bin: f[0]}
		for i := 1; i < len(f); i++ {
			a := f[i]
			switch {
			case a == "$URLS":
				a = url
			case strings.HasPrefix(a, "/var/lib/dshq/"):
				a = filepath.Join(dir, strings.TrimPrefix(a, "/var/lib/dshq/"))
			case a == "3" && f[i-1] == "--replicas":
				a = "1"
			}
			p.args = append(p.args, a)
		}
		if p.bin != "projector" && p.bin != "query" {
			t.Fatalf("%s, %q: a command %q the test does not know", clusterDoc, heading, p.bin)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatalf("%s, %q: no commands", clusterDoc, heading)
	}
	return out
}

// start runs the command and waits until it runs.
func (d docProc) start(t testing.TB, name string) *proc {
	t.Helper()
	if d.bin == "query" {
		return startQuery(t, name, d.args...)
	}
	p := startProc(t, name, bins.projector, d.args, nil)
	p.waitLine(t, startTimeout, `"projector running"`, func(l string) bool { return strings.Contains(l, `"projector running"`) })
	return p
}

// startDocDeployment starts every command of the deployment under heading.
func startDocDeployment(t testing.TB, heading, url string) ([]docProc, []*proc) {
	t.Helper()
	cmds := docDeployment(t, heading, url, t.TempDir())
	procs := make([]*proc, len(cmds))
	for i, c := range cmds {
		procs[i] = c.start(t, fmt.Sprintf("%s %d (%s)", c.bin, i, heading))
	}
	return cmds, procs
}

// importToolCorpus imports the tools' own test corpus (tools/testdata/corpus:
// two workspaces, a lineage crossing between them, a session without cwd)
// with dshq import, one file at a time in name order, so that two
// deployments given it hold the same stream; it returns the last sequence.
func importToolCorpus(t *testing.T, url string, nc *nats.Conn) uint64 {
	t.Helper()
	files, err := filepath.Glob("../tools/testdata/corpus/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("the tools' corpus: %v (%d files)", err, len(files))
	}
	slices.Sort(files)
	for _, f := range files {
		runCLI(t, url, "import", f)
	}
	return streamLastSeq(t, nc)
}

// toolCall is one call of a tool over NATS. twin, when set, is the same
// call aimed at a session that does not exist: a session the caller may
// not see must be answered exactly as a missing one.
type toolCall struct {
	caller, tool, args, twin string
}

func (c toolCall) String() string { return fmt.Sprintf("%s %s as %q", c.tool, c.args, c.caller) }

// splitToolCalls are the five tools' calls the split deployments answer.
// s-caller is in workspace /home/u/proj and must learn nothing of
// /home/u/other (b-secret, s-b77c, b-caller) or of the cwd-less sessions.
var splitToolCalls = []toolCall{
	{"s-caller", tools.NameSessionTrace, `{"session_id":"b-secret"}`, `{"session_id":"zz-missing"}`},
	{"s-caller", tools.NameSessionTrace, `{"session_id":"n-nocwd"}`, `{"session_id":"zz-missing"}`},
	{"s-caller", tools.NameSessionEventRead, `{"session_id":"b-secret","seq":1,"before":1,"after":5}`, `{"session_id":"zz-missing","seq":1,"before":1,"after":5}`},
	{"s-caller", tools.NameSessionEventTrace, `{"session_id":"s-b77c","seq":1}`, `{"session_id":"zz-missing","seq":1}`},
	{"s-caller", tools.NameSessionEventSearch, `{"session_id":"b-secret","query":"retry budget"}`, `{"session_id":"zz-missing","query":"retry budget"}`},
	{"s-caller", tools.NameSessionSearch, `{"query":"SECRET-B-ROOT-TEXT"}`, `{"query":"no-such-text-anywhere"}`},
	{"s-caller", tools.NameSessionSearch, `{"query":"retry budget","session_ids":["b-secret","s-b77c","n-nocwd"]}`, `{"query":"retry budget","session_ids":["zz-missing"]}`},
	{"s-caller", tools.NameSessionSearch, `{"query":"retry budget","parent_session_ids":["b-secret"]}`, `{"query":"retry budget","parent_session_ids":["zz-missing"]}`},
	{"s-caller", tools.NameSessionTrace, `{}`, ""},
	{"s-caller", tools.NameSessionTrace, `{"session_id":"s-7f3c"}`, ""},
	{"s-caller", tools.NameSessionTrace, `{"session_id":"s-9a01"}`, ""},
	{"s-caller", tools.NameSessionSearch, `{"query":"retry budget"}`, ""},
	{"s-caller", tools.NameSessionSearch, `{"query":"retry budget","event_surfaces":["current","shadowed","log-only"],"availability":["live","persisted"]}`, ""},
	{"s-caller", tools.NameSessionSearch, `{"query":"retry budget","include_root_sessions":true}`, ""},
	{"s-caller", tools.NameSessionEventSearch, `{"query":"retry budget"}`, ""},
	{"s-caller", tools.NameSessionEventSearch, `{"query":"SECRET"}`, ""},
	{"s-caller", tools.NameSessionEventRead, `{"session_id":"s-7f3c","seq":1,"before":1,"after":1}`, ""},
	{"s-caller", tools.NameSessionEventRead, `{"session_id":"a-orphan","seq":1,"before":50,"after":50}`, ""},
	{"s-caller", tools.NameSessionEventTrace, `{"session_id":"s-7f3c","seq":2}`, ""},
	{"b-caller", tools.NameSessionSearch, `{"query":"retry budget"}`, ""},
	{"b-caller", tools.NameSessionTrace, `{"session_id":"s-b77c"}`, ""},
	{"b-caller", tools.NameSessionEventRead, `{"session_id":"b-secret","seq":1,"before":2,"after":2}`, ""},
	{"n-caller", tools.NameSessionSearch, `{"query":"retry budget"}`, ""},
	{"n-caller", tools.NameSessionTrace, `{"session_id":"n-nocwd"}`, ""},
	{"zz-missing", tools.NameSessionSearch, `{"query":"retry budget"}`, ""},
	{"", tools.NameSessionSearch, `{"query":"retry budget"}`, ""},
}

// secretsOfB are what an s-caller call must never show.
var secretsOfB = []string{"b-secret", "s-b77c", "b-caller", "n-nocwd", "n-caller", "SECRET", "/home/u/other"}

// callReply calls tool on nc as caller, answered by a projection that has
// applied generation gen (every shard, whichever replica: a harness's
// read-your-writes), and returns the reply as JSON.
func callReply(ctx context.Context, nc *nats.Conn, gen uint64, caller, tool, args string) (string, error) {
	r, err := toolservice.NewClient(nc, caller).AtGeneration(gen).Call(ctx, tool, json.RawMessage(args))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(r)
	return string(b), err
}

// TestToolsOnThePartitionedDeployment runs the partitioned deployment of
// docs/cluster.md (three shard projectors, the feed's projector, a query
// process) and, on a server of its own, one projection (a projector and a
// query process), imports the same corpus into both with dshq import, and
// calls the five tools over NATS on each: the partitioned deployment lists
// dsh-tools, answers every call byte for byte as one projection does, shows
// a caller nothing of another workspace and answers a hidden session as a
// missing one.
func TestToolsOnThePartitionedDeployment(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 4*time.Minute)
	oneURL, _ := startPlainNATS(t)
	url, _ := startPlainNATS(t)
	startProjector(t, "projector (one projection)", oneURL, t.TempDir())
	startQuery(t, "query (one projection)", "--nats-url", oneURL)
	startDocDeployment(t, "## Partitioned projectors", url)

	oneNC, nc := connectTrusted(t, oneURL), connectTrusted(t, url)
	t.Run("the deployment lists dsh-tools", func(t *testing.T) {
		msg, err := nc.Request("$SRV.PING."+dshq.ToolsService, nil, 10*time.Second)
		if err != nil {
			t.Fatalf("$SRV.PING.%s: %v", dshq.ToolsService, err)
		}
		var ping struct{ Name string }
		if err := json.Unmarshal(msg.Data, &ping); err != nil || ping.Name != dshq.ToolsService {
			t.Fatalf("ping reply %s (%v)", msg.Data, err)
		}
		// The operator's own check, when the nats CLI is at hand
		// (go install github.com/nats-io/natscli/nats@latest).
		nats, err := exec.LookPath("nats")
		if err != nil {
			t.Log("no nats CLI on PATH: nats micro ls not run (the ping above is its request)")
			return
		}
		out, err := exec.CommandContext(ctx, nats, "--server", url, "micro", "ls").CombinedOutput()
		if err != nil || !strings.Contains(string(out), dshq.ToolsService) || !strings.Contains(string(out), dshq.QueryService) {
			t.Fatalf("nats micro ls: %v\n%s", err, out)
		}
		t.Logf("nats micro ls:\n%s", out)
	})
	oneLast, last := importToolCorpus(t, oneURL, oneNC), importToolCorpus(t, url, nc)
	if oneLast != last {
		t.Fatalf("the two streams differ: last sequence %d and %d", oneLast, last)
	}
	waitCaughtUp(t, query.NewClient(oneNC), last)
	waitCaughtUp(t, query.NewClient(nc), last)

	answered := 0 // the calls that were not errors
	for _, c := range splitToolCalls {
		t.Run(c.String(), func(t *testing.T) {
			want, err := callReply(ctx, oneNC, last, c.caller, c.tool, c.args)
			if err != nil {
				t.Fatalf("one projection: %v", err)
			}
			got, err := callReply(ctx, nc, last, c.caller, c.tool, c.args)
			if err != nil {
				t.Fatalf("partitioned: %v", err)
			}
			if got != want {
				t.Fatalf("partitioned:\n%s\none projection:\n%s", got, want)
			}
			if !strings.Contains(got, `"isError":true`) {
				answered++
			}
			if c.caller == "s-caller" {
				for _, s := range secretsOfB {
					if strings.Contains(got, s) {
						t.Fatalf("the reply shows %q of another workspace:\n%s", s, got)
					}
				}
			}
			if c.twin != "" {
				missing, err := callReply(ctx, nc, last, c.caller, c.tool, c.twin)
				if err != nil {
					t.Fatal(err)
				}
				if got != missing {
					t.Fatalf("hidden and missing differ:\nhidden  %s\nmissing %s", got, missing)
				}
			}
		})
	}
	if answered < len(splitToolCalls)/2 {
		t.Fatalf("only %d of %d calls answered without an error: the comparison says little", answered, len(splitToolCalls))
	}
	t.Logf("%d tool calls over NATS, the same replies on both deployments (%d of them answers, the rest errors alike)", len(splitToolCalls), answered)
}

// TestToolsThroughAReplicasDeath runs the replica deployment of
// docs/cluster.md (two projection replicas, a query process), imports the
// tools' corpus and calls the five tools over NATS in a loop while one
// replica is SIGKILLed and restarted, then the other: every call answers,
// and answers as before.
func TestToolsThroughAReplicasDeath(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 4*time.Minute)
	url, _ := startPlainNATS(t)
	cmds, procs := startDocDeployment(t, "## Projection replicas", url)
	nc := connectTrusted(t, url)
	last := importToolCorpus(t, url, nc)
	waitCaughtUp(t, query.NewClient(nc), last)
	want := make([]string, len(splitToolCalls))
	for i, c := range splitToolCalls {
		var err error
		if want[i], err = callReply(ctx, nc, last, c.caller, c.tool, c.args); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}

	var (
		ok     atomic.Int64
		mu     sync.Mutex // guards failed
		failed []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ops := &opLog{}
		paced(ctx, stop, failoverQueryPace, ops, "tool", nil, func(ctx context.Context, i int) (string, bool, error) {
			c := splitToolCalls[i%len(splitToolCalls)]
			got, err := callReply(ctx, nc, last, c.caller, c.tool, c.args)
			switch {
			case err != nil:
			case got != want[i%len(splitToolCalls)]:
				err = fmt.Errorf("answered\n%s\nwant\n%s", got, want[i%len(splitToolCalls)])
			default:
				ok.Add(1)
			}
			if err != nil {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s: %v", c, err))
				mu.Unlock()
			}
			return c.String(), false, err
		})
	})
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopLoad)
	flow := func(what string) {
		t.Helper()
		base := ok.Load()
		waitFor(t, time.Minute, "tool calls to answer "+what, func() (bool, error) { return ok.Load() >= base+int64(len(splitToolCalls)), nil })
	}
	flow("with both replicas")
	for i, c := range cmds {
		if c.bin != "projector" {
			continue
		}
		procs[i].kill(t)
		flow(fmt.Sprintf("with replica %d dead", i))
		procs[i] = c.start(t, fmt.Sprintf("projector %d (restarted)", i))
		flow(fmt.Sprintf("after replica %d restarted", i))
	}
	stopLoad()
	if len(failed) > 0 {
		t.Errorf("%d of %d tool calls failed or answered otherwise:\n%s", len(failed), int(ok.Load())+len(failed), strings.Join(failed, "\n"))
	}
	t.Logf("%d tool calls through two replica deaths, all answered as before", ok.Load())
}
