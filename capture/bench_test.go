package capture_test

import (
	"os"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/internal/corpus"
)

// BenchmarkConvert measures conversion rate over the agent-harnesses
// corpus, one sub-benchmark per harness: every file converted whole (lines
// split, fed, finished), reported as MB/s (b.SetBytes) and lines/s of wall
// time, and as cpu-MB/s and cpu-lines/s of the process's CPU time (which a
// busy machine does not skew; garbage collection included).
//
//	go test -run '^$' -bench Convert -benchtime 20x ./capture
func BenchmarkConvert(b *testing.B) {
	files, err := corpus.HarnessFiles(corpus.RequireHarnesses(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, harness := range []string{dshq.HarnessClaudeCode, dshq.HarnessCodex} {
		b.Run(harness, func(b *testing.B) {
			type input struct {
				f    corpus.HarnessFile
				data []byte
			}
			var inputs []input
			var bytes, lines int64
			for _, f := range files {
				if f.Harness != harness {
					continue
				}
				data, err := os.ReadFile(f.Path)
				if err != nil {
					b.Fatal(err)
				}
				inputs = append(inputs, input{f, data})
				bytes += int64(len(data))
				lines += int64(len(capture.SplitLines(data)))
			}
			b.SetBytes(bytes)
			b.ReportAllocs()
			cpu0, cpuOK := cpuTime()
			b.ResetTimer()
			for range b.N {
				for _, in := range inputs {
					if _, err := capture.Convert(newConverter(in.f)(capture.Config{}), in.data); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(lines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
			if cpu1, ok := cpuTime(); ok && cpuOK && cpu1 > cpu0 {
				sec := (cpu1 - cpu0).Seconds()
				b.ReportMetric(float64(bytes)*float64(b.N)/1e6/sec, "cpu-MB/s")
				b.ReportMetric(float64(lines)*float64(b.N)/sec, "cpu-lines/s")
			}
		})
	}
}
