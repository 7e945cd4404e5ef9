package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime/debug"
	"strings"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
)

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
		var notRegular *NotRegularError
		if errors.As(err, &notRegular) {
			w.report(Report{Kind: ReportNotice, Path: f.path, Format: f.root.Format, Detail: notRegular.Why()})
			return // never read: a FIFO must not hold a worker
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
	l, err := w.resume(ctx, f)
	<-sem
	if err != nil {
		return err
	}
	defer l.close()
	if err := l.publish(ctx, l.r.Replay); err != nil {
		return err
	}
	// What the file holds past its stored lines, in pieces like any growth.
	if _, err := l.readMore(ctx); err != nil {
		return err
	}
	if len(l.handles) == 0 && l.r.Conv.Stats().Pending == 0 && l.r.Lines.Held() == 0 {
		return nil // nothing new: the file is not being written
	}
	idle := time.NewTimer(w.cfg.Idle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-idle.C:
			return l.finish(ctx)
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

// resume resumes the file's conversion from the stream, reading the file
// a line at a time (ResumeFrom): the file is never held whole. The live
// period reads on from where its stored lines end.
func (w *Watcher) resume(ctx context.Context, f *file) (*live, error) {
	fh, fi, err := openRegular(f.path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	head := make([]byte, min(fi.Size(), 256<<10))
	n, err := fh.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	format := capture.Detect(f.path, head[:n])
	if !Harness(format) {
		format = f.root.Format
	}
	r, err := ResumeFrom(ctx, w.cfg.Store, format, f.path, fh, fi.Size(), w.cfg.Machine)
	if err != nil {
		return nil, err
	}
	if n := remappedNotice(r); n != "" && f.synced.Load() < 0 {
		w.report(Report{Kind: ReportNotice, Path: f.path, Format: format, SessionID: r.OwnID, Detail: n})
	}
	l := &live{w: w, f: f, format: format, r: r, handles: map[string]*bus.Handle{}, next: map[string]int64{}, read: r.Lines.Offset()}
	for id, n := range r.Stored {
		l.next[id] = n
	}
	f.synced.Store(l.read)
	return l, nil
}

// readPiece bounds one read of what a file gained.
const readPiece = 4 << 20

// readMore reads what the file gained and publishes it.
func (l *live) readMore(ctx context.Context) (bool, error) {
	fh, fi, err := openRegular(l.f.path)
	if err != nil {
		return false, err
	}
	defer fh.Close()
	if fi.Size() < l.read {
		return false, fmt.Errorf("the file shrank from %d to %d bytes: resuming from what is stored", l.read, fi.Size())
	}
	if fi.Size() == l.read {
		return false, nil
	}
	// In pieces of at most readPiece bytes: what a read holds beyond the
	// line being cut is bounded, whatever the file gained.
	grew := false
	for l.read < fi.Size() {
		buf := make([]byte, min(fi.Size()-l.read, readPiece))
		n, err := fh.ReadAt(buf, l.read)
		if err != nil && !errors.Is(err, io.EOF) {
			return grew, err
		}
		if n == 0 {
			break
		}
		l.read += int64(n)
		l.f.synced.Store(l.read)
		grew = true
		if err := l.feed(ctx, buf[:n]); err != nil {
			return grew, err
		}
		if readHook != nil {
			readHook(l.f.path, l.read)
		}
	}
	return grew, nil
}

// feed converts the complete lines of p and publishes what they give. The
// bytes after the last newline are held: finish decides them at the idle
// time.
//
// A line of releaseAfter bytes or more costs the watcher several times its
// size while it is converted and published; once it is, that memory is
// given back to the system at once (debug.FreeOSMemory) rather than kept
// by the runtime for later, so the watcher's footprint is bounded by the
// largest line it holds and falls back after it
// (TestAWatchReleasesALongLine).
func (l *live) feed(ctx context.Context, p []byte) error {
	lines := l.r.Lines.Write(p)
	var ups []capture.Update
	longest := 0
	for _, line := range lines {
		longest = max(longest, len(line.Text))
		u, err := l.r.Conv.Feed(line)
		if err != nil {
			return err
		}
		ups = append(ups, u...)
	}
	err := l.publish(ctx, ups)
	if longest >= releaseAfter || len(p) >= releaseAfter {
		debug.FreeOSMemory()
	}
	return err
}

// readHook, when set (by tests, before the watcher starts), is called each
// time a live file's new bytes up to size were read and their complete lines
// published.
var readHook func(path string, size int64)

// releaseAfter is the size of a line (or of a read) after which feed gives
// its memory back to the system.
const releaseAfter = 16 << 20

// finish decides what is still held, as Import does for a file taken as
// complete, and publishes it: at the idle time, when the file is as
// finished as anyone can tell. A last line without a newline is taken when
// it is a whole JSON value, else held until the rest of it arrives
// (capture.Lines.Complete: the rule of Import too, so a watched file and
// its import store the same log); deciding it at the idle time rather than
// as soon as it is read lets a newline written apart from its line (two
// writes) end that line, as an import of the finished file sees it. Then
// the converter's own (a header waiting for its facts, and the lines held
// with it).
func (l *live) finish(ctx context.Context) error {
	var ups []capture.Update
	if last, ok := l.r.Lines.Complete(); ok {
		u, err := l.r.Conv.Feed(last)
		if err != nil {
			return err
		}
		ups = u
	}
	return l.publish(ctx, append(ups, l.r.Conv.Finish()...))
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
		data, err := readRegular(f.path)
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
