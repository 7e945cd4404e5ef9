package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/shardhost"
)

// Config configures Run. Zero fields take the Default… values.
type Config struct {
	// Corpus sizes the generated corpus.
	Corpus CorpusConfig
	// Dir is the working directory, new or empty ("" = a temporary one,
	// removed after).
	Dir string
	// SampleSessions is the number of sessions (the corpus's last ones)
	// written through the measured ingest: bus.Store appends with sync
	// always while the projector runs. The sessions before them are the
	// bulk, loaded fast before any measurement (see Phases).
	SampleSessions int
	// BulkWriters is the number of concurrent importers of the bulk load.
	BulkWriters int
	// Writers is the number of concurrent harness writers during ingest.
	Writers int
	// Samples is the number of measured calls per latency figure, but the
	// search classes'.
	Samples int
	// SearchSamples is the number of measured calls of each search class:
	// their tails are targets, and a p99 of a few hundred swings by 3×.
	SearchSamples int
	// AppendSamples is the number of appends per batch size and sync policy.
	AppendSamples int
	// Progress receives one line per phase (nil = none).
	Progress io.Writer
	// ApplyOnly stops after the projector's catch-up of the bulk (or its
	// apply of the ingest sample when there is no bulk) and the raw Bleve
	// reference on the same documents: the throughput figures alone, for
	// profiling the projector at scale.
	ApplyOnly bool
	// NoServe leaves out the dshq serve phase (see measureServe).
	NoServe bool
	// ServeOnly runs the dshq serve phase alone (no in-process pipeline):
	// its figures in a few minutes, for profiling the all-in-one process.
	ServeOnly bool
	// ServePprof, when set, is passed to dshq serve as --pprof (profile it
	// during the load).
	ServePprof string
	// Dshq is the dshq binary the serve phase runs ("" = one built with
	// go build into the working directory).
	Dshq string
	// SearchTrace, when set, is a file to write an execution trace
	// (runtime/trace) of the search classes to: from the first to the last
	// whose name contains SearchTraceClass ("" = all four).
	SearchTrace      string
	SearchTraceClass string
	// NoTailProbes leaves out the probes around each dshq sample of the
	// search classes and their tail notes (Report.Tails).
	NoTailProbes bool
	// NoSettle measures the queries at once, without first waiting for
	// the Bleve indexes' background merges and persists to finish.
	NoSettle bool
}

// Defaults of Config.
const (
	DefaultWriters        = 4
	DefaultSampleSessions = 800
	DefaultBulkWriters    = 16
	DefaultSamples        = 300
	DefaultSearchSamples  = 1000
	DefaultAppendSamples  = 100
	// DefaultPhaseTimeout bounds each wait for the projector to catch up.
	DefaultPhaseTimeout = 20 * time.Minute
)

func (c *Config) defaults() {
	if c.Corpus.Sessions == 0 {
		c.Corpus.Sessions = DefaultSessions
	}
	if c.Corpus.Turns == 0 {
		c.Corpus.Turns = DefaultTurns
	}
	if c.SampleSessions <= 0 {
		c.SampleSessions = DefaultSampleSessions
	}
	if c.BulkWriters <= 0 {
		c.BulkWriters = DefaultBulkWriters
	}
	if c.Writers <= 0 {
		c.Writers = DefaultWriters
	}
	if c.Samples <= 0 {
		c.Samples = DefaultSamples
	}
	if c.SearchSamples <= 0 {
		c.SearchSamples = DefaultSearchSamples
	}
	if c.AppendSamples <= 0 {
		c.AppendSamples = DefaultAppendSamples
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// runner holds one run's components.
type runner struct {
	cfg    Config
	corpus *Corpus
	bulk   []Session // loaded fast before the measurements
	sample []Session // written through the measured ingest
	rep    *Report
	dir    string
	rng    *rand.Rand

	srv    *embedded.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	store  *bus.Store
	proj   *projection.Projector
	client *query.Client
	raw    jetstream.Stream // BENCH_RAW: same settings as the session stream
	last   uint64           // the session stream's last sequence after ingest

	rawPublishRate float64          // records/s, measured before ingest
	printed        int              // rows already shown by progressRows
	applyName      string           // the row of applyRate
	applyRate      float64          // records/s of a fresh projector
	applyCPU       time.Duration    // process CPU time of that apply
	applyRecords   uint64           // records it applied
	commits        atomic.Int64     // batches the projectors committed
	ingestRate     float64          // events/s to searchable
	ftsBytes       uint64           // the SQLite FTS5 database's size on disk
	scorch         [2]*scorch.Stats // the projection's and the raw reference's index counters, for the tail probes
}

// Run generates the corpus, runs every measurement and returns the report.
// It stops everything it started before returning.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg.defaults()
	start := time.Now()
	r := &runner{cfg: cfg, rep: &Report{}, rng: rand.New(rand.NewPCG(cfg.Corpus.Seed, 7))}
	r.progress("generating corpus: %d sessions × %d turns", cfg.Corpus.Sessions, cfg.Corpus.Turns)
	if r.corpus, err = GenerateCorpus(cfg.Corpus); err != nil {
		return nil, err
	}
	r.rep.Sessions, r.rep.Events = len(r.corpus.Sessions), r.corpus.Events()
	r.split()
	if cfg.Dir != "" {
		if entries, err := os.ReadDir(cfg.Dir); err == nil && len(entries) > 0 {
			return nil, fmt.Errorf("bench: working directory %s is not empty (the corpus must be fresh)", cfg.Dir)
		}
	}
	if r.dir = cfg.Dir; r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "dshq-bench-"); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(r.dir)
	}
	var stack []func() error
	defer func() {
		for i := len(stack) - 1; i >= 0; i-- {
			err = errors.Join(err, stack[i]())
		}
	}()
	if cfg.ServeOnly {
		r.rep.ServeOnly, r.rep.Records = true, r.corpus.Records()
		if err := r.measureServe(ctx); err != nil {
			return nil, err
		}
		r.progressRows()
		r.rep.sort()
		r.rep.Elapsed = time.Since(start)
		return r.rep, nil
	}
	if err := r.loadBulk(ctx); err != nil {
		return nil, err
	}
	if err := r.startBus(ctx, &stack); err != nil {
		return nil, err
	}
	if err := r.measureRawPublish(ctx); err != nil {
		return nil, err
	}
	if err := r.measureCatchUp(ctx, &stack); err != nil {
		return nil, err
	}
	r.progressRows()
	if cfg.ApplyOnly {
		return r.applyOnly(ctx, start)
	}
	phases := []func(context.Context) error{r.measureIngest, r.measurePublishToSearchable, r.measureAppend}
	if len(r.bulk) == 0 {
		// No backlog to catch up with: a fresh projector applies the stream.
		phases = append(phases, r.measureApply)
	}
	phases = append(phases, r.measureQueries, r.measureRebuild)
	if !cfg.NoServe {
		phases = append(phases, r.measureServe)
	}
	for _, phase := range phases {
		if err := phase(ctx); err != nil {
			return nil, err
		}
		r.progressRows()
	}
	r.rep.sort()
	r.rep.Elapsed = time.Since(start)
	return r.rep, nil
}

// applyOnly finishes a Config.ApplyOnly run: without a bulk the ingest
// sample is published and applied by a fresh projector; then raw Bleve
// indexes the same documents.
func (r *runner) applyOnly(ctx context.Context, start time.Time) (*Report, error) {
	if len(r.bulk) == 0 {
		if err := r.measureIngest(ctx); err != nil {
			return nil, err
		}
		if err := r.measureApply(ctx); err != nil {
			return nil, err
		}
	}
	sessions, err := r.collect(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range sessions {
		r.rep.Documents += len(s.Docs)
	}
	idx, err := r.measureRawBleve(ctx, sessions)
	if err != nil {
		return nil, err
	}
	if err := idx.Close(); err != nil {
		return nil, fmt.Errorf("raw bleve: %w", err)
	}
	r.progressRows()
	r.rep.sort()
	r.rep.Elapsed = time.Since(start)
	return r.rep, nil
}

// progressRows prints the rows added since the last call as progress
// lines, so that a long run that is stopped still shows what it measured.
func (r *runner) progressRows() {
	for _, row := range r.rep.Rows[r.printed:] {
		r.progress("  %s = %s beside %s = %s (%s)", row.Metric, num(row.Value), row.Reference, num(row.RefValue), ratio(row.Ratio))
	}
	r.printed = len(r.rep.Rows)
}

func (r *runner) progress(format string, args ...any) {
	fmt.Fprintf(r.cfg.Progress, "bench: "+format+"\n", args...)
}

var discard = slog.New(slog.DiscardHandler)

// startBus starts the embedded server (sync always, the default), the
// harness store and the raw reference stream.
func (r *runner) startBus(ctx context.Context, stack *[]func() error) error {
	srv, nc, js, err := startServer(ctx, filepath.Join(r.dir, "nats"), embedded.SyncAlways)
	if err != nil {
		return err
	}
	*stack = append(*stack, func() error { nc.Close(); return srv.Shutdown(context.Background()) })
	r.srv, r.nc, r.js = srv, nc, js
	if r.store, err = bus.NewStore(ctx, nc); err != nil {
		return err
	}
	r.raw, err = rawStream(ctx, js)
	return err
}

func startServer(ctx context.Context, dir string, sync embedded.SyncPolicy) (*embedded.Server, *nats.Conn, jetstream.JetStream, error) {
	// A restart over a bulk-loaded store recovers every message block
	// before it is ready: give it minutes, not the default seconds.
	srv, err := embedded.Start(ctx, embedded.Config{Dir: dir, Sync: sync, ReadyTimeout: 10 * time.Minute})
	if err != nil {
		return nil, nil, nil, err
	}
	nc, err := srv.InProcessConn()
	if err != nil {
		_ = srv.Shutdown(ctx)
		return nil, nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		_ = srv.Shutdown(ctx)
		return nil, nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return srv, nc, js, nil
}

// rawSubjectPrefix is the subject space of the raw reference stream.
const rawSubjectPrefix = "benchraw."

// rawStream creates BENCH_RAW with the session stream's configuration
// (storage, limits, duplicate window, batching) under other subjects, after
// provisioning the session stream itself.
func rawStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	if _, err := bus.EnsureStream(ctx, js, bus.StreamConfig{}); err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, dshq.SessionStream)
	if err != nil {
		return nil, fmt.Errorf("session stream: %w", err)
	}
	cfg := st.CachedInfo().Config
	cfg.Name, cfg.Subjects, cfg.Description = "BENCH_RAW", []string{rawSubjectPrefix + ">"}, "dshq bench reference"
	raw, err := js.CreateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create raw reference stream: %w", err)
	}
	return raw, nil
}

// startPipeline opens the projector, runs it, and serves the query shard
// and the dsh-query service; r.client calls it over NATS.
func (r *runner) startPipeline(ctx context.Context, stack *[]func() error) error {
	p, stop, err := r.runProjector(ctx, filepath.Join(r.dir, "projection"))
	if err != nil {
		return err
	}
	*stack = append(*stack, stop)
	r.proj = p
	eng, err := shardhost.NewShardEngine(ctx, r.js, p)
	if err != nil {
		return err
	}
	stopShard, err := shardhost.ServeShard(ctx, r.nc, dshq.DefaultShard, eng, query.WithLogger(discard))
	if err != nil {
		return err
	}
	*stack = append(*stack, stopShard)
	// As `dshq serve` runs it: the service calls the shard in its process.
	stopSvc, err := query.Serve(ctx, r.nc, query.WithLogger(discard), query.WithEngine(eng))
	if err != nil {
		return err
	}
	*stack = append(*stack, stopSvc)
	r.client = query.NewClient(r.nc)
	return nil
}

// runProjector opens a projector in dir and runs it in a goroutine; stop
// ends the goroutine and closes the projector.
func (r *runner) runProjector(ctx context.Context, dir string, opts ...projection.Option) (*projection.Projector, func() error, error) {
	count := projection.WithOnCommit(func(c projection.Commit) {
		if c.Generation > 0 && len(c.Leases) == 0 { // a batch, not a lease change
			r.commits.Add(1)
		}
	})
	opts = append([]projection.Option{projection.WithLogger(discard), projection.WithRegisterer(prometheus.NewRegistry()), count}, opts...)
	p, err := projection.Open(ctx, r.js, dir, opts...)
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	stop := func() error {
		cancel()
		err := <-done
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return errors.Join(err, p.Close())
	}
	return p, stop, nil
}

// waitProjected waits until p has applied stream sequence seq.
func waitProjected(ctx context.Context, p *projection.Projector, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultPhaseTimeout)
	defer cancel()
	if err := p.WaitGeneration(ctx, seq); err != nil {
		return fmt.Errorf("wait for the projector to reach %d: %w", seq, err)
	}
	return nil
}

// headerRaw encodes a generated session's header record as the bus does.
func headerRaw(s Session) ([]byte, error) {
	return record.EncodeHeader(dshq.HeaderRecord{Header: s.Header, FormatVersion: dshq.FormatVersion2, InheritedEventCount: s.Inherited})
}

// measureRawPublish publishes the ingest sample's records (headers and events,
// one subject per session) to BENCH_RAW with pipelined async publishes:
// the bus's own throughput limit on this server.
func (r *runner) measureRawPublish(ctx context.Context) error {
	r.progress("raw JetStream publish of the ingest sample's %d records", r.rep.Phases.SampleEvents+len(r.sample))
	var failed atomic.Int64
	js, err := jetstream.New(r.nc, jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	start := time.Now()
	n := 0
	for _, s := range r.sample {
		tok, err := record.SubjectToken(s.Header.ID)
		if err != nil {
			return err
		}
		h, err := headerRaw(s)
		if err != nil {
			return err
		}
		recs := [][]byte{h}
		for _, b := range s.Batches {
			for _, e := range b {
				recs = append(recs, e.Raw)
			}
		}
		for i, rec := range recs {
			m := nats.NewMsg(rawSubjectPrefix + "corpus." + tok)
			m.Data = rec
			m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s:%d", tok, i))
			if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
				return fmt.Errorf("raw publish: %w", err)
			}
			n++
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	elapsed := time.Since(start)
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("raw publish: %d of %d publishes failed", f, n)
	}
	r.rawPublishRate = float64(n) / elapsed.Seconds()
	return nil
}
