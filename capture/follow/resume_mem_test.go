package follow_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
)

// TestAWatchResumesALargeFileAPieceAtATime has a watch find transcripts
// it has not stored (the first watch of a root that holds long sessions):
// one of 16 MiB, then one of 64 MiB, each moved into the root whole. It
// prints the process's resident size before each and at its peak (sampled
// every 5 ms): the watch and the embedded server it publishes to, whose
// ingest queues grow with how fast the watch publishes (a quiet machine
// saw the 64 MiB file rise 92 to 180 MiB, GOGC 100 up to 307). The watch
// reads a file in pieces and publishes each as it goes, so it never holds
// the file, its lines and their events at once, which is what reading the
// whole file to resume it did: the 64 MiB file rose 705 MiB (11 times its
// size; 168 MiB for the 16 MiB one). The bound is 6 times the file.
func TestAWatchResumesALargeFileAPieceAtATime(t *testing.T) {
	if testing.Short() {
		t.Skip("writes transcripts of 16 and 64 MiB")
	}
	if raceDetector {
		t.Skip("resident sizes mean nothing under the race detector (its shadow memory): run without -race")
	}
	data, err := os.ReadFile(filepath.Join("..", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ls := bytes.SplitAfter(data, []byte("\n"))
	// Collections kept close to the live heap: the peak says what the
	// watch holds, not where the collector's pacing happened to land.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	root := t.TempDir()
	dir := filepath.Join(root, "proj")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// session returns the transcript's opening as session n's.
	session := func(n int) (string, []byte) {
		id := fmt.Sprintf("7d1c2a40-0000-4000-8000-00000000a%03d", n)
		return id, bytes.ReplaceAll(bytes.Join(ls[:3], nil), []byte("7d1c2a40-0000-4000-8000-00000000a001"), []byte(id))
	}
	// A small session first: the watch and its server warm, their buffers
	// allocated, before the first baseline.
	id, small := session(0)
	if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), small, 0o644); err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	w := runWatcher(t, follow.Config{Store: st, Roots: []follow.Root{{Format: capture.FormatClaudeCode, Dir: root}}, Idle: time.Hour})
	_, next := w.wait(t, 0, time.Minute, "publication of the small session", kind(follow.ReportPublished))

	const mib = 1 << 20
	// resume writes session n of MiB mebibytes beside the root, moves it
	// in whole and returns how far the resident size rose above its start
	// until the file was published.
	resume := func(n, size int) int64 {
		id, file := session(n)
		text := strings.Repeat("the kiln overshoots ", 64<<10/20)
		parent, lines := "u-1", 0
		for len(file) < size*mib {
			uuid := fmt.Sprintf("u-big-%d", lines)
			l := bytes.Replace(ls[2], []byte("Why does the kiln controller overshoot the setpoint?"), []byte(text), 1)
			l = bytes.Replace(l, []byte(`"uuid":"u-1"`), []byte(`"uuid":"`+uuid+`"`), 1)
			l = bytes.Replace(l, []byte(`"parentUuid":"p-0"`), []byte(`"parentUuid":"`+parent+`"`), 1)
			l = bytes.ReplaceAll(l, []byte("7d1c2a40-0000-4000-8000-00000000a001"), []byte(id))
			file = append(file, l...)
			parent = uuid
			lines++
		}
		staged := filepath.Join(t.TempDir(), id+".jsonl")
		if err := os.WriteFile(staged, file, 0o644); err != nil {
			t.Fatal(err)
		}
		file, text = nil, ""
		debug.FreeOSMemory() // the baseline: what the test and the warm watch hold, resident
		before := rss(t)
		stopSampling := samplePeakRSS(t)
		if err := os.Rename(staged, filepath.Join(dir, id+".jsonl")); err != nil {
			t.Fatal(err)
		}
		for published := 0; published < lines; {
			var r follow.Report
			r, next = w.wait(t, next, 5*time.Minute, "publication of the "+id, func(r follow.Report) bool {
				return r.Kind == follow.ReportPublished && strings.HasSuffix(r.Path, id+".jsonl")
			})
			published += r.Events
		}
		peak := stopSampling()
		rose := int64(peak) - int64(before)
		t.Logf("a %d MiB transcript of %d lines: resident %d MiB before, %d MiB at its peak", size, lines+3, before/mib, peak/mib)
		return rose
	}
	resume(1, 16) // a figure beside the next
	if rose := resume(2, 64); rose >= 6*64*mib {
		t.Errorf("the 64 MiB file rose %d MiB: the watch holds it, its lines and their events at once", rose/mib)
	}
}
