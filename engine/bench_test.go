package engine_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

var (
	benchSessions = flag.Int("bench-sessions", 2000, "sessions in the benchmark corpus")
	benchEvents   = flag.Int("bench-events", 25, "events per session in the benchmark corpus")
	benchLocal    = flag.Bool("bench-local-shard", false, "the service calls the shard engine in process (WithEngine), as dshq serve does")
)

var benchWords = strings.Fields(`retry budget config parser index cursor lineage surface
compaction summary tool result grep search session projector stream generation
snapshot window trace filter replacement provenance header workspace lease
配置 重试 预算 索引 会话 搜索 压缩 摘要`)

// benchCorpus publishes a generated corpus (English and Chinese text, tool
// calls, compactions) with async publishes and waits until it is projected.
func benchCorpus(b *testing.B, p *pipe, sessions, events int) {
	b.Helper()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = benchWords[r.IntN(len(benchWords))]
		}
		return strings.Join(w, " ")
	}
	var last jetstream.PubAckFuture
	for s := range sessions {
		id := fmt.Sprintf("bench-%05d", s)
		tok, _ := record.SubjectToken(id)
		subj := dshq.LogSubjectPrefix + tok
		lines := []string{fmt.Sprintf(`{"type":"session","version":2,"id":%q,"createdAt":%d,"cwd":"/w/%d","isSeeded":false}`, id, s, s%20)}
		for e := 0; e < events; e++ {
			var ev evSpec
			switch {
			case e == events-1 && e >= 2:
				ev = userReplace(int64(e), "summary "+text(20), 0, 0, "[0]")
			case e%3 == 2:
				ev = plain("tool/call", int64(e), fmt.Sprintf(`{"callId":"c%d","name":"grep","arguments":%q}`, e, text(4)))
			case e == 0:
				ev = userMsg(0, fmt.Sprintf("uniq%05d %s", s, text(30)))
			default:
				ev = userMsg(int64(e), text(30))
			}
			lines = append(lines, ev.line(int64(e)))
		}
		if s%50 == 49 {
			select {
			case <-p.js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("async publishes did not complete")
			}
		}
		for _, l := range lines {
			f, err := p.js.PublishAsync(subj, []byte(l))
			if err != nil {
				b.Fatal(err)
			}
			last = f
		}
	}
	select {
	case ack := <-last.Ok():
		p.last = ack.Sequence
	case err := <-last.Err():
		b.Fatal(err)
	case <-time.After(5 * time.Minute):
		b.Fatal("publish did not complete")
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := p.proj.WaitGeneration(waitCtx, p.last); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkQueryLatency measures search and read latency through the whole
// path (client → dsh-query → shard engine → bbolt/Bleve) on a generated
// corpus, reporting p50/p99 per operation (-bench-local-shard: the
// service calls the engine in process, one NATS hop). Run on demand:
//
//	go test -run '^$' -bench QueryLatency -benchtime 2000x ./query/
func BenchmarkQueryLatency(b *testing.B) {
	p := newPipe(b, func(c *pipeConfig) { c.localShard = *benchLocal })
	start := time.Now()
	benchCorpus(b, p, *benchSessions, *benchEvents)
	b.Logf("corpus: %d sessions × %d events projected in %v", *benchSessions, *benchEvents, time.Since(start))
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	session := func() string { return fmt.Sprintf("bench-%05d", r.IntN(*benchSessions)) }
	ops := []struct {
		name string
		run  func() error
	}{
		{"sessions.search", func() error {
			_, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: benchWords[r.IntN(len(benchWords))], Limit: 20})
			return err
		}},
		{"sessions.search-filtered", func() error {
			cwd, current := fmt.Sprintf("/w/%d", r.IntN(20)), string(dshq.SurfaceCurrent)
			_, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: benchWords[r.IntN(len(benchWords))], Limit: 20,
				SessionFilters: []dshq.Filter{{Kind: dshq.FilterCwd, Values: []*string{&cwd}}},
				EventFilters:   []dshq.Filter{{Kind: dshq.FilterSurface, Values: []*string{&current}}}})
			return err
		}},
		{"sessions.search-selective", func() error {
			_, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: fmt.Sprintf("uniq%05d", r.IntN(*benchSessions)), Limit: 20})
			return err
		}},
		{"events.search", func() error {
			_, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: session(), Query: benchWords[r.IntN(len(benchWords))]})
			return err
		}},
		{"events.read", func() error {
			_, err := p.client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: session(), Seq: int64(r.IntN(*benchEvents)), Before: 5, After: 5})
			return err
		}},
		{"sessions.read", func() error {
			_, err := p.client.ReadSession(ctx, dshq.SessionReadRequest{SessionID: session()})
			return err
		}},
		{"sessions.list", func() error {
			_, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 100})
			return err
		}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			cpu := cpuTime()
			for range b.N {
				st := time.Now()
				if err := op.run(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(st))
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// cpuTime is the process's user+system CPU time (the embedded server and
// projector included): steadier than wall time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
