package main

import (
	"testing"
	"time"

	"github.com/dshq/dshq/internal/corpus"
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
