package projection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/index"
)

// Defaults of the projector's settings.
const (
	DefaultBatchSize = 2048
	// DefaultFoldCacheBytes holds the decoded states (counted by their
	// memory, fold.State.MemSize) of some 6,000 short sessions (~660 bytes
	// each, 18 events) or 40 of 10,000 events: the sessions a busy host
	// writes to at once. A state it evicts is read back from the store
	// (one read and decode, ~86 bytes encoded for the short session) when
	// its session is written again, so a larger budget buys little and
	// costs resident memory.
	DefaultFoldCacheBytes = 4 << 20
)

// Option configures Open.
type Option func(*config)

type config struct {
	stream      string
	durable     string
	leaseBucket string
	batchSize   int
	cacheBytes  int64
	registerer  prometheus.Registerer
	logger      *slog.Logger
	onCommit    func(Commit)
	verify      bool
	lockTimeout time.Duration // how long Open waits for another process's file lock
	indexOpts   index.Options
	partition   Partition
	// hook, when set, is called at named points of a batch; an error makes
	// the projector stop as if it crashed there (crash tests).
	hook func(point string, gen uint64) error
	// rebuildFetch shapes the rebuild's pulls (tests shrink it to force
	// cut-off fetches).
	rebuildFetch rebuildFetch
	// followCutoff, when positive, makes the loop abandon every pull after
	// reading that many records, as a pull cut off by its deadline does
	// (tests).
	followCutoff int
	// bootID names the running boot (durable.go); tests play a reboot.
	bootID func() string
}

// WithStream sets the stream name (dshq.SessionStream).
func WithStream(name string) Option { return func(c *config) { c.stream = name } }

// WithDurable sets the durable consumer's name (dshq.ProjectorDurable).
func WithDurable(name string) Option { return func(c *config) { c.durable = name } }

// WithLeaseBucket sets the write-lease KV bucket (dshq.LeaseBucket).
func WithLeaseBucket(name string) Option { return func(c *config) { c.leaseBucket = name } }

// WithBatchSize bounds the records applied in one transaction (DefaultBatchSize).
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// WithFoldCacheBytes sets the in-memory fold-state cache budget in bytes of
// memory (DefaultFoldCacheBytes); the cache keeps each session's stored
// value beside its fold state, within the same budget.
func WithFoldCacheBytes(n int64) Option { return func(c *config) { c.cacheBytes = n } }

// WithRegisterer registers the projector's metrics on r.
func WithRegisterer(r prometheus.Registerer) Option { return func(c *config) { c.registerer = r } }

// WithLogger sets the structured logger (slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithOnCommit sets the hook that receives every Commit after it becomes
// visible. It runs on the projector's goroutine: it must not block long and
// must not call View with a generation beyond the commit's.
func WithOnCommit(fn func(Commit)) Option { return func(c *config) { c.onCommit = fn } }

// WithVerifyOnOpen sets whether Open runs bbolt's full consistency check on
// the store (default true; its cost grows with the store).
func WithVerifyOnOpen(v bool) Option { return func(c *config) { c.verify = v } }

// WithIndexOptions sets the full-text index's options.
func WithIndexOptions(o index.Options) Option { return func(c *config) { c.indexOpts = o } }

// Projector folds the session stream into its stores and serves reads. Open
// it, call Run to follow the stream, View to read, Close when done.
type Projector struct {
	js      jetstream.JetStream
	dir     string
	cfg     config
	log     *slog.Logger
	metrics *metrics

	// mu guards cur: readers take it shared to begin a snapshot, a rebuild
	// swap takes it exclusively.
	mu  sync.RWMutex
	cur *instance

	// writeMu serializes writers: the loop holds it for each batch, a
	// rebuild swap holds it to catch up and swap.
	writeMu sync.Mutex

	// genMu guards gen and genCh.
	genMu sync.Mutex
	gen   uint64
	genCh chan struct{} // closed and replaced when gen advances

	// catchUp tracks how far the loop is behind the stream (Progress).
	catchUp catchUp

	// liveMu guards live and liveVersion.
	liveMu      sync.RWMutex
	live        map[string]bool
	liveVersion uint64
}

// instance is one projection on disk: a store, an index, their fold-state
// cache, in one directory.
type instance struct {
	dir   string
	store *store
	index *index.Index
	cache *stateCache // used only by the writer holding writeMu
	// indexGen is the index's applied generation; only the writer holding
	// writeMu uses it.
	indexGen uint64
	// released is when the writer last released the mapped pages of the
	// store and index (releaseMapped); only the writer holding writeMu
	// uses it.
	released time.Time
}

// Open opens the projection in dir (creating it if missing). A missing,
// corrupt or incompatible store or index is rebuilt from the stream (the
// rebuild itself happens as Run catches up from sequence 1); so is a store
// left with unsynced commits by a system that stopped (ErrUnsyncedAtStop),
// and a projection of another stream than the one of that name now (another
// server's, or one deleted and created again: StreamIdentity), or one that
// does not record its stream and has applied records. An index behind the
// store is re-fed from the store. Open reads the stream's info, not its
// records; Run does.
func Open(ctx context.Context, js jetstream.JetStream, dir string, opts ...Option) (*Projector, error) {
	cfg := config{
		stream: dshq.SessionStream, durable: dshq.ProjectorDurable, leaseBucket: dshq.LeaseBucket,
		batchSize: DefaultBatchSize, cacheBytes: DefaultFoldCacheBytes, verify: true,
		lockTimeout: 5 * time.Second, rebuildFetch: rebuildFetch{wait: fetchWait},
		bootID: bootID,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	p := &Projector{
		js: js, dir: dir, cfg: cfg, log: cfg.logger.With("component", "projector"),
		genCh: make(chan struct{}), live: map[string]bool{},
	}
	var err error
	if p.metrics, err = newMetrics(cfg.registerer, p.indexStats); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		p.metrics.unregister()
		return nil, fmt.Errorf("open projection: %w", err)
	}
	inst, err := p.openCurrent(ctx)
	if err != nil {
		p.metrics.unregister()
		return nil, err
	}
	if inst, err = p.ofStream(ctx, inst); err != nil {
		p.metrics.unregister()
		return nil, err
	}
	p.cur = inst
	cp, err := inst.store.checkpoint()
	if err != nil {
		inst.close()
		p.metrics.unregister()
		return nil, err
	}
	p.gen = cp
	// The gauge says the generation the store opened at: a projector that
	// opens caught up applies nothing, and read 0 until its next commit.
	p.metrics.generation.Set(float64(cp))
	return p, nil
}

// ofStream returns inst when it is a projection of the stream as it is now
// (store.builtFrom), and otherwise replaces it with an empty instance that
// Run builds from the stream. A stream that does not exist yet (or cannot
// be read now) is checked when Run binds to it.
func (p *Projector) ofStream(ctx context.Context, inst *instance) (*instance, error) {
	id, err := IdentifyStream(ctx, p.js, p.cfg.stream)
	if err != nil {
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			p.log.Warn("cannot read the session stream's identity; checking it when following the stream", "err", err)
		}
		return inst, nil
	}
	ok, why, err := inst.store.builtFrom(id)
	if err != nil || ok {
		if err != nil {
			inst.close()
		}
		return inst, err
	}
	p.log.Warn("the projection is not of the session stream; rebuilding it from the stream", "stream", id.String(), "why", why)
	fresh, err := p.newInstance(ctx)
	if err != nil {
		inst.close()
		return nil, err
	}
	if err := fresh.store.setStreamIdentity(id); err != nil {
		inst.close()
		fresh.close()
		return nil, err
	}
	if err := p.setCurrent(fresh); err != nil {
		inst.close()
		fresh.close()
		return nil, err
	}
	if err := inst.close(); err != nil {
		p.log.Warn("close replaced projection", "err", err)
	}
	p.removeStale(filepath.Base(fresh.dir))
	return fresh, nil
}

func (c *config) complete() error {
	switch {
	case c.batchSize < 1:
		return fmt.Errorf("open projection: batch size %d is not positive", c.batchSize)
	case c.cacheBytes < 0:
		return fmt.Errorf("open projection: fold cache budget %d is negative", c.cacheBytes)
	case c.stream == "" || c.durable == "" || c.leaseBucket == "":
		return errors.New("open projection: stream, durable and lease bucket names must not be empty")
	}
	if err := c.partition.check(); err != nil {
		return fmt.Errorf("open projection: %w", err)
	}
	return nil
}

// currentFile names the directory of the serving projection.
const currentFile = "CURRENT"

// openCurrent opens the serving instance named by CURRENT, replacing it with
// an empty one when it is missing, corrupt or incompatible.
func (p *Projector) openCurrent(ctx context.Context) (*instance, error) {
	name, err := os.ReadFile(filepath.Join(p.dir, currentFile))
	if err == nil && validInstanceName(strings.TrimSpace(string(name))) {
		inst, err := p.openInstance(ctx, filepath.Join(p.dir, strings.TrimSpace(string(name))))
		if err == nil {
			p.removeStale(filepath.Base(inst.dir))
			return inst, nil
		}
		if !errors.Is(err, ErrCorruptStore) {
			return nil, err
		}
		p.log.Warn("projection store is corrupt or incompatible; rebuilding from the stream", "err", err)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open projection: %w", err)
	}
	inst, err := p.newInstance(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.setCurrent(inst); err != nil {
		inst.close()
		return nil, err
	}
	p.removeStale(filepath.Base(inst.dir))
	return inst, nil
}

func validInstanceName(n string) bool {
	return strings.HasPrefix(n, "p-") && !strings.ContainsAny(n, "/\\") && n != "p-"
}

// newInstance creates an empty instance in a fresh directory.
func (p *Projector) newInstance(ctx context.Context) (*instance, error) {
	dir, err := os.MkdirTemp(p.dir, "p-")
	if err != nil {
		return nil, fmt.Errorf("create projection: %w", err)
	}
	inst, err := p.openInstance(ctx, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return inst, nil
}

// openInstance opens the store and index in dir. A corrupt index is
// recreated and re-fed from the store; an index behind the store is re-fed
// for the sessions changed since its generation.
func (p *Projector) openInstance(ctx context.Context, dir string) (*instance, error) {
	st, err := openStore(filepath.Join(dir, "projection.db"), p.cfg.verify, p.cfg.lockTimeout, withBoot(p.cfg.bootID()))
	if err != nil {
		return nil, err
	}
	if st.resumed {
		p.log.Info("projection store was not closed (the process stopped); its commits are intact on this boot, resuming from its checkpoint", "dir", dir)
	}
	if err := st.checkPartition(p.cfg.partition); err != nil {
		st.close()
		return nil, err
	}
	inst := &instance{dir: dir, store: st, cache: newStateCache(p.cfg.cacheBytes)}
	idxDir := filepath.Join(dir, "index")
	idx, err := index.Open(idxDir, p.cfg.indexOpts)
	if err != nil {
		if !errors.Is(err, index.ErrCorrupt) && !errors.Is(err, index.ErrIncompatible) {
			st.close()
			return nil, fmt.Errorf("open index: %w", err)
		}
		p.log.Warn("index is corrupt or incompatible; recreating it from the store", "dir", idxDir, "err", err)
		if err := os.RemoveAll(idxDir); err != nil {
			st.close()
			return nil, fmt.Errorf("remove corrupt index: %w", err)
		}
		if idx, err = index.Open(idxDir, p.cfg.indexOpts); err != nil {
			st.close()
			return nil, fmt.Errorf("create index: %w", err)
		}
	}
	inst.index = idx
	if err := p.refeedIndex(ctx, inst); err != nil {
		inst.close()
		return nil, err
	}
	return inst, nil
}

// setCurrent records inst as the serving instance (atomic rename).
func (p *Projector) setCurrent(inst *instance) error {
	tmp := filepath.Join(p.dir, currentFile+".tmp")
	if err := os.WriteFile(tmp, []byte(filepath.Base(inst.dir)+"\n"), 0o600); err != nil {
		return fmt.Errorf("record current projection: %w", err)
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(p.dir, currentFile)); err != nil {
		return fmt.Errorf("record current projection: %w", err)
	}
	return syncFile(p.dir)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// removeStale deletes projection directories other than keep (leftovers of
// an interrupted rebuild or a replaced corrupt projection).
func (p *Projector) removeStale(keep string) {
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "p-") && e.Name() != keep {
			if err := os.RemoveAll(filepath.Join(p.dir, e.Name())); err != nil {
				p.log.Warn("remove stale projection", "dir", e.Name(), "err", err)
			}
		}
	}
}

// close closes the store first: bbolt's Close waits for open read
// transactions, so no View that could still search the index is running
// when the index closes.
func (i *instance) close() error {
	serr := i.store.close()
	return errors.Join(serr, i.index.Close())
}

// Close closes the serving projection. Run must have returned.
func (p *Projector) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return nil
	}
	err := p.cur.close()
	p.cur = nil
	p.metrics.unregister()
	return err
}

// Generation returns the stream sequence through which the serving
// projection has been applied (store and index).
func (p *Projector) Generation() uint64 {
	p.genMu.Lock()
	defer p.genMu.Unlock()
	return p.gen
}

// StreamIdentity returns the identity of the stream the serving projection
// is built from (zero until it has bound to one).
func (p *Projector) StreamIdentity() StreamIdentity {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.cur == nil {
		return StreamIdentity{}
	}
	id, err := p.cur.store.streamIdentity()
	if err != nil {
		return StreamIdentity{}
	}
	return id
}

// Epoch returns the serving projection's epoch.
func (p *Projector) Epoch() string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.cur == nil {
		return ""
	}
	return p.cur.store.epoch
}

// Index returns the serving projection's full-text index. Its content may
// be ahead of any snapshot (see the package doc). A rebuild swap replaces
// and closes it: a long-lived caller should use Snapshot.Index inside View
// instead of keeping this one.
func (p *Projector) Index() *index.Index {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.cur == nil {
		return nil
	}
	return p.cur.index
}

func (p *Projector) indexStats() (index.Stats, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.cur == nil {
		return index.Stats{}, errors.New("projection is closed")
	}
	return p.cur.index.Stats()
}

// WaitGeneration waits until the applied generation reaches min. It fails
// with a *dshq.Error of code SESSION_QUERY_NOT_CAUGHT_UP when ctx ends first.
func (p *Projector) WaitGeneration(ctx context.Context, min uint64) error {
	for {
		p.genMu.Lock()
		gen, ch := p.gen, p.genCh
		p.genMu.Unlock()
		if gen >= min {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return &dshq.Error{
				Code:    dshq.CodeNotCaughtUp,
				Message: fmt.Sprintf("projection is at generation %d; minGeneration %d was not reached in time", gen, min),
				Err:     ctx.Err(),
			}
		}
	}
}

// setGeneration publishes a new applied generation and wakes waiters.
func (p *Projector) setGeneration(g uint64) {
	p.genMu.Lock()
	defer p.genMu.Unlock()
	p.gen = g
	close(p.genCh)
	p.genCh = make(chan struct{})
}

// View waits (bounded by ctx: SESSION_QUERY_NOT_CAUGHT_UP) until the applied
// generation reaches minGeneration, then runs fn on a consistent snapshot.
// fn's error is returned as is. A closed projector fails with
// SESSION_QUERY_INDEX_FAILED.
func (p *Projector) View(ctx context.Context, minGeneration uint64, fn func(Snapshot) error) error {
	if err := p.WaitGeneration(ctx, minGeneration); err != nil {
		return err
	}
	p.mu.RLock()
	if p.cur == nil {
		p.mu.RUnlock()
		return dshq.Errorf(dshq.CodeIndexFailed, "projection is closed")
	}
	inst := p.cur
	tx, err := inst.store.db.Begin(false)
	p.mu.RUnlock()
	if err != nil {
		return &dshq.Error{Code: dshq.CodeIndexFailed, Message: "projection read failed", Err: err}
	}
	defer tx.Rollback()
	gen, err := readU64(tx.Bucket(bucketMeta).Get(metaCheckpoint))
	if err != nil {
		return &dshq.Error{Code: dshq.CodeIndexFailed, Message: "projection read failed", Err: err}
	}
	s := &snapshot{tx: tx, gen: gen, epoch: inst.store.epoch, index: inst.index}
	p.liveMu.RLock()
	s.live = make(map[string]bool, len(p.live))
	for k, v := range p.live {
		s.live[k] = v
	}
	s.liveVersion = p.liveVersion
	p.liveMu.RUnlock()
	return fn(s)
}
