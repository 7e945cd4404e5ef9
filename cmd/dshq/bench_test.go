package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/query"
)

// BenchmarkImportCorpus imports the whole corpus (141 valid files, about
// 15 000 records) into a fresh pipeline per iteration and reports records
// per second: with the embedded server's default sync_interval=always, and
// relaxed. Run it on demand:
//
//	go test -run '^$' -bench ImportCorpus -benchtime 3x ./cmd/dshq
func BenchmarkImportCorpus(b *testing.B) {
	dir := corpus.Require(b)
	for _, c := range []struct {
		name    string
		relaxed bool
	}{{"sync=always", false}, {"sync=relaxed", true}} {
		b.Run(c.name, func(b *testing.B) {
			var records int
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p := startPipelineSync(b, c.relaxed)
				b.StartTimer()
				start := time.Now()
				var sum importSummary
				p.dshq("import", "--fixture-cwd", fixtureCwd, "--rename-on-conflict", "--json", dir).decode(b, &sum)
				elapsed += time.Since(start)
				for _, r := range sum.Imported {
					records += r.Events + 1
				}
				b.StopTimer()
			}
			b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
		})
	}
}

// BenchmarkHarnessImport imports the agent-harnesses corpus's Claude Code
// files, then its Codex files, each into a fresh pipeline per iteration
// (sync relaxed, as the tests run), and reports source lines/s and MB/s of
// wall time, dshq import as a person runs it (conversion, the Store's
// idempotence read and the publishes). The reference, in the same run, is
// the deepseek-harness corpus imported the same way (its lines are records
// already: no conversion). On demand:
//
//	go test -run '^$' -bench HarnessImport -benchtime 3x ./cmd/dshq
func BenchmarkHarnessImport(b *testing.B) {
	hdir := corpus.RequireHarnesses(b)
	for _, c := range []struct{ name, dir string }{
		{"claude-code", filepath.Join(hdir, "claude-code")},
		{"codex", filepath.Join(hdir, "codex")},
		{"reference=deepseek-harness", corpus.Require(b)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var lines, bytes int64
			err := filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
					return err
				}
				data, err := os.ReadFile(p)
				lines += int64(len(capture.SplitLines(data)))
				bytes += int64(len(data))
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				p := startPipelineSync(b, true)
				start := time.Now()
				args := []string{"import", "--json", c.dir}
				if strings.HasPrefix(c.name, "reference") {
					args = []string{"import", "--fixture-cwd", fixtureCwd, "--rename-on-conflict", "--json", c.dir}
				}
				r := p.dshq(args...)
				elapsed += time.Since(start)
				if r.code != 0 && !strings.HasPrefix(c.name, "reference") {
					b.Fatalf("import: %s", r.stderr)
				}
			}
			b.ReportMetric(float64(lines)*float64(b.N)/elapsed.Seconds(), "lines/s")
			b.ReportMetric(float64(bytes)*float64(b.N)/1e6/elapsed.Seconds(), "MB/s")
		})
	}
}

// BenchmarkWatchLatency measures how long a line a harness appends takes to
// become searchable: dshq watch follows a Claude Code projects root, a
// writer appends one prompt line (with a word of its own) every 20 ms, and
// events.search is polled every millisecond until the prompt is found. The
// reference, in the same run and on the same pipeline, publishes the same
// converted events straight through the harness SDK (no file, no watcher):
// what the pipeline alone costs; its samples alternate with the watcher's.
// Reports p50 and p99 of both, in ms. On
// demand:
//
//	go test -run '^$' -bench WatchLatency -benchtime 200x ./cmd/dshq
func BenchmarkWatchLatency(b *testing.B) {
	p := startPipelineSync(b, true)
	nc, err := nats.Connect(p.url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	store, err := bus.NewStore(context.Background(), nc)
	if err != nil {
		b.Fatal(err)
	}
	qc := query.NewClient(nc)
	root := b.TempDir()
	line := func(session string, n int) []byte {
		parent := "null"
		if n > 0 {
			parent = fmt.Sprintf(`"u%d"`, n-1)
		}
		return fmt.Appendf(nil, `{"type":"user","sessionId":%q,"uuid":"u%d","parentUuid":%s,"cwd":"/bench/ws","timestamp":"2026-03-01T10:00:00.000Z","message":{"role":"user","content":"probe word zq%dx%s"}}`+"\n",
			session, n, parent, n, session[:4])
	}
	searchable := func(id string, n int, session string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		page, err := qc.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: id, Query: fmt.Sprintf("zq%dx%s", n, session[:4])})
		return err == nil && len(page.Items) > 0
	}
	pct := func(ds []time.Duration, q float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
	}

	// dshq watch.
	w := startWatch(b, p, "--claude", root, "--codex", "off", "--idle", "1m")
	session := "w0000000-bench-watch"
	file := filepath.Join(root, "-bench-ws", session+".jsonl")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	// The reference: the same events through the SDK, its samples
	// interleaved with the watcher's so that both see the same load.
	ref := "r0000000-bench-sdk"
	conv := follow.NewConverter(capture.FormatClaudeCode, ref+".jsonl", nil)
	var h *bus.Handle
	var lines capture.Lines
	until := func(id string, n int, session string, t0 time.Time) time.Duration {
		for !searchable(id, n, session) {
			if time.Since(t0) > 30*time.Second {
				b.Fatalf("line %d of %s not searchable within 30 s: %s", n, id, w.out.String())
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(t0)
	}
	var watched, direct []time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		t0 := time.Now()
		if _, err := f.Write(line(session, n)); err != nil {
			b.Fatal(err)
		}
		watched = append(watched, until("cc-"+session, n, session, t0))
		time.Sleep(20 * time.Millisecond)

		ups, err := conv.Feed(lines.Write(line(ref, n))[0])
		if err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		for _, u := range ups {
			if u.Header != nil {
				if h, err = store.Create(context.Background(), u.Header.Header); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := h.Append(context.Background(), u.Events); err != nil {
				b.Fatal(err)
			}
		}
		direct = append(direct, until("cc-"+ref, n, ref, t0))
		time.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	_ = h.Close(context.Background())
	b.ReportMetric(pct(watched, 0.5), "watch-p50-ms")
	b.ReportMetric(pct(watched, 0.99), "watch-p99-ms")
	b.ReportMetric(pct(direct, 0.5), "sdk-p50-ms")
	b.ReportMetric(pct(direct, 0.99), "sdk-p99-ms")
}
