package projection

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/index"
)

func TestRebuild_SwapsAtomicallyWhileReadsAndAppendsGoOn(t *testing.T) {
	e := newEnv(t)
	corpus := mixedCorpus(t)
	first := e.publishAll(corpus)
	r := e.start(t.TempDir(), WithBatchSize(40))
	waitGen(t, r.p, first)
	oldEpoch := r.p.Epoch()
	want := map[string]int64{}
	view(t, r.p, func(s Snapshot) error {
		return s.SessionsByCreated(nil, func(info dshq.SessionInfo) bool {
			want[info.Header.Header.ID] = info.EventCount
			return true
		})
	})

	// Readers check that no snapshot is half-built: once a generation at or
	// past `first` is visible, every session is complete.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				err := r.p.View(ctx, first, func(s Snapshot) error {
					for id, n := range want {
						info, ok := s.Session(id)
						if !ok || info.EventCount < n {
							return fmt.Errorf("generation %d epoch %s: session %s has %d events, want ≥ %d", s.Generation(), s.Epoch(), id, info.EventCount, n)
						}
					}
					// The snapshot's index stays open until the snapshot ends.
					page, err := s.Index().SearchEvents(ctx, index.EventQuery{SessionID: "s-0", Query: "retry budget"})
					if err != nil {
						return fmt.Errorf("search in snapshot %d: %w", s.Generation(), err)
					}
					if len(page.Hits) == 0 {
						return fmt.Errorf("search in snapshot %d found nothing", s.Generation())
					}
					return nil
				})
				if err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Appends during the rebuild. They all go in, however soon the rebuild
	// ends (its end cancels ctx, which stops only the readers): the checks
	// below read the stream once they are in.
	more := withID(t, readLines(t, "upstream-2.5.jsonl"), "s-during")
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, l := range more {
			if _, err := e.js.Publish(context.Background(), dshq.LogSubjectPrefix+"s-during", l); err != nil {
				errs <- err
				return
			}
		}
	}()
	var reports []RebuildProgress
	if err := r.p.Rebuild(context.Background(), func(p RebuildProgress) { reports = append(reports, p) }); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(reports) < 2 || !reports[len(reports)-1].Swapped || reports[len(reports)-1].Applied < first {
		t.Errorf("progress reports: %+v", reports)
	}
	if r.p.Epoch() == oldEpoch {
		t.Error("the epoch did not change")
	}
	final, err := e.js.Stream(context.Background(), dshq.SessionStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := final.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitGen(t, r.p, info.State.LastSeq)
	entries, _ := os.ReadDir(r.p.dir)
	dirs := 0
	for _, en := range entries {
		if en.IsDir() {
			dirs++
		}
	}
	if dirs != 1 {
		t.Errorf("%d projection directories after the swap, want 1", dirs)
	}
	got := dumpOf(t, r.p)
	r.stop()
	e.cleanRun(info.State.LastSeq).same(t, got, "after the rebuild")
}

func TestOpen_DetectsACorruptStoreOrIndexAndRebuilds(t *testing.T) {
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	want := e.cleanRun(last)

	instDir := func(dir string) string {
		name, err := os.ReadFile(filepath.Join(dir, currentFile))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, string(name[:len(name)-1]))
	}
	cases := []struct {
		name    string
		damage  func(t *testing.T, inst string)
		rebuilt bool // a new epoch (store rebuilt), not just a re-fed index
	}{
		{"a truncated store file is rebuilt", func(t *testing.T, inst string) {
			truncate(t, filepath.Join(inst, "projection.db"), 0.5)
		}, true},
		{"a store file with garbled meta pages is rebuilt", func(t *testing.T, inst string) {
			garble(t, filepath.Join(inst, "projection.db"), 0, 8192)
		}, true},
		{"a store file with a garbled middle is rebuilt", func(t *testing.T, inst string) {
			fi, _ := os.Stat(filepath.Join(inst, "projection.db"))
			garble(t, filepath.Join(inst, "projection.db"), fi.Size()/2, 16384)
		}, true},
		{"a store of another schema version is rebuilt", func(t *testing.T, inst string) {
			db, err := bolt.Open(filepath.Join(inst, "projection.db"), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaSchema, u64(99)) }); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"a missing projection directory is rebuilt", func(t *testing.T, inst string) {
			if err := os.RemoveAll(inst); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"a garbled index is recreated from the store", func(t *testing.T, inst string) {
			if err := os.WriteFile(filepath.Join(inst, "index", "index_meta.json"), []byte("{garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a missing index is recreated from the store", func(t *testing.T, inst string) {
			if err := os.RemoveAll(filepath.Join(inst, "index")); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := e.start(dir)
			waitGen(t, r.p, last)
			epoch := r.p.Epoch()
			r.stop()
			c.damage(t, instDir(dir))

			again := e.start(dir)
			defer again.stop()
			if got := again.p.Epoch() != epoch; got != c.rebuilt {
				t.Errorf("store rebuilt = %v, want %v", got, c.rebuilt)
			}
			waitGen(t, again.p, last)
			want.check(t, again.p, "")
		})
	}
}

func truncate(t *testing.T, path string, frac float64) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(float64(fi.Size())*frac)); err != nil {
		t.Fatal(err)
	}
}

func garble(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, n)
	for i := range junk {
		junk[i] = byte(i*7 + 13)
	}
	if _, err := f.WriteAt(junk, off); err != nil {
		t.Fatal(err)
	}
}

func TestOpen_RefusesAStoreLockedByAnotherProjector(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	p := e.open(dir)
	defer p.Close()
	_, err := Open(context.Background(), e.js, dir, WithLogger(quietLogger()), WithRegisterer(reg), func(c *config) { c.lockTimeout = 50 * time.Millisecond })
	if err == nil || errors.Is(err, ErrCorruptStore) {
		t.Fatalf("second Open on a locked store: err = %v, want a lock error that is not corruption", err)
	}
	// A failed Open leaves the registry free for the next one.
	other := e.open(t.TempDir(), WithRegisterer(reg))
	other.Close()
}

func TestOpen_RefeedsAnIndexBehindTheStore(t *testing.T) {
	e := newEnv(t)
	corpus := mixedCorpus(t)
	half := e.publishAll(corpus[:len(corpus)/2])
	dir := t.TempDir()
	r := e.start(dir)
	waitGen(t, r.p, half)
	inst := r.p.cur.dir
	r.stop()
	old := filepath.Join(t.TempDir(), "index")
	if err := os.CopyFS(old, os.DirFS(filepath.Join(inst, "index"))); err != nil {
		t.Fatal(err)
	}
	last := e.publishAll(corpus[len(corpus)/2:])
	r = e.start(dir)
	waitGen(t, r.p, last)
	r.stop()
	// Put the index of the first half back: the store is ahead of it.
	if err := os.RemoveAll(filepath.Join(inst, "index")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(inst, "index"), os.DirFS(old)); err != nil {
		t.Fatal(err)
	}
	again := e.start(dir)
	defer again.stop()
	if g := again.p.Index().Generation(); g != last {
		t.Errorf("index generation after re-feed = %d, want %d", g, last)
	}
	clean := e.start(t.TempDir(), WithDurable("clean"))
	defer clean.stop()
	waitGen(t, clean.p, last)
	if got, want := dumpIndex(t, again.p), dumpIndex(t, clean.p); got != want {
		t.Errorf("re-fed index differs from a clean projection:\n%s", diffLines(got, want))
	}
}

func TestRebuild_CancelledLeavesTheServingProjectionUntouched(t *testing.T) {
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	r := e.start(t.TempDir(), WithBatchSize(10))
	waitGen(t, r.p, last)
	epoch, before := r.p.Epoch(), dumpStore(t, r.p)
	ctx, cancel := context.WithCancel(context.Background())
	err := r.p.Rebuild(ctx, func(p RebuildProgress) { cancel() })
	cancel()
	if err == nil {
		t.Fatal("a cancelled rebuild reported success")
	}
	if r.p.Epoch() != epoch {
		t.Error("a cancelled rebuild changed the epoch")
	}
	if after := dumpStore(t, r.p); after != before {
		t.Errorf("the serving store changed:\n%s", diffLines(after, before))
	}
	entries, _ := os.ReadDir(r.p.dir)
	for _, en := range entries {
		if en.IsDir() && filepath.Join(r.p.dir, en.Name()) != r.p.cur.dir {
			t.Errorf("partial projection %s left behind", en.Name())
		}
	}
}

// withRebuildFetch shapes the rebuild's pulls (fault injection).
func withRebuildFetch(f rebuildFetch) Option { return func(c *config) { c.rebuildFetch = f } }

func TestRebuild_ReadsEveryRecordOnceWhenPullsAreCutOff(t *testing.T) {
	tests := []struct {
		name  string
		fetch rebuildFetch
	}{
		{"every pull abandoned after three of its ten records", rebuildFetch{wait: fetchWait, batch: 10, cutoff: 3}},
		{"every pull abandoned after its first record", rebuildFetch{wait: fetchWait, batch: 7, cutoff: 1}},
	}
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	want := e.cleanRun(last)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.start(t.TempDir(), WithDurable(fmt.Sprintf("cut-off-%d", i)), withRebuildFetch(tt.fetch))
			waitGen(t, r.p, last)
			var final RebuildProgress
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := r.p.Rebuild(ctx, func(p RebuildProgress) { final = p }); err != nil {
				t.Fatalf("rebuild: %v", err)
			}
			if !final.Swapped || final.Applied != last || final.Records != int(last) {
				t.Errorf("final progress %+v, want %d records applied through %d", final, last, last)
			}
			want.check(t, r.p, "after the rebuild")
		})
	}
}

func TestOpen_RefedDocsKeepTheGenerationTheyWereFirstSearchableAt(t *testing.T) {
	e := newEnv(t)
	corpus := mixedCorpus(t)
	half := e.publishAll(corpus[:len(corpus)/2])
	dir := t.TempDir()
	r := e.start(dir)
	waitGen(t, r.p, half)
	inst := r.p.cur.dir
	r.stop()
	old := filepath.Join(t.TempDir(), "index")
	if err := os.CopyFS(old, os.DirFS(filepath.Join(inst, "index"))); err != nil {
		t.Fatal(err)
	}
	last := e.publishAll(corpus[len(corpus)/2:])
	r = e.start(dir)
	waitGen(t, r.p, last)
	r.stop()
	if err := os.RemoveAll(filepath.Join(inst, "index")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(inst, "index"), os.DirFS(old)); err != nil {
		t.Fatal(err)
	}
	again := e.start(dir)
	defer again.stop()

	// A paged search whose first page was taken at `half` (AsOf = half)
	// still finds every doc that was searchable then, although the re-feed
	// re-indexed the sessions changed since.
	checked := 0
	view(t, again.p, func(s Snapshot) error {
		return s.SessionsByCreated(nil, func(info dshq.SessionInfo) bool {
			id := info.Header.Header.ID
			_ = s.Events(id, 0, func(ev dshq.StoredEvent) bool {
				if ev.Text == "" || !info.Valid() || ev.StreamSeq > half || info.UpdatedAt <= half {
					return true
				}
				seq := float64(ev.Record.Seq)
				q := indexQuery(id, strings.Fields(ev.Text)[0], seq)
				q.AsOf = half
				page, err := again.p.Index().SearchEvents(context.Background(), q)
				if err != nil || len(page.Hits) != 1 {
					t.Errorf("%s/%d (stream sequence %d) searched as of %d: %d hits, %v; want 1", id, ev.Record.Seq, ev.StreamSeq, half, len(page.Hits), err)
				}
				checked++
				return true
			})
			return true
		})
	})
	if checked == 0 {
		t.Fatal("no re-fed doc from before the first page was checked")
	}
}

func TestRun_ReadsEveryRecordOnceWhenPullsAreCutOff(t *testing.T) {
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	want := e.cleanRun(last)

	// Every pull is abandoned after three records: the records the server
	// sent after them must not be acknowledged (AckAll) by a later one.
	r := e.start(t.TempDir(), WithBatchSize(10), WithDurable("cut-off"), func(c *config) { c.followCutoff = 3 })
	waitGen(t, r.p, last)
	want.check(t, r.p, "")
}
