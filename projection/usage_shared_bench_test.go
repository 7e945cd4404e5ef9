package projection

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/record"
)

// BenchmarkPartitionedUsageIngest times a whole projection and shard 0 of
// three projecting the agent-harnesses corpus's Claude Code and Codex
// sessions, eight copies under other ids: the copies state the same calls,
// so every call is shared by sessions of every shard — the most a shard
// extracts and decides of the other shards' records
// (docs/usage.md, "Partitioned projections"). It reports each one's rate
// and the process's CPU per 1,000 records (with the embedded server's: the
// machine is shared, the CPU is what it spent). Run it with:
//
//	go test -run '^$' -bench PartitionedUsageIngest -benchtime 1x ./projection
func BenchmarkPartitionedUsageIngest(b *testing.B) {
	files, err := corpus.HarnessFiles(corpus.RequireHarnesses(b))
	if err != nil {
		b.Fatal(err)
	}
	var logs [][][]byte
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil {
			b.Fatal(err)
		}
		format := capture.Detect(f.Path, data)
		if !follow.Harness(format) {
			continue
		}
		updates, err := capture.Convert(follow.NewConverter(format, f.Path, nil), data)
		if err != nil {
			b.Fatal(err)
		}
		converted, err := capture.Collect(updates)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range converted {
			lines := [][]byte{l.Header.Raw}
			for _, e := range l.Events {
				lines = append(lines, e.Raw)
			}
			logs = append(logs, lines)
		}
	}
	const copies = 8
	var recs [][2]string
	for c := range copies {
		for _, l := range logs {
			id := fmt.Sprintf("%s-c%d", headerID(b, l[0]), c)
			tok := token(b, id)
			for _, ln := range withID(b, l, id) {
				recs = append(recs, [2]string{tok, string(ln)})
			}
		}
	}
	for range b.N {
		e := newEnv(b)
		last := e.publishAsync(recs)
		for _, c := range []struct {
			name string
			opts []Option
		}{
			{"whole", []Option{WithDurable("bench-whole")}},
			{"shard-0of3", []Option{WithPartition(0, 3), WithDurable(dshq.ShardDurable(0, 3))}},
		} {
			start, cpu := time.Now(), cpuTime()
			r := e.start(b.TempDir(), c.opts...)
			waitGenWithin(b, r.p, last, 10*time.Minute)
			b.ReportMetric(float64(len(recs))/time.Since(start).Seconds(), c.name+"-rec/s")
			b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(len(recs))*1000, c.name+"-CPU-ms/1k")
			if err := r.stop(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(recs)), "records")
	}
}

func headerID(b *testing.B, raw []byte) string {
	b.Helper()
	h, err := record.ParseHeader(raw)
	if err != nil {
		b.Fatal(err)
	}
	return h.Header.ID
}
