package follow

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/dshq/dshq/capture"
)

// file is one followed file. The dispatcher (Run's goroutine) owns running;
// the file's worker reads kick and writes synced.
type file struct {
	path    string
	root    Root
	kick    chan struct{}
	running bool
	// synced is the size of the file as far as its last worker read it
	// (-1: never read): a rescan kicks a file whose size differs.
	synced atomic.Int64
}

// Run follows the roots until ctx ends, and returns nil then; every file's
// worker has stopped and closed its handles by the time it returns. A
// failure to publish is reported and retried, never fatal: Run returns an
// error only when it cannot start.
func (w *Watcher) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var fsw *fsnotify.Watcher
	if !w.cfg.ForcePoll {
		var err error
		if fsw, err = fsnotify.NewWatcher(); err != nil {
			w.cfg.Logger.Warn("inotify is not available: polling", "err", err)
			fsw = nil
		}
	}
	defer func() {
		if fsw != nil {
			_ = fsw.Close()
		}
	}()
	d := &dispatcher{w: w, ctx: ctx, fsw: fsw, files: map[string]*file{}, done: make(chan *file),
		sem: make(chan struct{}, w.cfg.Parallel), watched: map[string]bool{}}
	defer d.wg.Wait()
	defer cancel()
	tick := w.cfg.Rescan
	w.mode = "inotify"
	if fsw == nil {
		tick, w.mode = w.cfg.Poll, "polling every "+w.cfg.Poll.String()
	}
	d.scan(true)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	var events chan fsnotify.Event
	var errs chan error
	if d.fsw != nil {
		events, errs = d.fsw.Events, d.fsw.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case f := <-d.done:
			select {
			case <-f.kick: // kicked after its worker stopped reading
				d.start(f)
			default:
				f.running = false
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			d.event(ev)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			w.cfg.Logger.Warn("inotify", "err", err)
			d.scan(false)
		case <-ticker.C:
			if d.fsw == nil && tick != w.cfg.Poll {
				// Fell back to polling (a watch limit reached).
				tick, w.mode = w.cfg.Poll, "polling every "+w.cfg.Poll.String()
				ticker.Reset(tick)
			}
			d.scan(false)
		}
	}
}

// dispatcher is Run's state: the files, their workers, the watches.
type dispatcher struct {
	w       *Watcher
	ctx     context.Context
	fsw     *fsnotify.Watcher
	files   map[string]*file
	done    chan *file
	sem     chan struct{}
	wg      sync.WaitGroup
	watched map[string]bool
	missing map[string]bool
}

// scan walks every root: it adds watches on directories not watched yet
// and kicks every session file whose size is not the one last read (every
// file on the first scan).
func (d *dispatcher) scan(first bool) {
	for _, r := range d.w.cfg.Roots {
		if !Exists(r.Dir) {
			if d.missing == nil {
				d.missing = map[string]bool{}
			}
			if !d.missing[r.Dir] {
				d.missing[r.Dir] = true
				d.w.report(Report{Kind: ReportMissing, Path: r.Dir, Format: r.Format})
			}
			continue
		}
		if d.missing[r.Dir] || first {
			delete(d.missing, r.Dir)
			d.w.report(Report{Kind: ReportWatching, Path: r.Dir, Format: r.Format, Detail: d.w.mode})
		}
		d.walk(r, r.Dir, first)
	}
}

// walk adds watches under dir and kicks its changed session files.
func (d *dispatcher) walk(r Root, dir string, all bool) {
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone since, or unreadable: the next scan sees
		}
		if e.IsDir() {
			d.watch(p)
			return nil
		}
		if !e.Type().IsRegular() || !sessionFile(r.Format, e.Name()) {
			return nil
		}
		f := d.file(r, p)
		if all {
			d.kick(f)
			return nil
		}
		if fi, err := e.Info(); err == nil && fi.Size() != f.synced.Load() {
			d.kick(f)
		}
		return nil
	})
}

// watch adds an inotify watch on dir; when the system refuses one (its
// watch limit), the watcher falls back to polling.
func (d *dispatcher) watch(dir string) {
	if d.fsw == nil || d.watched[dir] {
		return
	}
	if err := d.fsw.Add(dir); err != nil {
		d.w.cfg.Logger.Warn("inotify watch refused: polling instead", "dir", dir, "err", err)
		_ = d.fsw.Close()
		d.fsw = nil
		return
	}
	d.watched[dir] = true
}

// event handles one inotify event.
func (d *dispatcher) event(ev fsnotify.Event) {
	if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
		delete(d.watched, ev.Name)
	}
	if !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Write) {
		return
	}
	r, ok := d.rootOf(ev.Name)
	if !ok {
		return
	}
	if ev.Has(fsnotify.Create) {
		if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() {
			// A new directory: watch it, then walk it for what was created
			// in it before the watch.
			d.walk(r, ev.Name, true)
			return
		}
	}
	if !sessionFile(r.Format, filepath.Base(ev.Name)) {
		return
	}
	if fi, err := os.Lstat(ev.Name); err != nil || !fi.Mode().IsRegular() {
		return // gone, or a FIFO, a device, a link: never read (as the walk)
	}
	d.kick(d.file(r, ev.Name))
}

// rootOf returns the root path is under.
func (d *dispatcher) rootOf(path string) (Root, bool) {
	for _, r := range d.w.cfg.Roots {
		if rel, err := filepath.Rel(r.Dir, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return r, true
		}
	}
	return Root{}, false
}

func (d *dispatcher) file(r Root, path string) *file {
	f := d.files[path]
	if f == nil {
		f = &file{path: path, root: r, kick: make(chan struct{}, 1)}
		f.synced.Store(-1)
		d.files[path] = f
	}
	return f
}

// kick tells f's worker to read, starting one when none runs.
func (d *dispatcher) kick(f *file) {
	if !f.running {
		d.start(f)
		return
	}
	select {
	case f.kick <- struct{}{}:
	default: // a kick is pending already
	}
}

func (d *dispatcher) start(f *file) {
	f.running = true
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.w.follow(d.ctx, f, d.sem)
		select {
		case d.done <- f:
		case <-d.ctx.Done():
		}
	}()
}

// sessionFile reports a file name a root's harness writes sessions to.
func sessionFile(f capture.Format, name string) bool {
	if f == capture.FormatDeepseek {
		return strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".jsonl.zstd") || strings.HasSuffix(name, ".jsonl.zst")
	}
	return strings.HasSuffix(name, ".jsonl")
}
