package follow_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
)

// bigLineMiB is the size of the long line TestAWatchReleasesALongLine
// writes (the 50 MB).
const bigLineMiB = 50

// rss returns the process's resident set size (Linux: /proc/self/statm).
func rss(t *testing.T) uint64 {
	t.Helper()
	n, err := readRSS()
	if err != nil {
		t.Skipf("no resident size: %v", err)
	}
	return n
}

func readRSS() (uint64, error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/self/statm reads %q", b)
	}
	pages, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return 0, err
	}
	return pages * uint64(os.Getpagesize()), nil
}

// samplePeakRSS samples the resident size every 5 ms until the returned
// func is called, which stops the sampler and returns the peak seen (the
// one sampler the memory tests share; a figure to print, not to assert on
// a busy machine's timing).
func samplePeakRSS(t *testing.T) (stop func() uint64) {
	t.Helper()
	var peak atomic.Uint64
	peak.Store(rss(t))
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if n, err := readRSS(); err == nil {
				peak.Store(max(peak.Load(), n))
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop = func() uint64 {
		once.Do(func() { close(done); <-sampled })
		return peak.Load()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestAWatchReleasesALongLine follows a transcript that gains a 50 MiB
// line while its session is live, and prints the process's resident size
// (the watcher and the embedded server it publishes to): before the line,
// at its peak (sampled every 5 ms, a figure, not asserted), and once the
// line is published with the file still live. The memory the line cost
// is given back: what stays resident after it is bounded by half the line
// (the server's cache of the messages just stored included), where the
// runtime used to keep it all.
func TestAWatchReleasesALongLine(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 50 MiB line")
	}
	if raceDetector {
		t.Skip("resident sizes mean nothing under the race detector (its shadow memory): run without -race")
	}
	data, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ls := bytes.SplitAfter(data, []byte("\n"))
	root := t.TempDir()
	path := filepath.Join(root, "proj", "7d1c2a40-0000-4000-8000-00000000a001.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Join(ls[:3], nil), 0o644); err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	w := runWatcher(t, follow.Config{Store: st, Roots: []follow.Root{{Format: capture.FormatClaudeCode, Dir: root}}, Idle: time.Hour})
	_, next := w.wait(t, 0, time.Minute, "publication", kind(follow.ReportPublished))
	text := strings.Repeat("the kiln overshoots ", bigLineMiB<<20/20)
	big := bytes.Replace(ls[2], []byte("Why does the kiln controller overshoot the setpoint?"), []byte(text), 1)
	text = ""
	debug.FreeOSMemory() // the baseline: what the test itself holds, resident
	before := rss(t)

	stopSampling := samplePeakRSS(t)
	appendTo(t, path, big)
	_, next = w.wait(t, next, 2*time.Minute, "publication of the long line", func(r follow.Report) bool {
		return r.Kind == follow.ReportPublished && r.Events > bigLineMiB/2
	})
	// One more line, once published, says the worker is done with the
	// long one.
	appendTo(t, path, ls[3])
	w.wait(t, next, time.Minute, "publication of the next line", kind(follow.ReportPublished))
	peak := stopSampling()
	const mib = 1 << 20
	// What stays resident once the line is published: the watch gives its
	// memory back at once (debug.FreeOSMemory), but this process also holds
	// the embedded server, whose garbage from storing the 50 MiB record
	// comes after that (a real watch is a process of its own). So the test
	// waits for the resident size to fall back, collecting at each sample
	// (the runtime's scavenger then returns what the server left): a watch
	// that keeps the line, or its buffers, for good never falls back.
	// Sampled every 50 ms, up to two minutes.
	bound := int64(len(big)) / 2
	after := rss(t)
	fell := time.NewTimer(2 * time.Minute)
	defer fell.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for held := int64(after) - int64(before); held > bound; held = int64(after) - int64(before) {
		select {
		case <-fell.C:
			t.Fatalf("%d MiB more stay resident two minutes after a %d MiB line (resident %d MiB before, %d MiB at its peak)",
				held/mib, len(big)/mib, before/mib, peak/mib)
		case <-tick.C:
			runtime.GC()
			after = rss(t)
		}
	}
	t.Logf("a %d MiB line: resident %d MiB before, %d MiB at its peak, %d MiB once it is published (the file still live)",
		len(big)/mib, before/mib, peak/mib, after/mib)
}
