package projection

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/index"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/record"
)

func TestMain(m *testing.M) {
	// Bleve starts its analysis workers once per process, at package init.
	testnats.VerifyNoLeaks(m, goleak.IgnoreTopFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"))
}

// env is a test's server with the session stream and lease bucket. The
// projection's tests build it from testnats and bus, not testenv, because
// testenv opens projectors of this package; each test opens its own.
type env struct {
	t  testing.TB
	js jetstream.JetStream
	kv jetstream.KeyValue
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	js := testnats.JetStream(t, testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed}).Conn(t))
	cfg := bus.StreamConfig{LeaseTTL: 2 * time.Second}
	if _, err := bus.EnsureStream(ctx, js, cfg); err != nil {
		t.Fatalf("ensure stream: %v", err)
	}
	kv, err := bus.EnsureLeaseBucket(ctx, js, cfg)
	if err != nil {
		t.Fatalf("ensure lease bucket: %v", err)
	}
	return &env{t: t, js: js, kv: kv}
}

// publish publishes one raw record on dsh.log.<tok> and returns its stream
// sequence.
func (e *env) publish(tok string, data []byte) uint64 {
	e.t.Helper()
	ack, err := e.js.Publish(context.Background(), dshq.LogSubjectPrefix+tok, data)
	if err != nil {
		e.t.Fatalf("publish on %s: %v", tok, err)
	}
	return ack.Sequence
}

// publishLog publishes a JSONL log (header line first) and returns the
// session id and the last stream sequence.
func (e *env) publishLog(lines [][]byte) (string, uint64) {
	e.t.Helper()
	var h struct{ ID string }
	if err := json.Unmarshal(lines[0], &h); err != nil {
		e.t.Fatalf("header: %v", err)
	}
	tok := token(e.t, h.ID)
	var last uint64
	for _, l := range lines {
		last = e.publish(tok, l)
	}
	return h.ID, last
}

func token(t testing.TB, id string) string {
	t.Helper()
	tok, err := record.SubjectToken(id)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// publishAsync publishes records without waiting for each ack and returns
// the last stream sequence.
func (e *env) publishAsync(recs [][2]string) uint64 {
	e.t.Helper()
	var last uint64
	for len(recs) > 0 {
		window := recs[:min(len(recs), 1000)]
		recs = recs[len(window):]
		futures := make([]jetstream.PubAckFuture, 0, len(window))
		for _, r := range window {
			f, err := e.js.PublishAsync(dshq.LogSubjectPrefix+r[0], []byte(r[1]))
			if err != nil {
				e.t.Fatal(err)
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			select {
			case ack := <-f.Ok():
				last = max(last, ack.Sequence)
			case err := <-f.Err():
				e.t.Fatal(err)
			case <-time.After(30 * time.Second):
				e.t.Fatal("publish ack timed out")
			}
		}
	}
	return last
}

// readLines reads a JSONL file of testdata.
func readLines(t testing.TB, name string) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, append([]byte(nil), l...))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// withID returns lines with the header's id replaced.
func withID(t testing.TB, lines [][]byte, id string) [][]byte {
	t.Helper()
	var h map[string]any
	dec := json.NewDecoder(bytes.NewReader(lines[0]))
	dec.UseNumber()
	if err := dec.Decode(&h); err != nil {
		t.Fatal(err)
	}
	h["id"] = id
	hb, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return append([][]byte{hb}, lines[1:]...)
}

// running is a projector whose Run goroutine the test owns.
type running struct {
	t      testing.TB
	p      *Projector
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func (e *env) open(dir string, opts ...Option) *Projector {
	e.t.Helper()
	opts = append([]Option{WithLogger(quietLogger())}, opts...)
	p, err := Open(context.Background(), e.js, dir, opts...)
	if err != nil {
		e.t.Fatalf("open projector: %v", err)
	}
	return p
}

func (e *env) start(dir string, opts ...Option) *running {
	e.t.Helper()
	return run(e.t, e.open(dir, opts...))
}

func run(t testing.TB, p *Projector) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: t, p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// wait waits (bounded) for Run to return on its own and returns its error.
func (r *running) wait() error {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for stop
		return err
	case <-time.After(20 * time.Second):
		r.t.Fatal("Run did not return")
		return nil
	}
}

// stop cancels Run, waits for it and closes the projector; it returns Run's
// error.
func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
		if err := r.p.Close(); err != nil {
			r.t.Errorf("close projector: %v", err)
		}
	})
	return r.err
}

// waitGen waits until p has applied generation g.
func waitGen(t testing.TB, p *Projector, g uint64) {
	t.Helper()
	waitGenWithin(t, p, g, 20*time.Second)
}

func waitGenWithin(t testing.TB, p *Projector, g uint64, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := p.WaitGeneration(ctx, g); err != nil {
		t.Fatalf("wait for generation %d (at %d): %v", g, p.Generation(), err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

func view(t testing.TB, p *Projector, fn func(Snapshot) error) {
	t.Helper()
	if err := p.View(context.Background(), 0, fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// dumpStore renders every bucket of a store file except the epoch, for
// comparing two projections of the same stream.
func dumpStore(t testing.TB, p *Projector) string {
	t.Helper()
	var sb strings.Builder
	p.mu.RLock()
	db := p.cur.store.db
	p.mu.RUnlock()
	err := db.View(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			fmt.Fprintf(&sb, "[%s]\n", name)
			err := tx.Bucket(name).ForEach(func(k, v []byte) error {
				if bytes.Equal(name, bucketMeta) && bytes.Equal(k, metaEpoch) {
					return nil
				}
				fmt.Fprintf(&sb, "%q=%q\n", k, v)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// dumpIndex renders, for every valid session's event with semantic text,
// what the index holds for it (found by searching its own text in its
// session), plus the index's doc count.
func dumpIndex(t testing.TB, p *Projector) string {
	t.Helper()
	var lines []string
	view(t, p, func(s Snapshot) error {
		return s.SessionsByCreated(nil, func(info dshq.SessionInfo) bool {
			if !info.Valid() {
				return true
			}
			_ = s.Events(info.Header.Header.ID, 0, func(e dshq.StoredEvent) bool {
				if e.Text != "" {
					lines = append(lines, indexedDoc(t, p, e))
				}
				return true
			})
			return true
		})
	})
	st, err := p.Index().Stats()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return fmt.Sprintf("docs=%d\n%s", st.Docs, strings.Join(lines, "\n"))
}

func indexedDoc(t testing.TB, p *Projector, e dshq.StoredEvent) string {
	t.Helper()
	seq := float64(e.Record.Seq)
	q := strings.Fields(e.Text)[0]
	page, err := p.Index().SearchEvents(context.Background(), indexQuery(e.Record.SessionID, q, seq))
	if err != nil {
		return fmt.Sprintf("%s/%d: search error %v", e.Record.SessionID, e.Record.Seq, err)
	}
	if len(page.Hits) != 1 {
		return fmt.Sprintf("%s/%d: %d hits", e.Record.SessionID, e.Record.Seq, len(page.Hits))
	}
	h := page.Hits[0]
	return fmt.Sprintf("%s/%d %s %s", h.SessionID, h.Seq, h.Type, h.Surface)
}

var errCrash = errors.New("injected crash")

func indexQuery(id, q string, seq float64) index.EventQuery {
	return index.EventQuery{
		SessionID: id, Query: q, Limit: 10,
		Filters: []dshq.Filter{{Kind: dshq.FilterSeq, From: &seq, To: &seq}},
	}
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
