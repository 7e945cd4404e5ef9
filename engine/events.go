package engine

import (
	"context"
	"fmt"
	"math"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// eventLog is a session's log as reads see it: the stored events followed
// by the synthetic crash closers of the balanced view.
type eventLog struct {
	snap    Snapshot
	info    dshq.SessionInfo
	closers []dshq.StoredEvent
}

func openLog(snap Snapshot, info dshq.SessionInfo) (*eventLog, error) {
	closers, err := snap.Closers(info.Header.Header.ID)
	if err != nil {
		return nil, fmt.Errorf("read closers of %q: %w", info.Header.Header.ID, err)
	}
	return &eventLog{snap: snap, info: info, closers: closers}, nil
}

func (l *eventLog) count() int64 { return l.info.EventCount + int64(len(l.closers)) }

// each calls fn for events from seq from up to (not including) to.
func (l *eventLog) each(from, to int64, fn func(dshq.StoredEvent) bool) error {
	if from < l.info.EventCount && from < to {
		for ev, err := range l.snap.Events(l.info.Header.Header.ID, from) {
			if err != nil {
				return fmt.Errorf("read events of %q: %w", l.info.Header.Header.ID, err)
			}
			if ev.Record.Seq >= to {
				break
			}
			if !fn(ev) {
				return nil
			}
		}
	}
	for _, ev := range l.closers {
		if ev.Record.Seq >= from && ev.Record.Seq < to && !fn(ev) {
			return nil
		}
	}
	return nil
}

// get returns the event at seq.
func (l *eventLog) get(seq int64) (dshq.StoredEvent, bool, error) {
	if seq >= l.info.EventCount {
		i := seq - l.info.EventCount
		if i < int64(len(l.closers)) {
			return l.closers[i], true, nil
		}
		return dshq.StoredEvent{}, false, nil
	}
	ev, ok, err := l.snap.Event(l.info.Header.Header.ID, seq)
	if err != nil {
		return ev, false, fmt.Errorf("read event %d of %q: %w", seq, l.info.Header.Header.ID, err)
	}
	return ev, ok, nil
}

// surface returns the current surface (closers that are surface events
// append to it).
func (l *eventLog) surface() ([]int64, error) {
	seqs, err := l.snap.SurfaceSeqs(l.info.Header.Header.ID)
	if err != nil {
		return nil, fmt.Errorf("read surface of %q: %w", l.info.Header.Header.ID, err)
	}
	for _, ev := range l.closers {
		if ev.Record.Surface == dshq.SurfaceCurrent {
			seqs = append(seqs, ev.Record.Seq)
		}
	}
	return seqs, nil
}

// pagedLog opens the session of a seq-paged read and its cursor. Later
// pages are bounded by the event count of the first page; when checkSurface
// is set, an invalid session is SESSION_QUERY_INVALID_SURFACE and a
// reclassification after the first page makes the cursor stale.
func (e *Engine) pagedLog(snap Snapshot, req *wire.Request, checkSurface bool) (*eventLog, *wire.Cursor, error) {
	info, err := lookup(snap, req.SessionID)
	if err != nil {
		return nil, nil, err
	}
	if checkSurface && info.InvalidFrom >= 0 {
		return nil, nil, invalidSurface(info)
	}
	c, first, err := e.continueCursor(snap, req)
	if err != nil {
		return nil, nil, err
	}
	l, err := openLog(snap, info)
	if err != nil {
		return nil, nil, err
	}
	if first {
		c.Bound = l.count()
		if req.Endpoint == wire.EndpointSessionsSurface {
			seqs, err := l.surface()
			if err != nil {
				return nil, nil, err
			}
			c.Bound, c.Captured = int64(len(seqs)), l.count()-1
		}
		return l, c, nil
	}
	if checkSurface && info.ReclassifiedAt > c.Generation {
		return nil, nil, staleCursor()
	}
	if req.Endpoint != wire.EndpointSessionsSurface && c.Bound > l.count() {
		return nil, nil, staleCursor()
	}
	return l, c, nil
}

// listEvents answers events.list (records) and events.filter (documents).
func (e *Engine) listEvents(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	l, c, err := e.pagedLog(snap, req, true)
	if err != nil {
		return nil, err
	}
	m := wire.NewEventMatcher(req.Filters)
	from, last := m.SeqBounds()
	from, to := max(from, c.Position), c.Bound
	if last < to-1 {
		to = last + 1
	}
	var (
		records = []dshq.EventRecord{}
		docs    = []dshq.SearchDocument{}
		sz      *sizer
		filter  = req.Endpoint == wire.EndpointEventsFilter
		next    = int64(-1)
		tooBig  bool
	)
	if filter {
		sz = e.sizer(dshq.SearchDocumentPage{Items: docs})
	} else {
		sz = e.sizer(dshq.EventRecordPage{Items: records})
	}
	err = l.each(from, to, func(ev dshq.StoredEvent) bool {
		var item any = ev.Record
		if filter {
			doc := dshq.SearchDocument{EventRecord: ev.Record, Text: ev.Text}
			if doc.Text == "" || !m.Match(doc) {
				return true
			}
			item = doc
		}
		if len(records)+len(docs) == req.Limit || !sz.add(item) {
			next, tooBig = ev.Record.Seq, len(records)+len(docs) == 0
			return false
		}
		if filter {
			docs = append(docs, item.(dshq.SearchDocument))
		} else {
			records = append(records, ev.Record)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if tooBig {
		return nil, tooLargeItem(req.Endpoint)
	}
	cur := ""
	if next >= 0 {
		cur = c.At(next)
	}
	if filter {
		return dshq.SearchDocumentPage{Items: docs, NextCursor: cur, Generation: snap.Generation()}, nil
	}
	return dshq.EventRecordPage{Items: records, NextCursor: cur, Generation: snap.Generation()}, nil
}

// readSession answers sessions.read: raw events in seq order, paged; an
// invalid session's raw events are still returned.
func (e *Engine) readSession(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	l, c, err := e.pagedLog(snap, req, false)
	if err != nil {
		return nil, err
	}
	out := dshq.SessionRead{Session: l.info.Header.Header, InheritedEventCount: l.info.Header.InheritedEventCount,
		Events: []dshq.Event{}, Generation: snap.Generation()}
	sz := e.sizer(out)
	next, tooBig := int64(-1), false
	err = l.each(c.Position, c.Bound, func(ev dshq.StoredEvent) bool {
		item := dshq.Event{Raw: ev.Raw}
		if len(out.Events) == req.Limit || !sz.add(item) {
			next, tooBig = ev.Record.Seq, len(out.Events) == 0
			return false
		}
		out.Events = append(out.Events, item)
		return true
	})
	if err != nil {
		return nil, err
	}
	if tooBig {
		return nil, tooLargeItem(req.Endpoint)
	}
	if next >= 0 {
		out.NextCursor = c.At(next)
	}
	return out, nil
}

// readSurface answers sessions.surface: the current surface events in
// surface order, paged by surface index, as of the first page.
func (e *Engine) readSurface(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	l, c, err := e.pagedLog(snap, req, true)
	if err != nil {
		return nil, err
	}
	seqs, err := l.surface()
	if err != nil {
		return nil, err
	}
	if c.Bound > int64(len(seqs)) {
		return nil, staleCursor()
	}
	out := dshq.SurfaceSnapshot{Session: l.info.Header.Header, InheritedEventCount: l.info.Header.InheritedEventCount,
		Events: []dshq.Event{}, Generation: snap.Generation()}
	if c.Captured >= 0 {
		out.CapturedThroughSeq = &c.Captured
	}
	sz := e.sizer(out)
	for i := c.Position; i < c.Bound; i++ {
		ev, ok, err := l.get(seqs[i])
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, dshq.Errorf(dshq.CodeCorruptSession, "session %q: surface event %d is missing", l.info.Header.Header.ID, seqs[i])
		}
		item := dshq.Event{Raw: ev.Raw}
		if len(out.Events) == req.Limit || !sz.add(item) {
			if len(out.Events) == 0 {
				return nil, tooLargeItem(req.Endpoint)
			}
			out.NextCursor = c.At(i)
			break
		}
		out.Events = append(out.Events, item)
	}
	return out, nil
}

// resolveTarget looks up the session of events.read/trace, opens its log and
// resolves the target seq (targetEvent), in that order.
func resolveTarget(snap Snapshot, req *wire.Request) (dshq.SessionInfo, *eventLog, dshq.StoredEvent, error) {
	info, err := lookup(snap, req.SessionID)
	if err != nil {
		return dshq.SessionInfo{}, nil, dshq.StoredEvent{}, err
	}
	l, err := openLog(snap, info)
	if err != nil {
		return dshq.SessionInfo{}, nil, dshq.StoredEvent{}, err
	}
	target, err := targetEvent(l, req)
	return info, l, target, err
}

// targetEvent resolves the seq of events.read/trace: a seq that is not a
// non-negative integer, or past the end, is SESSION_QUERY_EVENT_NOT_FOUND.
func targetEvent(l *eventLog, req *wire.Request) (dshq.StoredEvent, error) {
	notFound := dshq.Errorf(dshq.CodeEventNotFound, "session %s has no event at seq %s", dshq.Quote(req.SessionID), req.SeqLit)
	if req.Seq < 0 || req.Seq != math.Trunc(req.Seq) || req.Seq >= float64(l.count()) {
		return dshq.StoredEvent{}, notFound
	}
	ev, ok, err := l.get(int64(req.Seq))
	if err != nil {
		return ev, err
	}
	if !ok {
		return ev, notFound
	}
	return ev, nil
}

// readEvent answers events.read (docs/query.md#event-read-windows): the window
// is clamped by the log's edges and by the reply budget; the target always
// stays. The target is also carried in target when it fits there too;
// otherwise the reply says targetOmitted and may use the whole payload for it.
func (e *Engine) readEvent(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	info, l, target, err := resolveTarget(snap, req)
	if err != nil {
		return nil, err
	}
	seq := target.Record.Seq
	out := dshq.EventWindow{Session: info.Header.Header, InheritedEventCount: info.Header.InheritedEventCount,
		Target: dshq.Event{Raw: target.Raw}, Generation: snap.Generation()}
	sz := e.sizer(out)
	sz.used -= cursorReserve
	if !sz.add(out.Target) {
		// The target does not fit twice (in target and in events): it is
		// carried once, in events (docs/protocol.md#3-the-trusted-query-api, events.read).
		out.Target, out.TargetOmitted = dshq.Event{}, true
		sz = e.sizer(out)
		sz.used -= cursorReserve
		sz.used += encodedSize(dshq.Event{Raw: target.Raw}) + 1 // always included, up to targetLimit
	}
	lo, hi := max(0, seq-int64(req.Before)), min(l.count()-1, seq+int64(req.After))
	start, end := seq, seq
	window := map[int64]dshq.StoredEvent{seq: target}
	// grow takes the next event on one side if it fits; a side that meets
	// its edge or the budget is done (the window stays contiguous).
	grow := func(s int64, done *bool) error {
		ev, ok, err := l.get(s)
		if err != nil {
			return err
		}
		if !ok || !sz.add(dshq.Event{Raw: ev.Raw}) {
			*done = true
			return nil
		}
		window[s] = ev
		start, end = min(start, s), max(end, s)
		return nil
	}
	beforeDone, afterDone := false, false
	for {
		beforeDone, afterDone = beforeDone || start <= lo, afterDone || end >= hi
		if beforeDone && afterDone {
			break
		}
		if !beforeDone {
			if err := grow(start-1, &beforeDone); err != nil {
				return nil, err
			}
		}
		if !afterDone && end < hi {
			if err := grow(end+1, &afterDone); err != nil {
				return nil, err
			}
		}
	}
	out.StartSeq, out.EndSeq = start, end
	out.Events = make([]dshq.Event, 0, end-start+1)
	for s := start; s <= end; s++ {
		out.Events = append(out.Events, dshq.Event{Raw: window[s].Raw})
	}
	return out, nil
}

// traceEvent answers events.trace (docs/events-and-surfaces.md#event-traces):
// the target is checked before the surface, so a seq past the end is
// EVENT_NOT_FOUND even in an invalid session.
func (e *Engine) traceEvent(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	info, l, target, err := resolveTarget(snap, req)
	if err != nil {
		return nil, err
	}
	if info.InvalidFrom >= 0 {
		return nil, invalidSurface(info)
	}
	tr := dshq.EventTrace{
		Session:           info.Header.Header,
		Target:            target.Record,
		ReplacedBy:        target.ReplacedBy,
		ReplacementChain:  []int64{},
		ReplacedEventSeqs: orEmpty(target.ReplacedEventSeqs),
		SourceEventSeqs:   orEmpty(target.Sources),
		DerivedEventSeqs:  orEmpty(target.Derived),
		Generation:        snap.Generation(),
	}
	seen := map[int64]bool{target.Record.Seq: true}
	for by := target.ReplacedBy; by != nil && !seen[*by]; {
		seen[*by] = true
		tr.ReplacementChain = append(tr.ReplacementChain, *by)
		ev, ok, err := l.get(*by)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		by = ev.ReplacedBy
	}
	for _, cl := range l.closers {
		for _, s := range cl.Sources {
			if s == target.Record.Seq && cl.Record.Seq != target.Record.Seq {
				tr.DerivedEventSeqs = append(tr.DerivedEventSeqs, cl.Record.Seq)
			}
		}
	}
	return tr, nil
}

func orEmpty(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}
