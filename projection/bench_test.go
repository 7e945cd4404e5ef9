package projection

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/corpus"
)

// BenchmarkPipeline measures, in one run on the same machine and stream:
// the raw JetStream consume rate (pull + ack, no work), the projector's rate
// from an empty projection to searchable (store and index applied), and the
// publish→searchable latency of single appends to a caught-up projector.
// Run it with: go test -run '^$' -bench Pipeline -benchtime 1x ./projection
func BenchmarkPipeline(b *testing.B) {
	logs := readCorpus(b, corpus.Require(b))
	const copies = 3
	var recs [][2]string
	for c := range copies {
		for _, l := range logs {
			id := fmt.Sprintf("%s-c%d", l.header.Header.ID, c)
			tok := token(b, id)
			for _, ln := range withID(b, l.lines, id) {
				recs = append(recs, [2]string{tok, string(ln)})
			}
		}
	}
	for range b.N {
		e := newEnv(b)
		last := e.publishAsync(recs)
		n := float64(len(recs))

		raw := rawConsume(b, e, last)
		b.ReportMetric(n/raw.Seconds(), "raw-consume-rec/s")

		start := time.Now()
		r := e.start(b.TempDir())
		waitGenWithin(b, r.p, last, 10*time.Minute)
		proj := time.Since(start)
		b.ReportMetric(n/proj.Seconds(), "projected-rec/s")

		lat := appendLatencies(b, e, r.p, 300)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(n, "records")
		r.stop()
	}
}

// rawConsume pulls and acks every record of the stream with no work done.
func rawConsume(b *testing.B, e *env, last uint64) time.Duration {
	b.Helper()
	ctx := context.Background()
	stream, err := e.js.Stream(ctx, dshq.SessionStream)
	if err != nil {
		b.Fatal(err)
	}
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: "raw-bench", AckPolicy: jetstream.AckAllPolicy, MaxAckPending: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer stream.DeleteConsumer(ctx, "raw-bench")
	start := time.Now()
	var seen uint64
	for seen < last {
		mb, err := cons.Fetch(DefaultBatchSize, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		var lastMsg jetstream.Msg
		for m := range mb.Messages() {
			md, _ := m.Metadata()
			seen, lastMsg = md.Sequence.Stream, m
		}
		if lastMsg != nil {
			if err := lastMsg.Ack(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return time.Since(start)
}

// appendLatencies appends n user messages to a live session, one at a
// time, and returns the sorted publish→searchable latencies.
func appendLatencies(b *testing.B, e *env, p *Projector, n int) []time.Duration {
	b.Helper()
	tok := "latency-probe"
	e.publish(tok, line(goodHeader, tok))
	e.publish(tok, line(turnStart, 0))
	out := make([]time.Duration, 0, n)
	for i := range n {
		rec := line(`{"type":"user/message","seq":%d,"time":1788000000101,"data":{"id":"m%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"probe %d"}]},"surfaceOp":"append"}`, i+1, i, i)
		start := time.Now()
		seq := e.publish(tok, rec)
		waitGen(b, p, seq)
		out = append(out, time.Since(start))
	}
	slices.Sort(out)
	return out
}

// BenchmarkRebuild measures Rebuild's rate (records/s from sequence 1 to the
// swap) beside a caught-up projector, on the corpus.
// Run it with: go test -run '^$' -bench Rebuild -benchtime 1x ./projection
func BenchmarkRebuild(b *testing.B) {
	var recs [][2]string
	for _, l := range readCorpus(b, corpus.Require(b)) {
		tok := token(b, l.header.Header.ID)
		for _, ln := range l.lines {
			recs = append(recs, [2]string{tok, string(ln)})
		}
	}
	for range b.N {
		e := newEnv(b)
		last := e.publishAsync(recs)
		r := e.start(b.TempDir())
		waitGenWithin(b, r.p, last, 10*time.Minute)
		start := time.Now()
		var final RebuildProgress
		if err := r.p.Rebuild(context.Background(), func(p RebuildProgress) { final = p }); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		if final.Records != int(last) {
			b.Fatalf("rebuild applied %d records, want %d", final.Records, last)
		}
		b.ReportMetric(float64(final.Records)/took.Seconds(), "rebuild-rec/s")
		b.ReportMetric(float64(final.Records), "records")
		r.stop()
	}
}
