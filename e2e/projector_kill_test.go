package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bench"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/record"
)

// Sizes of the kill test.
const (
	killMinKills     = 12 // SIGKILLs at least
	killMaxKills     = 40 // and at most, while records still stream in
	killMaxDelay     = 1500 * time.Millisecond
	killStreamPeriod = 12 * time.Second // how long the corpus takes to stream in
)

// TestProjectorKilledAtRandomPointsEqualsAnUninterruptedRun streams a generated
// corpus (turns with tool calls and results, titles, compactions that replace
// the whole surface, English and Chinese text, forks and subagents) into a
// nats-server process, publishing each record as
// docs/protocol.md#2-the-session-log-stream says, while two cmd/projector
// processes project it: one runs uninterrupted; the other is SIGKILLed at
// random points (delays from a seeded RNG, during start-up and while
// projecting) and restarted on the same data directory each time. Once both
// have applied the whole stream, the canonical dumps of their directories
// (projection.DumpEntries: every bbolt entry and every Bleve document) are
// identical. Set DSHQ_KILL_SEED to replay a failed run's seed.
func TestProjectorKilledAtRandomPointsEqualsAnUninterruptedRun(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("DSHQ_KILL_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DSHQ_KILL_SEED: %v", err)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with DSHQ_KILL_SEED=%d)", seed, seed)
		}
	})
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))
	ctx := testCtx(t, 3*time.Minute)

	corpus, err := bench.GenerateCorpus(bench.CorpusConfig{Sessions: 60, Turns: 4, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := startPlainNATS(t)
	nc, err := nats.Connect(url, nats.Name("e2e-kill-publisher"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStream(ctx, js, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureLeaseBucket(ctx, js, bus.StreamConfig{}); err != nil {
		t.Fatal(err)
	}

	cleanDir, killedDir := t.TempDir(), t.TempDir()
	clean, cleanMetrics := startKillProjector(t, "projector (uninterrupted)", url, cleanDir, "clean", true)

	recs, err := interleave(corpus, rng)
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan publishResult, 1)
	pubCtx, stopPublishing := context.WithCancel(ctx)
	defer stopPublishing()
	go func() { published <- publishPaced(pubCtx, js, recs) }()

	kills, streaming := 0, true
	var result publishResult
	for kills < killMinKills || (streaming && kills < killMaxKills) {
		p, _ := startKillProjector(t, fmt.Sprintf("projector (run %d)", kills+1), url, killedDir, "killed", false)
		delay := time.Duration(rng.Int64N(int64(killMaxDelay)))
		select {
		case result = <-published:
			streaming = false
		case <-time.After(delay):
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited by itself: %v", p.name, p.err)
		default:
		}
		p.kill(t)
		kills++
	}
	if streaming {
		result = <-published
	}
	if result.err != nil {
		t.Fatalf("publish: %v", result.err)
	}
	t.Logf("%d records in %d sessions streamed in; projector SIGKILLed %d times", len(recs), len(corpus.Sessions), kills)

	last := streamLastSeq(t, nc)
	if last != uint64(len(recs)) {
		t.Fatalf("stream holds %d records, want %d", last, len(recs))
	}
	killed, killedMetrics := startKillProjector(t, "projector (final run)", url, killedDir, "killed", true)
	for name, m := range map[string]string{"uninterrupted": cleanMetrics, "killed": killedMetrics} {
		waitFor(t, 90*time.Second, "the "+name+" projector to apply the whole stream", func() (bool, error) {
			return scrape(t, m)["dshq_projector_generation"] == float64(last), nil
		})
	}
	clean.stop(t, 30*time.Second)
	killed.stop(t, 30*time.Second)

	want, err := projection.DumpEntries(cleanDir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := projection.DumpEntries(killedDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the killed projector's dump equals the uninterrupted one's", func(t *testing.T) {
		if diff := firstDiffs(got, want, 8); diff != "" {
			t.Fatalf("%d entries vs %d; first differences:\n%s", len(got), len(want), diff)
		}
	})
	t.Run("the dump covers every record, searchable text included", func(t *testing.T) {
		count := map[string]int{}
		for _, e := range want {
			count[e.Section]++
		}
		if count["sessions"] != len(corpus.Sessions) || count["events"] != corpus.Events() || count["quarantine"] != 0 {
			t.Errorf("dump holds %d sessions, %d events, %d quarantined; want %d, %d, 0",
				count["sessions"], count["events"], count["quarantine"], len(corpus.Sessions), corpus.Events())
		}
		if count["index"] == 0 || count["replaced"] == 0 || count["replacedby"] == 0 || count["children"] == 0 {
			t.Errorf("dump sections %v: no index docs, replacements or children", count)
		}
	})
}

// startKillProjector starts cmd/projector on data with its own durable
// consumer and a metrics listener. With ready it waits until the projector
// runs and returns its metrics URL.
func startKillProjector(t *testing.T, name, url, data, durable string, ready bool) (*proc, string) {
	t.Helper()
	p := startProc(t, name, bins.projector, []string{
		"--nats-url", url, "--data", data, "--durable", durable, "--no-queries", "--metrics", "127.0.0.1:0", "--batch-size", "256"}, nil)
	if !ready {
		return p, ""
	}
	line := p.waitLine(t, startTimeout, `"projector running"`, func(l string) bool { return strings.Contains(l, `"projector running"`) })
	var fields struct {
		Metrics string `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(line), &fields); err != nil || fields.Metrics == "" {
		t.Fatalf("ready line %q: no metrics address (%v)", line, err)
	}
	return p, "http://" + fields.Metrics + "/metrics"
}

// streamRecord is one record to publish on a session's subject.
type streamRecord struct {
	tok  string
	n    int // -1 for the header
	data []byte
}

// interleave orders the corpus's records as concurrent harnesses would
// write them: each session's in order, sessions interleaved at random in runs
// of one to eight records.
func interleave(c *bench.Corpus, rng *rand.Rand) ([]streamRecord, error) {
	var logs [][]streamRecord
	for _, s := range c.Sessions {
		tok, err := record.SubjectToken(s.Header.ID)
		if err != nil {
			return nil, err
		}
		h, err := record.EncodeHeader(dshq.HeaderRecord{Header: s.Header, FormatVersion: dshq.FormatVersion2, InheritedEventCount: s.Inherited})
		if err != nil {
			return nil, err
		}
		log := []streamRecord{{tok, -1, h}}
		for _, b := range s.Batches {
			for _, e := range b {
				log = append(log, streamRecord{tok, len(log) - 1, e.Raw})
			}
		}
		logs = append(logs, log)
	}
	var out []streamRecord
	for len(logs) > 0 {
		i := rng.IntN(len(logs))
		n := min(len(logs[i]), 1+rng.IntN(8))
		out = append(out, logs[i][:n]...)
		if logs[i] = logs[i][n:]; len(logs[i]) == 0 {
			logs = append(logs[:i], logs[i+1:]...)
		}
	}
	return out, nil
}

type publishResult struct{ err error }

// publishPaced publishes recs with their msg ids and expected subject
// sequences (docs/protocol.md#2-the-session-log-stream), spread over
// killStreamPeriod.
func publishPaced(ctx context.Context, js jetstream.JetStream, recs []streamRecord) publishResult {
	last := map[string]uint64{}
	const tick = 20 * time.Millisecond
	per := max(1, len(recs)/int(killStreamPeriod/tick))
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for i, r := range recs {
		if i%per == 0 {
			select {
			case <-ticker.C:
			case <-ctx.Done():
				return publishResult{ctx.Err()}
			}
		}
		id := r.tok + ":h"
		if r.n >= 0 {
			id = r.tok + ":" + strconv.Itoa(r.n)
		}
		ack, err := js.Publish(ctx, dshq.LogSubjectPrefix+r.tok, r.data,
			jetstream.WithMsgID(id), jetstream.WithExpectLastSequencePerSubject(last[r.tok]))
		if err != nil {
			return publishResult{fmt.Errorf("record %s: %w", id, err)}
		}
		last[r.tok] = ack.Sequence
	}
	return publishResult{}
}

// firstDiffs describes up to n entries where two dumps differ ("" when
// they are identical).
func firstDiffs(got, want []projection.DumpEntry, n int) string {
	var b strings.Builder
	for i := 0; i < max(len(got), len(want)) && n > 0; i++ {
		var g, w string
		if i < len(got) {
			g = got[i].String()
		}
		if i < len(want) {
			w = want[i].String()
		}
		if g != w {
			fmt.Fprintf(&b, "entry %d:\n  killed        %s\n  uninterrupted %s\n", i, g, w)
			n--
		}
	}
	return b.String()
}
