package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
)

// Phases describes how the corpus reached the stream: the bulk of the
// query corpus is loaded fast and unmeasured, the ingest figures come from
// a bounded sample written as harnesses write.
type Phases struct {
	// BulkSessions and BulkEvents count what the bulk load wrote.
	BulkSessions int `json:"bulkSessions"`
	BulkEvents   int `json:"bulkEvents"`
	// BulkWriters is the number of concurrent importers of the bulk load.
	BulkWriters int `json:"bulkWriters"`
	// BulkElapsed is the wall time of the bulk load (publish only).
	BulkElapsed time.Duration `json:"bulkElapsedNs"`
	// SampleSessions and SampleEvents count the measured ingest.
	SampleSessions int `json:"sampleSessions"`
	SampleEvents   int `json:"sampleEvents"`
	// SampleWriters is the number of concurrent writers of the measured ingest.
	SampleWriters int `json:"sampleWriters"`
}

// split divides the corpus: the last cfg.SampleSessions sessions are the
// measured ingest sample, the ones before them the bulk (so that every
// fork's and subagent's parent is in the stream before it).
func (r *runner) split() {
	n := len(r.corpus.Sessions)
	k := max(0, n-r.cfg.SampleSessions)
	r.bulk, r.sample = r.corpus.Sessions[:k], r.corpus.Sessions[k:]
	ph := &r.rep.Phases
	ph.BulkSessions, ph.BulkWriters = len(r.bulk), r.cfg.BulkWriters
	ph.SampleSessions, ph.SampleWriters = len(r.sample), r.cfg.Writers
	for _, s := range r.bulk {
		ph.BulkEvents += s.Events()
	}
	for _, s := range r.sample {
		ph.SampleEvents += s.Events()
	}
}

// loadBulk writes the bulk sessions through Store.Import (the import path:
// the same publisher, msg ids and expected-sequence chaining as Append,
// record by record) with cfg.BulkWriters concurrent importers, on an
// embedded server with the relaxed sync policy over the run's NATS
// directory; the server is then stopped and the measured phases restart it
// with sync always on the same store. Nothing is projected meanwhile.
func (r *runner) loadBulk(ctx context.Context) error {
	if len(r.bulk) == 0 {
		return nil
	}
	ph := &r.rep.Phases
	r.progress("bulk load: %d sessions, %d events through Store.Import, %d writers, sync relaxed", ph.BulkSessions, ph.BulkEvents, ph.BulkWriters)
	srv, nc, _, err := startServer(ctx, filepath.Join(r.dir, "nats"), embedded.SyncRelaxed)
	if err != nil {
		return err
	}
	defer func() { nc.Close(); _ = srv.Shutdown(context.Background()) }()
	// Record by record: an atomic batch stages the whole log first (tens of
	// milliseconds), a record publish with relaxed sync is tens of
	// microseconds.
	store, err := bus.NewStore(ctx, nc, bus.WithAtomicMin(1<<30))
	if err != nil {
		return err
	}
	start := time.Now()
	err = forEachSession(ctx, r.bulk, r.cfg.BulkWriters, func(ctx context.Context, s Session) error {
		return importSession(ctx, store, s)
	})
	if err != nil {
		return fmt.Errorf("bulk load: %w", err)
	}
	ph.BulkElapsed = time.Since(start)
	return nil
}

// forEachSession runs fn on every session with the given number of
// concurrent workers. The first failure cancels the rest and is returned;
// so is the end of ctx.
func forEachSession(ctx context.Context, sessions []Session, workers int, fn func(context.Context, Session) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan Session)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				if err := fn(ctx, s); err != nil {
					cancel(err)
					return
				}
			}
		}()
	}
feed:
	for _, s := range sessions {
		select {
		case work <- s:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return context.Cause(ctx)
}

// importSession imports one generated session whole; anything but all of
// its records stored fresh is an error (the stream was empty).
func importSession(ctx context.Context, store *bus.Store, s Session) error {
	raw, err := headerRaw(s)
	if err != nil {
		return err
	}
	hdr := dshq.HeaderRecord{Header: s.Header, FormatVersion: dshq.FormatVersion2, InheritedEventCount: s.Inherited, Raw: raw}
	events := slices.Concat(s.Batches...)
	res, err := store.Import(ctx, hdr, events)
	if err != nil {
		return fmt.Errorf("import %s: %w", s.Header.ID, err)
	}
	if res.Stored != len(events)+1 {
		return fmt.Errorf("import %s: %d of %d records stored (%+v)", s.Header.ID, res.Stored, len(events)+1, res)
	}
	return nil
}
