package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
)

// Watcher defaults.
const (
	// DefaultIdle is how long a file may stay unchanged before its sessions'
	// write handles are closed (they are then no longer live).
	DefaultIdle = 2 * time.Minute
	// DefaultPoll is the polling interval when inotify is not available.
	DefaultPoll = 250 * time.Millisecond
	// DefaultRescan is how often the roots are walked for changes that
	// inotify did not report (it never loses one on a healthy system; the
	// walk is the safety net: an overflowed queue, a watch limit reached).
	DefaultRescan = 10 * time.Second
	// DefaultParallel bounds the files resumed at once.
	DefaultParallel = 4
)

// Config configures a Watcher.
type Config struct {
	// Store publishes (write leases, expected sequences, retries).
	Store *bus.Store
	// Roots are the directories followed. A root that does not exist yet
	// is looked for again at every rescan.
	Roots []Root
	// Native publishes a deepseek-harness file of a FormatDeepseek root:
	// data is its content up to its last newline (the whole file for a
	// zstd one). Without it, deepseek-harness roots are refused.
	Native func(ctx context.Context, path string, data []byte) error
	// Idle, Poll, Rescan and Parallel default to the constants above.
	Idle, Poll, Rescan time.Duration
	Parallel           int
	// ForcePoll polls instead of using inotify.
	ForcePoll bool
	// Report receives what happens (nil: nothing). It is called from
	// several goroutines, one at a time.
	Report func(Report)
	// Logger receives diagnostics (default: discard).
	Logger *slog.Logger
	// Machine is the machine the files are captured on: the headers of
	// the sessions the watcher creates name it ("": none).
	Machine string
}

// ReportKind names what a Report says.
type ReportKind string

// The reports.
const (
	// ReportWatching: the watcher follows Path (a root), by Detail
	// ("inotify" or "polling every …").
	ReportWatching ReportKind = "watching"
	// ReportMissing: root Path does not exist (yet): it is looked for at
	// every rescan.
	ReportMissing ReportKind = "missing"
	// ReportLive: the watcher holds SessionID's write lease: the session
	// is live while its file (Path) is written.
	ReportLive ReportKind = "live"
	// ReportPublished: Events events of SessionID were stored.
	ReportPublished ReportKind = "published"
	// ReportIdle: Path stayed unchanged for the idle time; SessionID's
	// handle was closed (the session is no longer live).
	ReportIdle ReportKind = "idle"
	// ReportNotice: something to be told once about SessionID (Detail).
	ReportNotice ReportKind = "notice"
	// ReportRetry: a write to SessionID failed for a reason that passes
	// (the bus overloaded or unreachable past the SDK's own retries, a lease
	// not yet lapsed); it is retried where it stopped (Err).
	ReportRetry ReportKind = "retry"
	// ReportError: following Path failed (Err); it is resumed from what the
	// stream holds after a pause.
	ReportError ReportKind = "error"
)

// Report is one thing the watcher tells.
type Report struct {
	Kind      ReportKind
	Time      time.Time
	Path      string
	Format    capture.Format
	SessionID string
	Events    int
	Detail    string
	Err       error
}

// Watcher follows harness roots and publishes what the harnesses append
// (docs/harnesses.md#dshq-watch).
type Watcher struct {
	cfg      Config
	reportMu sync.Mutex
	mode     string
}

// NewWatcher returns a watcher of cfg.Roots.
func NewWatcher(cfg Config) (*Watcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("follow: a watcher needs a Store")
	}
	if len(cfg.Roots) == 0 {
		return nil, errors.New("follow: no root to watch")
	}
	for _, r := range cfg.Roots {
		if r.Format == capture.FormatDeepseek && cfg.Native == nil {
			return nil, fmt.Errorf("follow: deepseek-harness root %s needs Config.Native", r.Dir)
		}
		if r.Format != capture.FormatDeepseek && !Harness(r.Format) {
			return nil, fmt.Errorf("follow: root %s has unknown format %q", r.Dir, r.Format)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Idle, DefaultIdle)
	def(&cfg.Poll, DefaultPoll)
	def(&cfg.Rescan, DefaultRescan)
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Watcher{cfg: cfg}, nil
}

func (w *Watcher) report(r Report) {
	if w.cfg.Report == nil {
		return
	}
	r.Time = time.Now()
	w.reportMu.Lock()
	defer w.reportMu.Unlock()
	w.cfg.Report(r)
}

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
	if sessionFile(r.Format, filepath.Base(ev.Name)) {
		d.kick(d.file(r, ev.Name))
	}
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

// follow is a file's worker: it publishes what the file holds beyond its
// stored sessions, then what is appended, until the file stays unchanged
// for the idle time (or ctx ends). A failure is reported and the file
// resumed from the stream after a pause.
func (w *Watcher) follow(ctx context.Context, f *file, sem chan struct{}) {
	pause := time.Second
	var last string
	for {
		var err error
		if f.root.Format == capture.FormatDeepseek {
			err = w.followNative(ctx, f, sem)
		} else {
			err = w.followHarness(ctx, f, sem)
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		if errors.Is(err, fs.ErrNotExist) {
			return // removed: what was stored stays
		}
		kind := ReportError
		if errors.Is(err, bus.ErrAlreadyOwned) || errors.Is(err, bus.ErrAlreadyExists) {
			// Another writer holds the session's lease, or this watcher's
			// own does, left to lapse within the lease TTL by a release or
			// an acquisition whose acknowledgement was lost under load
			// (Create says "already exists" of a session whose lease is
			// held); the next resume sees what is stored by then.
			kind = ReportRetry
		}
		if msg := err.Error(); msg != last {
			last = msg
			w.report(Report{Kind: kind, Path: f.path, Format: f.root.Format, Err: err})
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// live is one period of a harness file's following: its conversion, and
// the write handles of its sessions.
type live struct {
	w       *Watcher
	f       *file
	format  capture.Format
	r       *Resumed
	handles map[string]*bus.Handle
	order   []string
	// next is each session's next seq in the stream.
	next map[string]int64
	// read is how many bytes of the file have been read.
	read int64
}

// followHarness follows a Claude Code or Codex file for one live period.
func (w *Watcher) followHarness(ctx context.Context, f *file, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	l, data, err := w.resume(ctx, f)
	<-sem
	if err != nil {
		return err
	}
	defer l.close()
	if err := l.publish(ctx, l.r.Replay); err != nil {
		return err
	}
	if err := l.feed(ctx, data[l.r.Lines.Offset():]); err != nil {
		return err
	}
	if len(l.handles) == 0 {
		return nil // nothing new: the file is not being written
	}
	idle := time.NewTimer(w.cfg.Idle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-idle.C:
			return nil
		case <-f.kick:
			grew, err := l.readMore(ctx)
			if err != nil {
				return err
			}
			if grew {
				idle.Reset(w.cfg.Idle)
			}
		}
	}
}

// resume reads the file and resumes its conversion from the stream.
func (w *Watcher) resume(ctx context.Context, f *file) (*live, []byte, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, nil, err
	}
	format := capture.Detect(f.path, data[:min(len(data), 256<<10)])
	if !Harness(format) {
		format = f.root.Format
	}
	r, err := ResumeOn(ctx, w.cfg.Store, format, f.path, data, w.cfg.Machine)
	if err != nil {
		return nil, nil, err
	}
	if n := remappedNotice(r); n != "" && f.synced.Load() < 0 {
		w.report(Report{Kind: ReportNotice, Path: f.path, Format: format, SessionID: r.OwnID, Detail: n})
	}
	l := &live{w: w, f: f, format: format, r: r, handles: map[string]*bus.Handle{}, next: map[string]int64{}, read: int64(len(data))}
	for id, n := range r.Stored {
		l.next[id] = n
	}
	f.synced.Store(int64(len(data)))
	return l, data, nil
}

// readMore reads what the file gained and publishes it.
func (l *live) readMore(ctx context.Context) (bool, error) {
	fh, err := os.Open(l.f.path)
	if err != nil {
		return false, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() < l.read {
		return false, fmt.Errorf("%s shrank from %d to %d bytes: resuming from what is stored", l.f.path, l.read, fi.Size())
	}
	if fi.Size() == l.read {
		return false, nil
	}
	buf := make([]byte, fi.Size()-l.read)
	n, err := fh.ReadAt(buf, l.read)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	l.read += int64(n)
	l.f.synced.Store(l.read)
	return n > 0, l.feed(ctx, buf[:n])
}

// feed converts the complete lines of p (a torn last line is held until
// its newline arrives) and publishes what they give.
func (l *live) feed(ctx context.Context, p []byte) error {
	var ups []capture.Update
	for _, line := range l.r.Lines.Write(p) {
		u, err := l.r.Conv.Feed(line)
		if err != nil {
			return err
		}
		ups = append(ups, u...)
	}
	return l.publish(ctx, ups)
}

// publish stores updates through the sessions' write handles: a new
// session with Create, a stored one reopened for writing, its events
// appended in one Append per session.
func (l *live) publish(ctx context.Context, ups []capture.Update) error {
	type batch struct {
		header *dshq.HeaderRecord
		events []dshq.Event
	}
	var order []string
	batches := map[string]*batch{}
	for _, u := range ups {
		b := batches[u.SessionID]
		if b == nil {
			b = &batch{}
			batches[u.SessionID] = b
			order = append(order, u.SessionID)
		}
		if u.Header != nil {
			b.header = u.Header
		}
		b.events = append(b.events, u.Events...)
		for _, n := range u.Notices {
			l.w.report(Report{Kind: ReportNotice, Path: l.f.path, Format: l.format, SessionID: u.SessionID, Detail: n})
		}
	}
	for _, id := range order {
		b := batches[id]
		h, err := l.handle(ctx, id, b.header)
		if err != nil {
			return err
		}
		if len(b.events) == 0 {
			if err := h.Flush(ctx); err != nil {
				return err
			}
			continue
		}
		if err := l.appendAll(ctx, h, id, b.events); err != nil {
			return err
		}
		l.next[id] += int64(len(b.events))
		l.w.report(Report{Kind: ReportPublished, Path: l.f.path, Format: l.format, SessionID: id, Events: len(b.events)})
	}
	return nil
}

// transient reports whether a write failure passes by itself: anything but
// a refusal of the write (ownership lost, an invalid event, a closed or
// read-only handle, a msg id in use) or the watcher's own stop.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	for _, k := range []error{bus.ErrOwnershipLost, bus.ErrInvalidArgument, bus.ErrHandleClosed, bus.ErrReadOnly, bus.ErrMsgIDInUse,
		bus.ErrLogConflict, bus.ErrCorruption, bus.ErrFormatUnsupported, bus.ErrAlreadyExists} {
		if errors.Is(err, k) {
			return false
		}
	}
	return true
}

// appendAll appends events through h. A transient failure is retried on
// the same handle, which keeps its lease: the handle settles what the
// failed append stored (Flush), and the events after it are appended.
func (l *live) appendAll(ctx context.Context, h *bus.Handle, id string, events []dshq.Event) error {
	pause := 500 * time.Millisecond
	for {
		_, err := h.Append(ctx, events)
		if err == nil {
			return nil
		}
		if !transient(ctx, err) {
			return err
		}
		l.w.report(Report{Kind: ReportRetry, Path: l.f.path, Format: l.format, SessionID: id, Err: err})
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
			pause = min(2*pause, 10*time.Second)
			if err = h.Flush(ctx); err == nil {
				break
			}
			if !transient(ctx, err) {
				return err
			}
		}
		next := h.NextSeq()
		for len(events) > 0 && events[0].Seq < next {
			events = events[1:]
		}
		if len(events) == 0 {
			return nil
		}
	}
}

// handle returns session id's write handle: created from hdr when the
// session is not stored, else opened for writing at the seq this file's
// conversion expects.
func (l *live) handle(ctx context.Context, id string, hdr *dshq.HeaderRecord) (*bus.Handle, error) {
	if h := l.handles[id]; h != nil {
		return h, nil
	}
	var h *bus.Handle
	var err error
	next, stored := l.next[id]
	if !stored && hdr != nil {
		h, err = l.w.cfg.Store.Create(ctx, hdr.Header)
	} else {
		h, err = l.w.cfg.Store.Open(ctx, id, bus.Write)
		if err == nil && h.NextSeq() != next {
			_ = h.Close(ctx)
			err = fmt.Errorf("session %s holds %d events, this file's conversion expected %d: someone else wrote it; resuming from what is stored", id, h.NextSeq(), next)
		}
	}
	if err != nil {
		return nil, err
	}
	l.handles[id] = h
	l.order = append(l.order, id)
	l.w.report(Report{Kind: ReportLive, Path: l.f.path, Format: l.format, SessionID: id})
	return h, nil
}

// close closes every handle (the sessions stop being live).
func (l *live) close() {
	ctx, cancel := context.WithTimeout(context.Background(), bus.DefaultCloseTimeout)
	defer cancel()
	for _, id := range l.order {
		if err := l.handles[id].Close(ctx); err != nil {
			l.w.report(Report{Kind: ReportError, Path: l.f.path, Format: l.format, SessionID: id, Err: err})
			continue
		}
		l.w.report(Report{Kind: ReportIdle, Path: l.f.path, Format: l.format, SessionID: id})
	}
}

// followNative follows a deepseek-harness file: each time it changes, its
// complete lines are published with Config.Native (an import, which
// continues what is stored), until it stays unchanged for the idle time.
func (w *Watcher) followNative(ctx context.Context, f *file, sem chan struct{}) error {
	var done int64 = -1
	idle := time.NewTimer(w.cfg.Idle)
	defer idle.Stop()
	for {
		data, err := os.ReadFile(f.path)
		if err != nil {
			return err
		}
		f.synced.Store(int64(len(data)))
		if !strings.HasSuffix(f.path, ".zst") && !strings.HasSuffix(f.path, ".zstd") {
			if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
				data = data[:i+1]
			} else {
				data = nil
			}
		}
		if n := int64(len(data)); n > 0 && n != done {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return nil
			}
			err := w.cfg.Native(ctx, f.path, data)
			<-sem
			if err != nil {
				return err
			}
			done = n
			idle.Reset(w.cfg.Idle)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-idle.C:
			return nil
		case <-f.kick:
		}
	}
}
