package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/record"
)

// Handle is a single-owner handle on one session (the original's SessionHandle,
// docs/sdk.md#the-persistence-seam). A write handle holds the session's write
// lease until Close; its heartbeat goroutine is stopped by Close. A Handle is
// safe for concurrent use; its operations are serialised.
type Handle struct {
	store *Store
	id    string
	token string
	// key is the session's log key (token, or <tenant>.<token>): its msg
	// ids' prefix.
	key     string
	subject string
	hrec    dshq.HeaderRecord
	access  Access

	mu           sync.Mutex // guards every field below; held across each operation
	closed       bool
	headerRaw    []byte
	materialised bool
	lease        *lease
	// lastStreamSeq is the stream sequence of the session's last record
	// known to this handle (0 before materialisation).
	lastStreamSeq uint64
	// headerSeq is the stream sequence of the header record (0 = unknown).
	headerSeq uint64
	// index[i] is the stream sequence of event i, 0 where not known exactly.
	index []uint64
	// unsure is an append whose outcome is unknown, settled by the next
	// write (resync).
	unsure *pendingAppend
	// state is the strict fold of events [0, state.NextSeq()): on a write
	// handle the whole log, on a read handle the prefix read so far.
	state *fold.State
}

func newHandle(s *Store, hrec dshq.HeaderRecord, tok string, access Access) *Handle {
	return &Handle{store: s, id: hrec.Header.ID, token: tok, key: s.logKey(tok), subject: s.subjectOf(tok), hrec: hrec,
		access: access, state: fold.New(hrec, fold.Strict)}
}

// readView is a read handle on the same session as h.
func (h *Handle) readView() *Handle {
	r := newHandle(h.store, h.hrec, h.token, Read)
	r.headerRaw = h.headerRaw
	return r
}

// ID returns the session id.
func (h *Handle) ID() string { return h.id }

// Header returns the session header, fixed at create or open.
func (h *Handle) Header() dshq.Header { return h.hrec.Header }

// InheritedEventCount returns the length of the inherited prefix.
func (h *Handle) InheritedEventCount() int64 { return h.hrec.InheritedEventCount }

// Access returns the handle's access mode.
func (h *Handle) Access() Access { return h.access }

// NextSeq returns the seq the next appended event must carry, as far as this
// handle knows (exact for a write handle).
func (h *Handle) NextSeq() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state.NextSeq()
}

func (h *Handle) snapshot() *Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &Snapshot{Header: h.hrec.Header, InheritedEventCount: h.hrec.InheritedEventCount,
		Revision: h.lastStreamSeq, EventCount: h.state.NextSeq(), Live: !h.closed}
}

func (h *Handle) closedErr(op string) error {
	return errorf(ErrHandleClosed, h.id, "session %q: %s on a closed handle", h.id, op)
}

// writable checks that op may write: open, write access, lease held.
func (h *Handle) writable(ctx context.Context, op string) error {
	if h.closed {
		return h.closedErr(op)
	}
	if h.access != Write {
		return errorf(ErrReadOnly, h.id, "session %q is open read-only: %s refused", h.id, op)
	}
	if !h.lease.ensure(ctx) {
		return errorf(ErrOwnershipLost, h.id, "session %q: write ownership lost (the lease lapsed and another writer took it)", h.id)
	}
	if h.unsure != nil {
		return h.resync(ctx)
	}
	return nil
}

// recordHeaderRoom is the payload room kept for a record's NATS headers
// (msg id with a token of up to 700 bytes, expected sequence, batch headers).
const recordHeaderRoom = 1024

// Append stores events at the end of the log and returns the stream sequence
// of the last record. The batch must continue at the stored next seq, and
// every event must be a valid record (record.ParseEvent of its Raw, or of
// its fields in envelope order when Raw is empty; Type and Seq, where set,
// must agree with Raw) that the strict fold accepts; unknown event types are stored verbatim. Nothing is
// stored when any check fails. An empty batch is a no-op. The first Append
// also publishes the header record. Errors: ErrHandleClosed, ErrReadOnly,
// ErrOwnershipLost, ErrInvalidArgument (seq mismatch, invalid event).
func (h *Handle) Append(ctx context.Context, events []dshq.Event) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.writable(ctx, "append"); err != nil {
		return 0, err
	}
	if len(events) == 0 {
		return h.lastStreamSeq, nil
	}
	st := h.state.Clone()
	next := st.NextSeq()
	valid := make([]dshq.Event, 0, len(events))
	recs := make([]outRecord, 0, len(events)+1)
	if !h.materialised {
		recs = append(recs, outRecord{msgID: headerMsgID(h.key), data: h.headerRaw})
	}
	for i, e := range events {
		ev, err := h.store.checkEvent(st, h.id, "append to", i, e, next+int64(i))
		if err != nil {
			return 0, err
		}
		recs = append(recs, outRecord{msgID: eventMsgID(h.key, ev.Seq), data: ev.Raw})
		valid = append(valid, ev)
	}
	if err := h.publish(ctx, recs, valid); err != nil {
		return 0, err
	}
	return h.lastStreamSeq, nil
}

// checkEvent checks events[i] of a batch written to session id (op names
// the operation in messages, e.g. "append to"): a valid record (its Raw, or
// its fields in envelope order when Raw is empty) whose decoded fields, where
// set, agree with Raw, that carries seq want, fits the bus's payload limit
// and that st (the fold of the log before it, at the caller's level) accepts.
// It returns the parsed event, applied to st. Errors are ErrInvalidArgument;
// a fold refusal wraps its *fold.ValidationError (seq and rule).
func (s *Store) checkEvent(st *fold.State, id, op string, i int, e dshq.Event, want int64) (dshq.Event, error) {
	raw := e.Raw
	if len(raw) == 0 {
		raw = encodeEvent(e)
	}
	ev, err := record.ParseEvent(raw)
	if err != nil {
		return dshq.Event{}, wrapf(ErrInvalidArgument, id, err,
			"%s session %q: event at index %d is not a valid, losslessly JSON-serializable record: %v", op, id, i, err)
	}
	// The raw record is the event; decoded fields, where set, must agree.
	if (e.Type != "" && ev.Type != e.Type) || (e.Seq != 0 && ev.Seq != e.Seq) {
		return dshq.Event{}, errorf(ErrInvalidArgument, id,
			"%s session %q: event at index %d: raw record (type %q, seq %d) differs from its fields (type %q, seq %d)",
			op, id, i, ev.Type, ev.Seq, e.Type, e.Seq)
	}
	if ev.Seq != want {
		msg := fmt.Sprintf("append seq mismatch for %q: expected %d at index %d, got %d", id, want, i, ev.Seq)
		return dshq.Event{}, wrapf(ErrInvalidArgument, id, &fold.ValidationError{Seq: ev.Seq, Rule: fold.RuleSeq, Message: msg}, "%s", msg)
	}
	if _, err := st.Apply(ev); err != nil {
		return dshq.Event{}, wrapf(ErrInvalidArgument, id, err, "%s session %q: event at index %d: %v", op, id, i, err)
	}
	if max := s.nc.MaxPayload(); int64(len(ev.Raw))+recordHeaderRoom > max {
		return dshq.Event{}, errorf(ErrInvalidArgument, id,
			"%s session %q: event at index %d is %d bytes, over the bus's maximum payload of %d bytes",
			op, id, i, len(ev.Raw), max-recordHeaderRoom)
	}
	return ev, nil
}

// pendingAppend is an append whose outcome is unknown: its publish failed
// after retries without saying whether the server stored its records.
type pendingAppend struct {
	recs   []outRecord
	events []dshq.Event // events[i] belongs to recs[i+off]
	off    int          // 1 when recs[0] is the header record
}

// publish stores recs (the header record first when not yet materialised,
// then events) after the handle's last record, and advances the books for
// every record stored, so a partial failure leaves the handle exactly at
// the stored prefix.
func (h *Handle) publish(ctx context.Context, recs []outRecord, events []dshq.Event) error {
	pa := &pendingAppend{recs: recs, events: events, off: len(recs) - len(events)}
	done := 0
	err := h.store.pub.publish(ctx, h.subject, h.lastStreamSeq, recs, h.store.opts.atomicMin, func(i int, seq uint64) {
		h.commit(pa, i, seq)
		done = i + 1
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrMsgIDInUse) {
		// Refused, not ambiguous: the handle stays after what was stored.
		return wrapf(ErrMsgIDInUse, h.id, err, "append to session %q: %v", h.id, err)
	}
	if isConflict(err) {
		h.lease.markLost()
		return wrapf(ErrOwnershipLost, h.id, err,
			"session %q: write ownership lost: the log changed under this writer (%v)", h.id, err)
	}
	// The rest may or may not be stored: find out before the next write.
	rest := &pendingAppend{recs: recs[done:], off: max(0, pa.off-done)}
	rest.events = events[max(0, done-pa.off):]
	h.unsure = rest
	return fmt.Errorf("append to session %q: %w", h.id, err)
}

// commit records that pa.recs[i] is stored at stream sequence seq (0 =
// stored, sequence not known exactly).
func (h *Handle) commit(pa *pendingAppend, i int, seq uint64) {
	if i < pa.off {
		h.materialised = true
		h.headerSeq = seq
		h.store.materialised(h)
	} else {
		e := pa.events[i-pa.off]
		// Validated on a clone before publishing, so this cannot fail.
		if _, err := h.state.Apply(e); err != nil {
			panic(fmt.Sprintf("bus: fold refused a validated event: %v", err))
		}
		h.index = append(h.index, seq)
	}
	if seq != 0 {
		h.lastStreamSeq = seq
	}
}

// resync settles an append whose outcome was unknown: the records of it
// found stored are committed, and the handle continues after them. A log
// that ends with anything else was written by another writer.
func (h *Handle) resync(ctx context.Context) error {
	pa := h.unsure
	var last *jetstream.RawStreamMsg
	err := h.store.pub.retry(ctx, func(ctx context.Context) error {
		m, err := h.store.reader.last(ctx, h.subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			last = nil
			return nil
		}
		last = m
		return err
	})
	if err != nil {
		return fmt.Errorf("session %q: settle the previous append: %w", h.id, err)
	}
	h.unsure = nil
	if last == nil || last.Sequence == h.lastStreamSeq {
		return nil
	}
	id := last.Header.Get(hdrMsgID)
	for j := range pa.recs {
		if pa.recs[j].msgID == id && string(pa.recs[j].data) == string(last.Data) {
			for i := 0; i <= j; i++ {
				seq := uint64(0)
				if i == j {
					seq = last.Sequence
				}
				h.commit(pa, i, seq)
			}
			return nil
		}
	}
	h.lease.markLost()
	return errorf(ErrOwnershipLost, h.id, "session %q: write ownership lost: the log changed under this writer", h.id)
}

// Flush materialises a created session (publishing its header record) and
// returns once every acknowledged append is stored. Acknowledged records are
// on disk when the server syncs always (the embedded default). Errors:
// ErrHandleClosed, ErrReadOnly, ErrOwnershipLost, bus failures.
func (h *Handle) Flush(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.writable(ctx, "flush"); err != nil {
		return err
	}
	if h.materialised {
		return nil
	}
	return h.publish(ctx, []outRecord{{msgID: headerMsgID(h.key), data: h.headerRaw}}, nil)
}

// Close releases the handle: a write handle stops its heartbeat and releases
// the lease; a created session that was never appended to or flushed is
// erased (nothing was published, the id is free). Close is idempotent and
// not cancellable (it is bounded by DefaultCloseTimeout).
func (h *Handle) Close(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.access != Write {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultCloseTimeout)
	defer cancel()
	h.store.forget(h)
	if h.lease == nil {
		return nil
	}
	return h.lease.release(ctx)
}

// Read returns the events with seq >= offset, at most length of them
// (length < 0 = all). It sees every append that resolved before it started,
// on any handle of any Store. Errors: ErrHandleClosed, ErrInvalidArgument
// (offset or length not a safe integer), ErrFormatUnsupported (an event type
// this harness does not know, not ignorable), ErrCorruption (a record that
// fails validation).
func (h *Handle) Read(ctx context.Context, offset, length int64) ([]dshq.Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, h.closedErr("read")
	}
	if offset < 0 || offset > maxSafeInt {
		return nil, errorf(ErrInvalidArgument, h.id, "read offset must be a non-negative safe integer, got %d", offset)
	}
	if length > maxSafeInt {
		return nil, errorf(ErrInvalidArgument, h.id, "read length must be a non-negative safe integer, got %d", length)
	}
	if length == 0 {
		return []dshq.Event{}, nil
	}
	last, err := h.tail(ctx)
	if err != nil {
		return nil, err
	}
	out := []dshq.Event{}
	if last == 0 {
		return out, nil
	}
	err = h.scan(ctx, offset, last, func(e dshq.Event) bool {
		if e.Seq >= offset {
			out = append(out, e)
		}
		return length < 0 || int64(len(out)) < length
	})
	return out, err
}

// tail returns the stream sequence of the subject's last record (0 for an
// unmaterialised session). A write handle knows it; a read handle asks.
func (h *Handle) tail(ctx context.Context) (uint64, error) {
	if h.access == Write {
		return h.lastStreamSeq, nil
	}
	last, err := h.store.lastSeq(ctx, h.subject)
	if err != nil {
		return 0, fmt.Errorf("read session %q: %w", h.id, err)
	}
	if last > h.lastStreamSeq {
		h.lastStreamSeq = last
	}
	return last, nil
}

// scan delivers the events from (about) offset through stream sequence last,
// in order, until fn returns false. Events beyond the validated prefix are
// validated and folded as they pass, so every event this handle returns has
// been checked in log order.
func (h *Handle) scan(ctx context.Context, offset int64, last uint64, fn func(dshq.Event) bool) error {
	from := min(offset, h.state.NextSeq(), int64(len(h.index))-1)
	start, want := h.headerSeq+1, int64(0)
	for i := from; i >= 0; i-- {
		if h.index[i] != 0 {
			start, want = h.index[i], i
			break
		}
	}
	// Without a known header position, the subject's first record (the
	// header) comes first and is skipped.
	skipHeader := h.headerSeq == 0
	if skipHeader {
		start = 1
	}
	return h.fetch(ctx, start, last, func(r Record) (bool, error) {
		if skipHeader {
			skipHeader, h.headerSeq = false, r.Seq
			return true, nil
		}
		e, err := h.accept(r.Data, want, r.Seq)
		if err != nil {
			return false, err
		}
		want++
		return fn(e), nil
	})
}

// accept parses the record of event want (at stream sequence seq), checks
// it, folds it if it extends the validated prefix, and indexes it.
func (h *Handle) accept(raw []byte, want int64, seq uint64) (dshq.Event, error) {
	e, err := record.ParseEvent(raw)
	if err != nil {
		return dshq.Event{}, wrapf(ErrCorruption, h.id, err, "stored session %q failed validation: record at stream sequence %d: %v", h.id, seq, err)
	}
	if e.Seq != want {
		return dshq.Event{}, errorf(ErrCorruption, h.id,
			"stored session %q failed validation: event at stream sequence %d has seq %d, expected %d", h.id, seq, e.Seq, want)
	}
	if !e.Ignorable && !h.store.opts.knownType(e.Type) {
		return dshq.Event{}, errorf(ErrFormatUnsupported, h.id,
			"stored session %q has event type %q at seq %d that this harness does not know (not ignorable)", h.id, e.Type, e.Seq)
	}
	if legacyFallback(e) {
		return dshq.Event{}, errorf(ErrFormatUnsupported, h.id,
			"stored session %q has a request/header at seq %d with the legacy reason \"fallback\" that this harness no longer reads", h.id, e.Seq)
	}
	if e.Seq == h.state.NextSeq() {
		if _, err := h.state.Apply(e); err != nil {
			return dshq.Event{}, wrapf(ErrCorruption, h.id, err, "stored session %q failed validation: %v", h.id, err)
		}
	}
	for int64(len(h.index)) <= e.Seq {
		h.index = append(h.index, 0)
	}
	h.index[e.Seq] = seq
	return e, nil
}

// loadForWrite validates the whole stored log of a freshly opened write
// handle and positions it at the end.
func (h *Handle) loadForWrite(ctx context.Context) error {
	var last uint64
	err := h.store.pub.retry(ctx, func(ctx context.Context) error {
		m, err := h.store.reader.last(ctx, h.subject)
		if err != nil {
			return err
		}
		last = m.Sequence
		return nil
	})
	if err != nil {
		return fmt.Errorf("open session %q: %w", h.id, err)
	}
	h.lastStreamSeq = last
	if last == h.headerSeq {
		return nil
	}
	return h.scan(ctx, 0, last, func(dshq.Event) bool { return true })
}

// fetch delivers the session's records from stream sequence start through
// last to fn, in order, until fn returns false (Store.fetch).
func (h *Handle) fetch(ctx context.Context, start, last uint64, fn func(r Record) (bool, error)) error {
	if err := h.store.fetch(ctx, h.subject, start, last, fn); err != nil {
		return fmt.Errorf("read session %q: %w", h.id, err)
	}
	return nil
}

// encodeEvent writes an event that has no Raw from its fields, in the
// envelope's order; the result is validated like any other record.
func encodeEvent(e dshq.Event) []byte {
	typ, _ := json.Marshal(e.Type)
	b := []byte(`{"type":`)
	b = append(b, typ...)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, e.Time, 10)
	for _, f := range []struct {
		key string
		raw json.RawMessage
	}{{"data", e.Data}, {"surfaceOp", e.SurfaceOp}, {"sourceEventSeqs", e.SourceEventSeqs}} {
		if f.raw != nil {
			b = append(b, `,"`+f.key+`":`...)
			b = append(b, f.raw...)
		}
	}
	if e.Ignorable {
		b = append(b, `,"ignorable":true`...)
	}
	return append(b, '}')
}

// legacyFallback reports a request/header with the removed reason
// "fallback", which upstream refuses as a format it no longer reads.
func legacyFallback(e dshq.Event) bool {
	if e.Type != "request/header" {
		return false
	}
	var d struct {
		Reason json.RawMessage `json:"reason"`
	}
	return json.Unmarshal(e.Data, &d) == nil && string(d.Reason) == `"fallback"`
}
