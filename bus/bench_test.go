package bus

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// BenchmarkAppend measures Append throughput (events/s) and Append→ack
// latency (p50/p99) for batches of 1, 10 and 100 events, with the server
// syncing always and relaxed, beside the raw JetStream publish rate of the
// same records on the same server (BenchmarkAppend/…/raw). The default
// store publishes appends below DefaultAtomicMin record by record and larger
// ones as atomic batches; the mode=… runs force one way for comparison.
//
//	go test -run '^$' -bench BenchmarkAppend -benchtime 2s ./bus
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []struct {
		name   string
		policy embedded.SyncPolicy
	}{{"sync=always", embedded.SyncAlways}, {"sync=relaxed", embedded.SyncRelaxed}} {
		b.Run(sync.name, func(b *testing.B) {
			e := testnats.Start(b, embedded.Config{Sync: sync.policy})
			s := newStore(b, e)
			seq := newStore(b, e, WithAtomicMin(0))
			atomic := newStore(b, e, WithAtomicMin(2))
			for _, n := range []int{1, 10, 100} {
				b.Run(fmt.Sprintf("batch=%d", n), func(b *testing.B) { benchAppend(b, s, n) })
			}
			// The two publishing modes side by side, whatever the default.
			for _, n := range []int{10, 100} {
				b.Run(fmt.Sprintf("batch=%d/mode=sequential", n), func(b *testing.B) { benchAppend(b, seq, n) })
				b.Run(fmt.Sprintf("batch=%d/mode=atomic", n), func(b *testing.B) { benchAppend(b, atomic, n) })
			}
			b.Run("raw", func(b *testing.B) { benchRaw(b, e) })
		})
	}
}

var benchSeq int

func benchAppend(b *testing.B, s *Store, n int) {
	ctx := context.Background()
	benchSeq++
	h, err := s.Create(ctx, header("bench-"+strconv.Itoa(benchSeq)))
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(ctx)
	if err := h.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	// Build the events before timing: the benchmark measures the bus.
	pool := make([][]dshq.Event, b.N)
	for i := range pool {
		pool[i] = cmds(b, int64(i*n), n)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := h.Append(ctx, pool[i]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, float64(b.N*n)/elapsed.Seconds())
}

// benchRaw publishes the same kind of records with plain synchronous
// JetStream publishes (msg id, no expected sequence): the bus's own limit.
func benchRaw(b *testing.B, e *testnats.Server) {
	nc := e.Conn(b)
	s, err := NewStore(context.Background(), nc)
	if err != nil {
		b.Fatal(err)
	}
	evs := cmds(b, 0, 1)
	subject := dshq.LogSubjectPrefix + "raw-" + strconv.Itoa(benchSeq)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		m := nats.NewMsg(subject)
		m.Data = evs[0].Raw
		m.Header.Set(hdrMsgID, subject+":"+strconv.Itoa(i))
		t0 := time.Now()
		if _, err := s.js.PublishMsg(context.Background(), m); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	reportLatency(b, lat, float64(b.N)/elapsed.Seconds())
}

func reportLatency(b *testing.B, lat []time.Duration, eventsPerSec float64) {
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(float64(len(lat)-1)*p)].Microseconds())
	}
	b.ReportMetric(eventsPerSec, "events/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// BenchmarkRead measures reading a 100-event session from a fresh read
// handle (open + read + close), as a harness resuming or a tool reading.
//
//	go test -run '^$' -bench BenchmarkRead ./bus
func BenchmarkRead(b *testing.B) {
	e := testnats.Start(b, embedded.Config{Sync: embedded.SyncRelaxed})
	s := newStore(b, e)
	ctx := context.Background()
	w, err := s.Create(ctx, header("read-bench"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Append(ctx, cmds(b, 0, 100)); err != nil {
		b.Fatal(err)
	}
	mustClose(b, w)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r, err := s.Open(ctx, "read-bench", Read)
		if err != nil {
			b.Fatal(err)
		}
		got, err := r.Read(ctx, 0, -1)
		if err != nil || len(got) != 100 {
			b.Fatalf("read %d events: %v", len(got), err)
		}
		_ = r.Close(ctx)
		lat = append(lat, time.Since(t0))
	}
	reportLatency(b, lat, float64(b.N*100)/time.Since(start).Seconds())
}
