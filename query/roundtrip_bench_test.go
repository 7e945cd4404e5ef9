package query

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// BenchmarkRoundTrip measures roundTrip alone against a service that
// answers at once, on one in-process connection as the bench's search path
// has it (client, service and reply on the same connection), one request
// at a time and 8 at once. It reports the p50 and p99 of a request
// (docs/profiling-search.md#the-query-clients-round-trip):
//
//	go test -run '^$' -bench RoundTrip -benchtime 20000x ./query/
func BenchmarkRoundTrip(b *testing.B) {
	nc := testnats.Start(b, embedded.Config{Sync: embedded.SyncRelaxed}).Conn(b)
	sub, err := nc.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(m.Data) })
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	body := []byte(`{"query":"a rare phrase","limit":20}`)
	ctx := context.Background()
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("concurrency-%d", par), func(b *testing.B) {
			took := make([]time.Duration, b.N)
			var wg sync.WaitGroup
			per := (b.N + par - 1) / par
			b.ResetTimer()
			for w := range par {
				wg.Go(func() {
					for i := w * per; i < min((w+1)*per, b.N); i++ {
						start := time.Now()
						if _, err := roundTrip(ctx, nc, "bench.echo", "bench.moved", body, nil, nil); err != nil {
							b.Error(err)
							return
						}
						took[i] = time.Since(start)
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}
