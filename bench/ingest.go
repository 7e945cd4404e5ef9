package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/record"
)

// measureIngest writes the corpus through the harness SDK with concurrent
// writers (one Append per turn or compaction) while the projector runs, and
// times it until everything is searchable; the Go heap and the process RSS
// are tracked meanwhile.
func (r *runner) measureIngest(ctx context.Context) error {
	r.progress("ingest: %d events through bus.Store with %d writers, sync always", r.rep.Phases.SampleEvents, r.cfg.Writers)
	runtime.GC()
	heapBefore := heapNow()
	rssBefore, err := procStatus("VmRSS")
	if err != nil {
		return err
	}
	reset := resetPeakRSS()
	sampler := startHeapSampler(20 * time.Millisecond)
	start := time.Now()
	last, err := r.writeCorpus(ctx)
	if err == nil {
		err = waitProjected(ctx, r.proj, last)
	}
	elapsed := time.Since(start)
	heapPeak := sampler.Stop()
	if err != nil {
		return err
	}
	hwm, err := procStatus("VmHWM")
	if err != nil {
		return err
	}
	r.last = last
	if err := r.checkNoQuarantine(ctx); err != nil {
		return err
	}
	r.ingestRate = float64(r.rep.Phases.SampleEvents) / elapsed.Seconds()
	r.rep.section = sectionThroughput
	r.rep.add("ingest to searchable, sample, sync always (events/s)", r.ingestRate,
		"raw JetStream async publish, same records (rec/s)", r.rawPublishRate)
	hwmName := "peak RSS during ingest (MiB)"
	if !reset {
		hwmName = "peak RSS since process start (MiB)"
	}
	r.rep.section = sectionMemory
	r.rep.add(hwmName, mib(hwm), "RSS before ingest (server up, corpus generated)", mib(rssBefore))
	r.rep.add("peak Go heap during ingest (MiB)", mib(heapPeak), "Go heap before ingest", mib(heapBefore))
	return nil
}

// writeCorpus appends every sample session with cfg.Writers concurrent writers and
// returns the highest stream sequence acknowledged.
func (r *runner) writeCorpus(ctx context.Context) (uint64, error) {
	var (
		mu   sync.Mutex // guards last
		last uint64
	)
	err := forEachSession(ctx, r.sample, r.cfg.Writers, func(ctx context.Context, s Session) error {
		seq, err := writeSession(ctx, r.store, s)
		if err != nil {
			return err
		}
		mu.Lock()
		last = max(last, seq)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}

// writeSession creates one session and appends its batches as a harness
// does; it returns the stream sequence of the last record.
func writeSession(ctx context.Context, store *bus.Store, s Session) (uint64, error) {
	var opts []bus.CreateOption
	if s.Header.IsSeeded {
		opts = append(opts, bus.WithInheritedEventCount(s.Inherited))
	}
	h, err := store.Create(ctx, s.Header, opts...)
	if err != nil {
		return 0, err
	}
	var last uint64
	for _, b := range s.Batches {
		if last, err = h.Append(ctx, b); err != nil {
			break
		}
	}
	return last, errors.Join(err, h.Close(ctx))
}

// measurePublishToSearchable appends single user messages to a live session
// and waits until each is applied (stored and indexed); the reference is
// publish→delivery of a raw record through a JetStream consumer.
func (r *runner) measurePublishToSearchable(ctx context.Context) error {
	r.progress("publish→searchable: %d single appends", r.cfg.Samples)
	probes, first, err := probeAppends(ctx, r.store, "bench-probe", r.cfg.Samples, func(ctx context.Context, at uint64) error {
		return waitProjected(ctx, r.proj, at)
	})
	if err != nil {
		return err
	}
	got := probeDurations(probes)
	want, err := rawDeliveryLatency(ctx, r.js, r.raw, first, r.cfg.Samples)
	if err != nil {
		return err
	}
	r.rep.section = sectionPublishLatency
	r.rep.addLatency("publish→searchable", got, "raw publish→consumer delivery", want)
	return nil
}

// probeSample is one timed append of probeAppends: when it began, when
// its append was acknowledged at generation gen, and when searchable(gen)
// returned.
type probeSample struct {
	start, ack, end time.Time
	gen             uint64
}

func probeDurations(samples []probeSample) []time.Duration {
	out := make([]time.Duration, len(samples))
	for i, s := range samples {
		out[i] = s.end.Sub(s.start)
	}
	return out
}

// probeAppends creates session id in store and appends its first event, then
// samples single user messages, timing each from its append until
// searchable(its generation) returns. It returns the samples and the first
// event's record (what a raw reference publishes).
func probeAppends(ctx context.Context, store *bus.Store, id string, samples int, searchable func(ctx context.Context, gen uint64) error) ([]probeSample, []byte, error) {
	h, err := store.Create(ctx, dshq.Header{Version: dshq.FormatVersion2, ID: id, CreatedAt: 1_800_000_000_000, Cwd: dshq.Str("/home/dev/probe")})
	if err != nil {
		return nil, nil, err
	}
	defer h.Close(ctx)
	first, err := probeEvent(`{"type":"turn/start","seq":0,"time":1800000000001,"data":{"turn":1}}`)
	if err != nil {
		return nil, nil, err
	}
	if _, err := h.Append(ctx, []dshq.Event{first}); err != nil {
		return nil, nil, err
	}
	got := make([]probeSample, 0, samples)
	for i := range samples {
		seq := int64(i + 1)
		e, err := probeEvent(fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m-p%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"probe %d needle"}]},"surfaceOp":"append"}`, seq, 1_800_000_000_001+seq, seq, seq))
		if err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		at, err := h.Append(ctx, []dshq.Event{e})
		ack := time.Now()
		if err == nil {
			err = searchable(ctx, at)
		}
		if err != nil {
			return nil, nil, err
		}
		got = append(got, probeSample{start: t0, ack: ack, end: time.Now(), gen: at})
	}
	return got, first.Raw, nil
}

func probeEvent(raw string) (dshq.Event, error) {
	e, err := record.ParseEvent([]byte(raw))
	if err != nil {
		return dshq.Event{}, fmt.Errorf("probe event: %w", err)
	}
	return e, nil
}

// rawDeliveryLatency publishes samples single records to raw (BENCH_RAW)
// and times each until an ordered consumer delivers it.
func rawDeliveryLatency(ctx context.Context, js jetstream.JetStream, raw jetstream.Stream, data []byte, samples int) ([]time.Duration, error) {
	subject := rawSubjectPrefix + "probe"
	cons, err := raw.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		return nil, fmt.Errorf("raw consumer: %w", err)
	}
	got := make(chan struct{}, 1)
	cc, err := cons.Consume(func(jetstream.Msg) { got <- struct{}{} })
	if err != nil {
		return nil, fmt.Errorf("raw consume: %w", err)
	}
	defer cc.Stop()
	out := make([]time.Duration, 0, samples)
	for i := range samples {
		m := nats.NewMsg(subject)
		m.Data = data
		m.Header.Set(jetstream.MsgIDHeader, "probe:"+strconv.Itoa(i))
		t0 := time.Now()
		if _, err := js.PublishMsg(ctx, m); err != nil {
			return nil, fmt.Errorf("raw publish: %w", err)
		}
		select {
		case <-got:
		case <-time.After(30 * time.Second):
			return nil, errors.New("raw consumer: no delivery within 30s")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// measureAppend times Append→ack for batches of 1, 10 and 100 events on
// the sync-always server and on a second, relaxed one, each beside raw
// JetStream publishes of the same batch size on the same server (one sync
// publish for 1; pipelined async publishes awaited together for more).
func (r *runner) measureAppend(ctx context.Context) error {
	if err := r.appendOn(ctx, "sync always", r.js, r.store); err != nil {
		return err
	}
	srv, nc, js, err := startServer(ctx, filepath.Join(r.dir, "nats-relaxed"), embedded.SyncRelaxed)
	if err != nil {
		return err
	}
	defer func() { nc.Close(); _ = srv.Shutdown(context.Background()) }()
	store, err := bus.NewStore(ctx, nc)
	if err != nil {
		return err
	}
	if _, err := rawStream(ctx, js); err != nil {
		return err
	}
	return r.appendOn(ctx, "sync relaxed", js, store)
}

func (r *runner) appendOn(ctx context.Context, policy string, js jetstream.JetStream, store *bus.Store) error {
	for _, n := range []int{1, 10, 100} {
		r.progress("append→ack: batch %d, %s, %d appends", n, policy, r.cfg.AppendSamples)
		got, want, err := appendLatency(ctx, store, js, fmt.Sprintf("bench-append-%s-%d", policy[5:], n), n, r.cfg.AppendSamples)
		if err != nil {
			return err
		}
		r.rep.section = sectionAppend
		r.rep.addLatency(fmt.Sprintf("append→ack batch=%d, %s", n, policy), got,
			fmt.Sprintf("raw JetStream publish of %d, %s", n, policy), want)
	}
	return nil
}

func commandEvents(from int64, n int) ([]dshq.Event, error) {
	out := make([]dshq.Event, n)
	for i := range out {
		seq := from + int64(i)
		e, err := probeEvent(fmt.Sprintf(`{"type":"command/run","seq":%d,"time":%d,"data":{"command":"echo %d"}}`, seq, 1_800_000_000_000+seq, seq))
		if err != nil {
			return nil, err
		}
		out[i] = e
	}
	return out, nil
}

// appendLatency appends samples batches of n events to a new session and,
// after each, publishes the same records raw to BENCH_RAW, so that both
// see the same load; it returns both series of latencies.
func appendLatency(ctx context.Context, store *bus.Store, js jetstream.JetStream, id string, n, samples int) (got, want []time.Duration, err error) {
	h, err := store.Create(ctx, dshq.Header{Version: dshq.FormatVersion2, ID: id, CreatedAt: 1_800_000_000_000, Cwd: dshq.Str("/home/dev/append")})
	if err != nil {
		return nil, nil, err
	}
	defer h.Close(ctx)
	if err := h.Flush(ctx); err != nil {
		return nil, nil, err
	}
	subject := rawSubjectPrefix + id
	for i := range samples {
		evs, err := commandEvents(int64(i*n), n)
		if err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		if _, err := h.Append(ctx, evs); err != nil {
			return nil, nil, err
		}
		got = append(got, time.Since(t0))
		msgs := make([]*nats.Msg, n)
		for j, e := range evs {
			msgs[j] = nats.NewMsg(subject)
			msgs[j].Data = e.Raw
			msgs[j].Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s:%d", subject, e.Seq))
		}
		t0 = time.Now()
		if err := publishAll(ctx, js, msgs); err != nil {
			return nil, nil, err
		}
		want = append(want, time.Since(t0))
	}
	return got, want, nil
}

// publishAll publishes msgs (one sync publish, or async publishes awaited
// together) and fails on the first error.
func publishAll(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg) error {
	if len(msgs) == 1 {
		if _, err := js.PublishMsg(ctx, msgs[0]); err != nil {
			return fmt.Errorf("raw publish: %w", err)
		}
		return nil
	}
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		f, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute))
		if err != nil {
			return fmt.Errorf("raw publish: %w", err)
		}
		futures[i] = f
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("raw publish: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// checkNoQuarantine fails when the projector refused any record: the
// generated corpus must be valid, or the figures measure the wrong work.
func (r *runner) checkNoQuarantine(ctx context.Context) error {
	var first *projection.QuarantineRecord
	err := r.proj.View(ctx, r.last, func(s projection.Snapshot) error {
		return s.Quarantined(0, func(q projection.QuarantineRecord) bool {
			first = &q
			return false
		})
	})
	if err != nil {
		return err
	}
	if first != nil {
		raw := first.Raw
		if len(raw) > 200 {
			raw = raw[:200]
		}
		return fmt.Errorf("the projector quarantined a generated record (stream seq %d, subject %s, session %q): %s; record begins %q",
			first.StreamSeq, first.Subject, first.SessionID, first.Reason, raw)
	}
	return nil
}
