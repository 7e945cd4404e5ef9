package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/internal/procmaps"
	"github.com/dshq/dshq/record"
)

// BenchmarkProjectorPeakRSS projects 100,000 and then 1,000,000 generated
// events (sessions of the upstream fixture's 18 events: turns, tool calls
// and results, a title, a compaction; each session's text made distinct)
// through a cmd/projector process and reports the process's peak RSS
// (VmHWM) for each and their ratio; the target is a ratio of at most 1.5.
// Run on demand:
//
//	go test -run '^$' -bench ProjectorPeakRSS -benchtime 1x ./e2e
func BenchmarkProjectorPeakRSS(b *testing.B) {
	tmpl := fixtureLines(b, filepath.Join("..", "projection", "testdata", "upstream-2.5.jsonl"))
	peaks, anon := map[int]float64{}, map[int]float64{}
	for _, events := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("events=%d", events), func(b *testing.B) {
			for range b.N {
				peaks[events], anon[events] = projectForPeak(b, tmpl, events)
			}
			b.ReportMetric(peaks[events], "peak-RSS-MiB")
		})
	}
	if peaks[100_000] > 0 && peaks[1_000_000] > 0 {
		b.Logf("peak RSS: %.1f MiB at 100k events, %.1f MiB at 1M events, ratio %.2f (target ≤ 1.5); sampled peak anonymous RSS %.1f and %.1f MiB, ratio %.2f",
			peaks[100_000], peaks[1_000_000], peaks[1_000_000]/peaks[100_000], anon[100_000], anon[1_000_000], anon[1_000_000]/anon[100_000])
	}
}

// projectForPeak publishes events to a fresh nats-server, projects them with
// a fresh projector process and returns its peak RSS (VmHWM) and its sampled
// peak anonymous RSS, in MiB.
func projectForPeak(b *testing.B, tmpl [][]byte, events int) (peak, anonPeak float64) {
	b.Helper()
	ctx := testCtx(b, 30*time.Minute)
	url, _ := startPlainNATS(b)
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bus.EnsureStream(ctx, js, bus.StreamConfig{}); err != nil {
		b.Fatal(err)
	}
	if _, err := bus.EnsureLeaseBucket(ctx, js, bus.StreamConfig{}); err != nil {
		b.Fatal(err)
	}
	n := 0
	for s := 0; n < events; s++ {
		id := fmt.Sprintf("mem-%07d", s)
		tok, err := record.SubjectToken(id)
		if err != nil {
			b.Fatal(err)
		}
		for i, l := range tmpl {
			if i == 0 {
				l = bytes.Replace(l, []byte(`"id":"s-7f3c"`), []byte(`"id":"`+id+`"`), 1)
			} else {
				l = bytes.ReplaceAll(l, []byte("retry budget"), []byte(fmt.Sprintf("retry budget zeta%07d", s)))
				n++
			}
			if _, err := js.PublishAsync(dshq.LogSubjectPrefix+tok, l, jetstream.WithStallWait(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("publish did not complete")
	}
	last := streamLastSeq(b, nc)
	b.ResetTimer()
	p := startProc(b, "projector", bins.projector, []string{"--nats-url", url, "--data", b.TempDir(), "--no-queries", "--metrics", "127.0.0.1:0", "--no-verify"}, nil)
	line := p.waitLine(b, startTimeout, `"projector running"`, func(l string) bool { return strings.Contains(l, `"projector running"`) })
	metrics := "http://" + jsonField(b, line, "metrics") + "/metrics"
	// Sampled beside the kernel's high-water mark, to attribute it: the
	// anonymous part (Go heap, Bleve's buffers) and the file-backed part
	// (bbolt's read-only mmap, whose pages the page cache owns).
	var filePeak float64
	waitFor(b, 25*time.Minute, fmt.Sprintf("the projector to apply %d records", last), func() (bool, error) {
		anon, file := rssParts(p.cmd.Process.Pid)
		anonPeak, filePeak = max(anonPeak, anon), max(filePeak, file)
		return generationOf(metrics) >= float64(last), nil
	})
	b.StopTimer()
	hwm := vmHWM(b, p.cmd.Process.Pid)
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(anonPeak, "sampled-peak-RssAnon-MiB")
	b.ReportMetric(filePeak, "sampled-peak-RssFile-MiB")
	if parts, err := residentByMapping(p.cmd.Process.Pid); err == nil {
		b.Logf("%d events: resident at the end, by mapping: %s", events, parts)
	}
	p.stop(b, time.Minute)
	return hwm, anonPeak
}

func fixtureLines(b *testing.B, path string) [][]byte {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
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
		b.Fatal(err)
	}
	return out
}

// vmHWM reads a process's peak resident set size in MiB.
func vmHWM(tb testing.TB, pid int) float64 {
	tb.Helper()
	st, err := procStatusMiB(pid)
	if err != nil {
		tb.Fatal(err)
	}
	hwm, ok := st["VmHWM"]
	if !ok {
		tb.Fatal("no VmHWM in /proc status")
	}
	return hwm
}

// rssParts reads a process's current anonymous and file-backed resident
// set sizes in MiB (0, 0 when they cannot be read).
func rssParts(pid int) (anon, file float64) {
	st, _ := procStatusMiB(pid)
	return st["RssAnon"], st["RssFile"]
}

// residentByMapping sums a process's resident memory by what is mapped:
// the bbolt store, Bleve's segment files, the executable, and anonymous
// memory; largest first, in MiB.
func residentByMapping(pid int) (string, error) {
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	kinds, err := procmaps.ResidentKiB(pid, func(path string) string {
		switch {
		case path == "":
			return "anonymous"
		case path == exe:
			return "executable"
		case strings.HasSuffix(path, ".db"):
			return "bbolt store"
		case strings.HasSuffix(path, ".zap"):
			return "Bleve segments"
		}
		return "other files"
	})
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return kinds[names[i]] > kinds[names[j]] })
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.1f MiB", k, float64(kinds[k])/1024)
	}
	return strings.Join(parts, ", "), nil
}

// procStatusMiB reads the sizes in kB of a process's /proc status, in MiB
// by field name.
func procStatusMiB(pid int) (map[string]float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, l := range strings.Split(string(status), "\n") {
		name, v, ok := strings.Cut(l, ":")
		v, kB := strings.CutSuffix(strings.TrimSpace(v), " kB")
		if !ok || !kB {
			continue
		}
		kb, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
		out[name] = kb / 1024
	}
	return out, nil
}

func jsonField(tb testing.TB, line, name string) string {
	tb.Helper()
	i := strings.Index(line, `"`+name+`":"`)
	if i < 0 {
		tb.Fatalf("no %s in %q", name, line)
	}
	rest := line[i+len(name)+4:]
	return rest[:strings.IndexByte(rest, '"')]
}

// generationOf reads dshq_projector_generation from a metrics endpoint
// (-1 while it cannot be read).
func generationOf(url string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(l, "dshq_projector_generation "); ok {
			if g, err := strconv.ParseFloat(v, 64); err == nil {
				return g
			}
		}
	}
	return -1
}
