package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/dshq/dshq"
	bolterrors "go.etcd.io/bbolt/errors"
)

// MappingVersion names the document mapping and analysis this package writes.
// An index recorded with another version is ErrIncompatible.
const MappingVersion = "dshq-index-v7"

// Internal keys stored beside the documents (Bleve SetInternal).
var (
	keyMapping    = []byte("dshq.mapping")
	keyGeneration = []byte("dshq.generation")
)

// Sentinel errors, found with errors.Is in a returned error's chain (each is
// wrapped in a *dshq.Error with CodeIndexFailed).
var (
	// ErrCorrupt: the directory holds something that is not a readable
	// Bleve index. Delete it and rebuild.
	ErrCorrupt = errors.New("index is corrupt")
	// ErrIncompatible: a readable Bleve index that this version did not
	// write (foreign, or another mapping version). Delete it and rebuild.
	ErrIncompatible = errors.New("index is incompatible")
	// ErrLocked: another Index (in this or another process) has the
	// directory open; it is not damaged, do not delete it.
	ErrLocked = errors.New("index is locked by another user")
	// ErrClosed: the index was closed.
	ErrClosed = errors.New("index is closed")
	// ErrInvalidDoc: a batch holds a doc the index refuses (blank session id,
	// type or text, unknown surface, negative seq, a number beyond ±2^53).
	ErrInvalidDoc = errors.New("invalid index doc")
)

// DefaultSnippetChars is the default Options.SnippetChars.
const DefaultSnippetChars = dshq.SnippetChars

// DefaultLockTimeout is the default Options.LockTimeout.
const DefaultLockTimeout = 5 * time.Second

// Options tunes an Index. The zero value is valid.
type Options struct {
	// SnippetChars bounds snippets, in code points; 0 means
	// DefaultSnippetChars.
	SnippetChars int
	// LockTimeout bounds how long Open waits for the directory's lock
	// while another Index holds it; 0 means DefaultLockTimeout.
	LockTimeout time.Duration
}

// Index is an open full-text index. It is safe for concurrent use: Apply
// calls are serialized (the projector is meant to be the only writer), and
// searches run concurrently with them and with each other.
type Index struct {
	dir  string
	opts Options
	an   *analyzer
	gen  atomic.Uint64
	// durable is the generation known to be on disk (Bleve's persister
	// reported it, or it was read at open): Close has nothing to wait for
	// once it reaches gen.
	durable atomic.Uint64

	// mu guards idx against Close: operations hold it shared, Close
	// exclusively; idx is nil once closed.
	mu  sync.RWMutex
	idx bleve.Index

	// applyMu serializes Apply, so that batches and their generations are
	// applied in the order the callers obtained it.
	applyMu sync.Mutex
}

// Open opens the index in dir, creating a fresh one when dir does not exist
// or is empty. A directory that does not hold a readable Bleve index fails
// with ErrCorrupt, one written by another mapping version (or by something
// else) with ErrIncompatible; both are *dshq.Error with CodeIndexFailed. A
// directory another Index holds open fails with ErrLocked after
// opts.LockTimeout.
func Open(dir string, opts Options) (*Index, error) {
	if opts.SnippetChars < 0 {
		return nil, dshq.Errorf(dshq.CodeInvalidConfig, "index snippet chars must not be negative, got %d", opts.SnippetChars)
	}
	if opts.SnippetChars == 0 {
		opts.SnippetChars = DefaultSnippetChars
	}
	if opts.LockTimeout < 0 {
		return nil, dshq.Errorf(dshq.CodeInvalidConfig, "index lock timeout must not be negative, got %v", opts.LockTimeout)
	}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	x := &Index{dir: dir, opts: opts, an: newAnalyzer()}
	fresh, err := prepareDir(dir)
	if err != nil {
		return nil, indexError(err, "open index %q", dir)
	}
	if fresh {
		err = x.create()
	} else {
		err = x.open()
	}
	if err != nil {
		return nil, indexError(err, "open index %q", dir)
	}
	return x, nil
}

// prepareDir reports whether dir must be created; an empty directory is
// removed so that Bleve can create it.
func prepareDir(dir string) (fresh bool, err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, os.MkdirAll(filepath.Dir(filepath.Clean(dir)), 0o700)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) && !errors.Is(err, fs.ErrPermission) {
			// not a directory
			return false, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return false, err
	case len(entries) == 0:
		return true, os.Remove(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "index_meta.json")); err != nil {
		return false, fmt.Errorf("%w: %s holds no index_meta.json", ErrCorrupt, dir)
	}
	return false, nil
}

func (x *Index) create() error {
	m, err := newMapping()
	if err != nil {
		return err
	}
	// Created with a persister that does not wait (persisterNapMS), so that
	// the first write is on disk at once; then opened as every index is.
	cfg := x.boltConfig()
	cfg["scorchPersisterOptions"] = map[string]any{"PersisterNapTimeMSec": 0}
	idx, err := bleve.NewUsing(x.dir, m, bleve.Config.DefaultIndexType, bleve.Config.DefaultKVStore, cfg)
	if err != nil {
		return err
	}
	b := idx.NewBatch()
	b.SetInternal(keyMapping, []byte(MappingVersion))
	b.SetInternal(keyGeneration, encodeGen(0))
	if err := batchDurable(context.Background(), idx, b); err != nil {
		_ = idx.Close()
		return err
	}
	if err := idx.Close(); err != nil {
		return err
	}
	return x.open()
}

// batchDurable applies b to idx and waits until it is on disk.
func batchDurable(ctx context.Context, idx bleve.Index, b *bleve.Batch) error {
	persisted := make(chan error, 1)
	b.SetPersistedCallback(func(err error) { persisted <- err })
	if err := idx.Batch(b); err != nil {
		return err
	}
	select {
	case err := <-persisted:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeFlushTimeout bounds how long Close waits for the batches not yet on
// disk (Bleve's persister may be waiting for a merge); what it leaves, the
// projector re-feeds from its store on the next open.
const closeFlushTimeout = 10 * time.Second

func (x *Index) open() (err error) {
	defer func() {
		// A damaged segment can make Bleve panic while loading it.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrCorrupt, r)
		}
	}()
	idx, err := bleve.OpenUsing(x.dir, x.boltConfig())
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return fmt.Errorf("%w: %v", ErrLocked, err)
		}
		if errors.Is(err, bleve.ErrorUnknownIndexType) {
			return fmt.Errorf("%w: %v", ErrIncompatible, err)
		}
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	version, err := idx.GetInternal(keyMapping)
	if err != nil {
		_ = idx.Close()
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if string(version) != MappingVersion {
		_ = idx.Close()
		return fmt.Errorf("%w: mapping version %q, want %q", ErrIncompatible, version, MappingVersion)
	}
	raw, err := idx.GetInternal(keyGeneration)
	if err != nil || len(raw) != 8 {
		_ = idx.Close()
		return fmt.Errorf("%w: unreadable generation (%d bytes, %v)", ErrCorrupt, len(raw), err)
	}
	x.gen.Store(binary.BigEndian.Uint64(raw))
	x.durable.Store(x.gen.Load())
	x.idx = idx
	return nil
}

// boltConfig is the index's scorch configuration: the lock timeout, a
// merge plan whose segments stop growing at MaxSegmentDocs, so that the
// memory and file pages one merge touches do not grow with the corpus, and
// that lets small segments wait for their peers (floorSegmentDocs),
// batches that return once they are searchable, not once their segment is
// written and synced (see Apply), and a persister that writes what a quarter
// of a second of batches added as one file (persisterNapMS).
func (x *Index) boltConfig() map[string]any {
	return map[string]any{
		"unsafe_batch":           true,
		"bolt_timeout":           x.opts.LockTimeout.String(),
		"scorchMergePlanOptions": map[string]any{"MaxSegmentSize": MaxSegmentDocs, "FloorSegmentSize": floorSegmentDocs},
		"scorchPersisterOptions": map[string]any{"PersisterNapTimeMSec": persisterNapMS},
	}
}

// persisterNapMS is how long Bleve's persister waits before writing what
// the batches since its last write added: it then merges their in-memory
// segments into one file. Without the wait it wrote a file per batch, and
// the small batches of a live load (tens to hundreds of records, against
// the 2,048 of a catch-up) kept its merger rewriting them: a 15 s CPU
// profile of dshq serve during a 100k-event load had 27% of the process's
// CPU in Bleve's merger loop, 13% with a 250 ms wait. Batches are
// searchable when Apply returns either way; the wait only delays their
// durability (see Apply).
const persisterNapMS = 250

// MaxSegmentDocs caps the docs of a segment that merges produce (Bleve's
// default is 5,000,000): a projector's peak memory then stays flat as the
// index grows past it, at the cost of a search visiting one more segment per
// MaxSegmentDocs docs.
const MaxSegmentDocs = 50_000

// floorSegmentDocs is the size (docs) below which the merge plan counts a
// segment as this size (Bleve's default is 2,000). A live load persists a
// file of a few hundred docs every persisterNapMS; with the default floor the
// plan's budget stayed at a handful of segments and the merger rewrote the
// largest segment with every few files. BenchmarkLiveApply (16,000 docs, 16
// per batch at 800/s): 422 CPU-ms per 1,000 docs at 2,000, 268 at 500.
const floorSegmentDocs = 500

// Close closes the index. Calls after Close fail with ErrClosed; Close itself
// is idempotent.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.idx == nil {
		return nil
	}
	// Best effort: an index closed with batches not yet on disk opens at an
	// earlier generation, and its owner feeds it the rest again.
	// Once the persister has written the last batch, there is nothing to
	// wait for (its next write would come only after its pause).
	if x.durable.Load() < x.gen.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
		defer cancel()
		b := x.idx.NewBatch()
		b.SetInternal(keyGeneration, encodeGen(x.gen.Load()))
		_ = batchDurable(ctx, x.idx, b)
	}
	err := x.idx.Close()
	x.idx = nil
	if err != nil {
		return indexError(err, "close index")
	}
	return nil
}

// Generation returns the stream sequence through which the index has been
// applied (0 for a fresh index). It is stored atomically with the content.
func (x *Index) Generation() uint64 { return x.gen.Load() }

// Stats are index metrics.
type Stats struct {
	// Docs is the number of indexed docs.
	Docs uint64
	// DiskBytes is the size of the index directory.
	DiskBytes int64
	// Generation is as Generation returns.
	Generation uint64
}

// Stats returns the index's doc count and on-disk size.
func (x *Index) Stats() (Stats, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return Stats{}, indexError(ErrClosed, "index stats")
	}
	n, err := x.idx.DocCount()
	if err != nil {
		return Stats{}, indexError(err, "count index docs")
	}
	var size int64
	err = filepath.WalkDir(x.dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			// a segment merged away while walking
			return nil
		}
		if info, ierr := d.Info(); ierr == nil && !d.IsDir() {
			size += info.Size()
		}
		return nil
	})
	if err != nil {
		return Stats{}, indexError(err, "size index")
	}
	return Stats{Docs: n, DiskBytes: size, Generation: x.gen.Load()}, nil
}

func encodeGen(g uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, g)
}

// indexError wraps err as a *dshq.Error: CodeAborted for a context error,
// CodeIndexFailed otherwise.
func indexError(err error, format string, args ...any) error {
	var de *dshq.Error
	if errors.As(err, &de) {
		return err
	}
	code := dshq.CodeIndexFailed
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code = dshq.CodeAborted
	}
	msg := fmt.Sprintf(format, args...)
	return &dshq.Error{Code: code, Message: msg + ": " + err.Error(), Err: err}
}

// ScorchStats returns the live counters of the index's Bleve engine
// (scorch's Stats: merges, persists, epochs), or nil when the index is
// closed. It is for benchmarks and diagnostics that watch the engine's
// background work while they measure (cmd/dshq-bench's tail notes): read
// its fields with sync/atomic; they go on counting after the call.
func (x *Index) ScorchStats() *scorch.Stats {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return nil
	}
	return EngineStats(x.idx)
}

// EngineStats returns the live counters of a Bleve index's scorch engine,
// nil for another engine (as ScorchStats; the bench's reference index is a
// plain Bleve index).
func EngineStats(idx bleve.Index) *scorch.Stats {
	adv, err := idx.Advanced()
	if err != nil {
		return nil
	}
	s, ok := adv.(*scorch.Scorch)
	if !ok {
		return nil
	}
	st, _ := s.Stats().(*scorch.Stats)
	return st
}
