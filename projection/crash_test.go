package projection

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// mixedCorpus is several sessions' logs interleaved record by record, with
// bad records among them, so that batches span sessions, replacements,
// quarantines and invalidations.
func mixedCorpus(t testing.TB) [][2]string {
	t.Helper()
	base := readLines(t, "upstream-2.5.jsonl")
	var logs [][][]byte
	for i := range 4 {
		logs = append(logs, withID(t, base, fmt.Sprintf("s-%d", i)))
	}
	bad := withID(t, base, "s-bad")
	bad = append(bad[:6:6], append([][]byte{[]byte(`{"type":"turn/start","seq":99,"time":1,"data":{}}`)}, bad[6:]...)...)
	logs = append(logs, bad, [][]byte{[]byte(`{"type":"session","version":9,"id":"s-v9","createdAt":1,"isSeeded":false}`), line(turnStart, 0)})
	var out [][2]string
	for i := 0; ; i++ {
		more := false
		for _, l := range logs {
			if i < len(l) {
				var h struct{ ID string }
				mustUnmarshal(t, l[0], &h)
				out = append(out, [2]string{token(t, h.ID), string(l[i])})
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

func (e *env) publishAll(recs [][2]string) uint64 {
	var last uint64
	for _, r := range recs {
		last = e.publish(r[0], []byte(r[1]))
	}
	return last
}

// crashAt returns a hook that fails at the n-th time point is reached.
func crashAt(point string, n int64) func(string, uint64) error {
	var seen atomic.Int64
	return func(p string, _ uint64) error {
		if p == point && seen.Add(1) == n {
			return errCrash
		}
		return nil
	}
}

func TestProjector_CrashAndRestartYieldsTheCleanProjection(t *testing.T) {
	e := newEnv(t)
	corpus := mixedCorpus(t)
	half := len(corpus) / 2
	e.publishAll(corpus[:half])
	last := e.publishAll(corpus[half:])

	want := e.cleanRun(last, WithBatchSize(7))

	cases := []struct {
		name  string
		point string
		n     int64
	}{
		{"a crash before the index applied a batch", "before-index", 3},
		{"a crash after the index applied a batch but before the store committed it", "before-commit", 5},
		{"a crash after the commit but before the ack", "before-ack", 4},
		{"a crash before the very first commit", "before-commit", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := []Option{WithBatchSize(7)}
			crashing := e.start(dir, append(opts, withHook(crashAt(c.point, c.n)))...)
			if err := crashing.wait(); !errors.Is(err, errCrash) {
				t.Fatalf("Run returned %v, want the injected crash", err)
			}
			crashing.stop()
			again := e.start(dir, opts...)
			waitGen(t, again.p, last)
			want.check(t, again.p, "after crash and restart")
			again.stop() // one projector per durable consumer at a time
		})
	}
	t.Run("closing the bbolt file under the running projector", func(t *testing.T) {
		dir := removableDir(t)
		var closed atomic.Bool
		var target atomic.Pointer[Projector]
		p := e.open(dir, WithBatchSize(5), withHook(func(point string, gen uint64) error {
			if point == "before-ack" && gen > uint64(half) && closed.CompareAndSwap(false, true) {
				// The loop holds no transaction between commit and ack.
				return target.Load().current().store.db.Close()
			}
			return nil
		}))
		target.Store(p)
		r := run(t, p)
		if err := r.wait(); err == nil {
			t.Fatal("Run ended without error on a closed store")
		}
		r.stop()
		again := e.start(dir, WithBatchSize(5))
		waitGen(t, again.p, last)
		want.check(t, again.p, "")
	})
}

func withHook(h func(string, uint64) error) Option { return func(c *config) { c.hook = h } }

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// projDump is what a projection holds: its store's and its index's dumps.
type projDump struct{ store, index string }

func dumpOf(t testing.TB, p *Projector) projDump {
	t.Helper()
	return projDump{store: dumpStore(t, p), index: dumpIndex(t, p)}
}

// cleanRun projects the stream through last in a new directory, as an
// uninterrupted run does, and returns what that projection holds.
func (e *env) cleanRun(last uint64, opts ...Option) projDump {
	e.t.Helper()
	clean := e.start(e.t.TempDir(), opts...)
	waitGen(e.t, clean.p, last)
	d := dumpOf(e.t, clean.p)
	clean.stop()
	return d
}

// check reports where p's store and index differ from d (a clean run's),
// saying when they were read ("after the kill"; "" for no moment).
func (d projDump) check(t testing.TB, p *Projector, when string) {
	t.Helper()
	d.same(t, dumpOf(t, p), when)
}

// same reports where got differs from d (a clean run's), as check.
func (d projDump) same(t testing.TB, got projDump, when string) {
	t.Helper()
	if when != "" {
		when += " "
	}
	if got.store != d.store {
		t.Errorf("store %sdiffers from a clean run:\n%s", when, diffLines(got.store, d.store))
	}
	if got.index != d.index {
		t.Errorf("index %sdiffers from a clean run:\n%s", when, diffLines(got.index, d.index))
	}
}

// diffLines lists the lines only in got (+) and only in want (-).
func diffLines(got, want string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	g, w := in(got), in(want)
	var b strings.Builder
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	return b.String()
}

// removableDir is t.TempDir for a projection whose store was closed under a
// running projector: Bleve's persister may still be unlinking obsolete
// segment files of the abandoned index for a moment after Close returns, so
// the removal is retried (bounded) instead of failing the test on a race
// that has nothing to do with what the test checks.
func removableDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dshq-crash-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.After(10 * time.Second)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			err := os.RemoveAll(dir)
			if err == nil {
				return
			}
			select {
			case <-deadline:
				t.Errorf("remove %s: %v", dir, err)
				return
			case <-tick.C:
			}
		}
	})
	return dir
}
