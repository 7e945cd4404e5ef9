package projection

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/index"
	"github.com/dshq/dshq/record"
)

// streamRecord is one message of the stream, as the projector applies it.
type streamRecord struct {
	seq     uint64 // stream sequence
	subject string
	data    []byte
}

// batch applies stream records to one instance inside one bbolt write
// transaction and collects the index batch and the Commit.
type batch struct {
	p        *Projector
	inst     *instance
	tx       *bolt.Tx
	gen      uint64 // stream sequence of the record being applied
	sessions map[string]*openSession
	created  []string             // ids of sessions created, in stream order
	docs     map[docKey]index.Doc // net upserts
	deletes  map[string]bool
	commit   Commit
	counts   map[string]int
	usage    *usageBatch // the usage aggregates' changes (usage.go)
	// summaries are the activity order's changes (summary.go)
	summaries *summaryBatch
}

type openSession struct {
	v     *sessionValue
	sk    []byte
	state *fold.State // nil once the session is invalid
}

type docKey struct {
	id  string
	seq int64
}

func (p *Projector) newBatch(inst *instance, tx *bolt.Tx) *batch {
	return &batch{
		p: p, inst: inst, tx: tx,
		sessions: map[string]*openSession{},
		docs:     map[docKey]index.Doc{},
		deletes:  map[string]bool{},
		counts:   map[string]int{},
		commit:   Commit{Epoch: inst.store.epoch},
	}
}

// apply applies one record. Bad records are quarantined, never returned as
// errors: an error means the store itself failed.
func (b *batch) apply(r streamRecord) error {
	b.gen = r.seq
	key, ok := strings.CutPrefix(r.subject, dshq.LogSubjectPrefix)
	var tenant, tok string
	var err error
	if ok {
		tenant, tok, err = record.SplitLogKey(key)
	}
	if !ok || err != nil {
		if !b.p.cfg.partition.ownsSubject("") {
			return nil // shard 0 quarantines it
		}
		return b.quarantine(r, "", fmt.Sprintf("subject %q is not %s<token> or %s<tenant>.<token>", r.subject, dshq.LogSubjectPrefix, dshq.LogSubjectPrefix))
	}
	if !b.p.cfg.partition.ownsSubject(tok) {
		// Another shard's session: only the generation moves, and a
		// child's header is the usage roll-up's lineage (usage.go).
		return b.usageLineage(r, tok)
	}
	if at := b.tx.Bucket(bucketBadSubjects).Get([]byte(key)); at != nil {
		seq, _ := readU64(at)
		return b.quarantine(r, "", fmt.Sprintf("subject's header record was refused at stream sequence %d", seq))
	}
	if id := b.tx.Bucket(bucketTokens).Get([]byte(key)); id != nil {
		return b.applyEvent(r, string(id))
	}
	return b.applyHeader(r, tenant, tok)
}

// applyHeader applies the first record of a log subject: the header record
// of a new session of tenant ("" for none) with subject token tok. Session
// ids are unique across tenants: a header whose id is already a session's,
// on another log subject (another tenant's, or the untenanted namespace),
// is refused with its subject, and the first header stays the session's.
func (b *batch) applyHeader(r streamRecord, tenant, tok string) error {
	key := record.LogKey(tenant, tok)
	h, err := record.ParseHeader(r.data)
	if err != nil {
		return b.refuseSubject(r, key, "invalid header record: "+err.Error())
	}
	want, err := record.SubjectToken(h.Header.ID)
	if err != nil {
		return b.refuseSubject(r, key, "invalid header record: "+err.Error())
	}
	if want != tok {
		return b.refuseSubject(r, key, fmt.Sprintf("header record of session %q is on subject token %q, want %q", h.Header.ID, tok, want))
	}
	id := h.Header.ID
	if owner, err := b.owner(id); err != nil {
		return err
	} else if owner != nil {
		return b.refuseSubject(r, key, fmt.Sprintf("session id %q already belongs to %s (its header is at stream sequence %d); session ids are unique across tenants, the first header wins",
			id, namespace(owner.Tenant), owner.HeaderSeq))
	}
	v := &sessionValue{
		HeaderRaw: append(json.RawMessage(nil), r.data...), Header: h.Header,
		FormatVersion: h.FormatVersion, Inherited: h.InheritedEventCount,
		Token: tok, Tenant: tenant, HeaderSeq: r.seq, LastStepStart: -1, InvalidFrom: -1, UpdatedAt: r.seq,
	}
	if err := b.tx.Bucket(bucketTokens).Put([]byte(key), []byte(id)); err != nil {
		return err
	}
	if err := b.tx.Bucket(bucketByCreated).Put(createdKey(h.Header.CreatedAt, id), nil); err != nil {
		return err
	}
	if h.Header.ParentSession != nil {
		if err := b.tx.Bucket(bucketChildren).Put(childKey(*h.Header.ParentSession, h.Header.CreatedAt, id), nil); err != nil {
			return err
		}
	}
	if err := b.usageHeader(v); err != nil {
		return err
	}
	if err := b.summaryHeader(v); err != nil {
		return err
	}
	b.sessions[id] = &openSession{v: v, sk: sessionKey(id), state: fold.New(h, fold.Lenient)}
	b.created = append(b.created, id)
	b.counts["header"]++
	return nil
}

// owner returns the session that already holds id (applied in this batch or
// stored), nil when there is none.
func (b *batch) owner(id string) (*sessionValue, error) {
	if s, ok := b.sessions[id]; ok {
		return s.v, nil
	}
	v, err := getSession(b.tx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptStore, err)
	}
	return v, nil
}

// namespace names a tenant in a quarantine reason.
func namespace(tenant string) string {
	if tenant == "" {
		return "the untenanted namespace (dsh.log.<token>)"
	}
	return fmt.Sprintf("tenant %q", tenant)
}

// refuseSubject quarantines a subject whose header record is refused: it
// holds no session, and every later record on it is quarantined too. key is
// the subject's log key.
func (b *batch) refuseSubject(r streamRecord, key, reason string) error {
	if err := b.tx.Bucket(bucketBadSubjects).Put([]byte(key), u64(r.seq)); err != nil {
		return err
	}
	return b.quarantine(r, "", reason)
}

func (b *batch) quarantine(r streamRecord, id, reason string) error {
	q := QuarantineRecord{StreamSeq: r.seq, Subject: r.subject, SessionID: id, Reason: reason, Raw: r.data}
	if len(q.Raw) > MaxQuarantineRawBytes {
		q.Raw, q.Truncated = q.Raw[:MaxQuarantineRawBytes], true
	}
	q.Raw = append([]byte(nil), q.Raw...)
	val, err := json.Marshal(q)
	if err != nil {
		return err
	}
	if err := b.tx.Bucket(bucketQuarantine).Put(u64(r.seq), val); err != nil {
		return err
	}
	b.commit.Quarantined = append(b.commit.Quarantined, q)
	b.counts["quarantined"]++
	b.p.log.Warn("record quarantined", "streamSeq", r.seq, "subject", r.subject, "session", id, "reason", reason)
	return nil
}

// session returns the open state of a session that has a header.
func (b *batch) session(id string) (*openSession, error) {
	if s, ok := b.sessions[id]; ok {
		return s, nil
	}
	// A cached entry is what the last commit stored: no decode of either.
	if st, v, ok := b.inst.cache.get(id); ok {
		s := &openSession{v: v, sk: sessionKey(id), state: st}
		b.sessions[id] = s
		return s, nil
	}
	v, err := getSession(b.tx, id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptStore, err)
	}
	if v == nil {
		return nil, fmt.Errorf("%w: token names missing session %q", ErrCorruptStore, id)
	}
	s := &openSession{v: v, sk: sessionKey(id)}
	if v.InvalidFrom < 0 {
		raw := b.tx.Bucket(bucketStates).Get([]byte(id))
		if raw == nil {
			return nil, fmt.Errorf("%w: session %q has no fold state", ErrCorruptStore, id)
		}
		st := fold.New(v.info().Header, fold.Lenient)
		if err := st.UnmarshalBinary(raw); err != nil {
			return nil, fmt.Errorf("%w: session %q: restore fold state: %v", ErrCorruptStore, id, err)
		}
		s.state = st
	}
	b.sessions[id] = s
	return s, nil
}

func (b *batch) applyEvent(r streamRecord, id string) error {
	s, err := b.session(id)
	if err != nil {
		return err
	}
	pos := s.v.EventCount
	if s.state == nil {
		return b.storeInvalid(s, pos, r, nil)
	}
	if bytes.Equal(r.data, s.v.HeaderRaw) {
		return b.quarantine(r, s.v.Header.ID, fmt.Sprintf("duplicate of the header record (stream sequence %d); skipped", s.v.HeaderSeq))
	}
	ev, err := record.ParseEvent(r.data)
	if err != nil {
		return b.invalidate(s, pos, r, "invalid event record: "+err.Error(), nil)
	}
	if ev.Seq >= 0 && ev.Seq < pos {
		// A byte-identical copy of an applied event (a retried publish
		// that escaped deduplication) is quarantined and skipped; the log
		// itself is intact. Anything else at an old seq breaks the log.
		old, ok, err := getEvent(b.tx, s.sk, ev.Seq)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorruptStore, err)
		}
		if ok && !old.Invalid && bytes.Equal(old.Raw, r.data) {
			return b.quarantine(r, s.v.Header.ID, fmt.Sprintf("duplicate of the applied event at seq %d (stream sequence %d); skipped", ev.Seq, old.StreamSeq))
		}
	}
	eff, err := s.state.Apply(ev)
	if err != nil {
		return b.invalidate(s, pos, r, err.Error(), &ev)
	}
	if eff.Record.Seq != pos {
		// The fold checks contiguity; this guards the store's invariant
		// that an event is stored at its position.
		return b.invalidate(s, pos, r, fmt.Sprintf("event seq %d is not the next; expected %d", eff.Record.Seq, pos), &ev)
	}
	return b.storeEvent(s, r, eff)
}

func (b *batch) storeEvent(s *openSession, r streamRecord, eff fold.Effects) error {
	seq := eff.Record.Seq
	val := eventValue{
		Type: eff.Record.Type, Time: eff.Record.Time, Surface: eff.Record.Surface,
		StreamSeq: r.seq, OrderKey: seq, Text: eff.Text, Raw: r.data,
	}
	if len(eff.Shadowed) > 0 {
		first, ok, err := getEvent(b.tx, s.sk, eff.Shadowed[0])
		if err != nil || !ok {
			return fmt.Errorf("%w: session %q: shadowed event %d: %v", ErrCorruptStore, s.v.Header.ID, eff.Shadowed[0], err)
		}
		val.OrderKey = first.OrderKey
	}
	key := seqKey(s.sk, seq)
	if err := b.tx.Bucket(bucketEvents).Put(key, val.marshal()); err != nil {
		return err
	}
	if err := b.shadow(s, seq, eff.Shadowed); err != nil {
		return err
	}
	if val.Surface == dshq.SurfaceCurrent {
		if err := b.tx.Bucket(bucketSurface).Put(seqKey(s.sk, val.OrderKey), u64(uint64(seq))); err != nil {
			return err
		}
	}
	if err := b.putEdges(s, key, seq, eff.Sources); err != nil {
		return err
	}
	if eff.Title != nil {
		t := *eff.Title
		s.v.Title = &t
		b.commit.Titles = append(b.commit.Titles, TitleChange{SessionID: s.v.Header.ID, Title: t})
	}
	if eff.StepStart {
		s.v.LastStepStart = seq
	}
	if err := b.usageEvent(s, r, eff.Record.Time); err != nil {
		return err
	}
	b.summaryEvent(s, eff.Record.Type, eff.Record.Time, r.data)
	s.v.EventCount++
	s.v.UpdatedAt = r.seq
	doc := dshq.SearchDocument{EventRecord: eff.Record, Text: eff.Text}
	doc.SessionID = s.v.Header.ID
	if eff.Text != "" {
		d := indexDoc(s.v, doc)
		d.Generation = r.seq
		b.docs[docKey{s.v.Header.ID, seq}] = d
	}
	b.commit.Events = append(b.commit.Events, CommittedEvent{
		SearchDocument: doc, Token: s.v.Token, Workspace: record.WorkspaceKey(s.v.Header.Cwd),
		Raw: r.data, StreamSeq: r.seq,
	})
	b.counts["event"]++
	return nil
}

// shadow marks the seqs an event replaced as shadowed by seq.
func (b *batch) shadow(s *openSession, seq int64, shadowed []int64) error {
	if len(shadowed) == 0 {
		return nil
	}
	id := s.v.Header.ID
	events := b.tx.Bucket(bucketEvents)
	for _, x := range shadowed {
		old, ok, err := getEvent(b.tx, s.sk, x)
		if err != nil || !ok {
			return fmt.Errorf("%w: session %q: shadowed event %d: %v", ErrCorruptStore, id, x, err)
		}
		if err := b.tx.Bucket(bucketSurface).Delete(seqKey(s.sk, old.OrderKey)); err != nil {
			return err
		}
		old.Surface = dshq.SurfaceShadowed
		k := seqKey(s.sk, x)
		if err := events.Put(k, old.marshal()); err != nil {
			return err
		}
		if err := b.tx.Bucket(bucketReplacedBy).Put(k, u64(uint64(seq))); err != nil {
			return err
		}
		by := seq
		b.commit.Reclassified = append(b.commit.Reclassified, Reclassification{SessionID: id, Seq: x, Surface: dshq.SurfaceShadowed, ReplacedBy: &by})
		if old.Text != "" {
			// The doc is re-indexed whole, from the store, as the re-feed
			// does: reading it back from the index would look its id up in
			// every segment and touch their pages.
			k := docKey{id, x}
			d, ok := b.docs[k]
			if !ok {
				rec := dshq.EventRecord{SessionID: id, Seq: x, Type: old.Type, Time: old.Time}
				d = indexDoc(s.v, dshq.SearchDocument{EventRecord: rec, Text: old.Text})
				d.Generation = old.StreamSeq // when it was first searchable
			}
			d.Surface = dshq.SurfaceShadowed
			b.docs[k] = d
		}
	}
	s.v.ReclassifiedAt = b.gen
	return b.tx.Bucket(bucketReplaced).Put(seqKey(s.sk, seq), encodeSeqs(shadowed))
}

// putEdges stores an event's provenance: its sources in recorded order and
// a derived edge under each source.
func (b *batch) putEdges(s *openSession, key []byte, seq int64, sources []int64) error {
	if len(sources) == 0 {
		return nil
	}
	if err := b.tx.Bucket(bucketSources).Put(key, encodeSeqs(sources)); err != nil {
		return err
	}
	derived := b.tx.Bucket(bucketDerived)
	for _, src := range sources {
		k := append(seqKey(s.sk, src), u64(uint64(seq))...)
		if err := derived.Put(k, nil); err != nil {
			return err
		}
	}
	return nil
}

// invalidate marks a session invalid from pos: the record is quarantined
// and stored raw, the fold state is dropped, and the session's documents
// leave the index.
func (b *batch) invalidate(s *openSession, pos int64, r streamRecord, reason string, ev *dshq.Event) error {
	id := s.v.Header.ID
	reason = fmt.Sprintf("event at seq %d: %s", pos, reason)
	if err := b.quarantine(r, id, reason); err != nil {
		return err
	}
	s.v.InvalidFrom, s.v.InvalidReason, s.v.ReclassifiedAt = pos, reason, b.gen
	s.state = nil
	b.inst.cache.remove(id)
	if err := b.tx.Bucket(bucketStates).Delete([]byte(id)); err != nil {
		return err
	}
	b.deletes[id] = true
	for k := range b.docs {
		if k.id == id {
			delete(b.docs, k)
		}
	}
	return b.storeInvalid(s, pos, r, ev)
}

// storeInvalid stores a record of an invalid session raw at pos.
func (b *batch) storeInvalid(s *openSession, pos int64, r streamRecord, ev *dshq.Event) error {
	val := eventValue{Invalid: true, StreamSeq: r.seq, OrderKey: pos, Raw: r.data}
	if ev != nil {
		val.Type, val.Time = ev.Type, ev.Time
	} else {
		// Best effort, for listing only: the record may not be JSON at all.
		var env struct {
			Type string `json:"type"`
			Time int64  `json:"time"`
		}
		if json.Unmarshal(r.data, &env) == nil {
			val.Type, val.Time = env.Type, env.Time
		}
	}
	if val.Time != 0 {
		b.summaryTime(s, val.Time)
	}
	if err := b.tx.Bucket(bucketEvents).Put(seqKey(s.sk, pos), val.marshal()); err != nil {
		return err
	}
	s.v.EventCount++
	s.v.UpdatedAt = r.seq
	b.commit.Events = append(b.commit.Events, CommittedEvent{
		SearchDocument: dshq.SearchDocument{EventRecord: dshq.EventRecord{SessionID: s.v.Header.ID, Seq: pos, Type: val.Type, Time: val.Time}},
		Token:          s.v.Token, Workspace: record.WorkspaceKey(s.v.Header.Cwd),
		Invalid: true, Raw: r.data, StreamSeq: r.seq,
	})
	b.counts["invalid"]++
	return nil
}

// finish writes the touched sessions, their fold states and the checkpoint,
// and returns the index batch. The transaction is not committed.
func (b *batch) finish() (*index.Batch, error) {
	ids := make([]string, 0, len(b.sessions))
	for id := range b.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s := b.sessions[id]
		if s.state != nil {
			raw, err := s.state.MarshalBinary()
			if err != nil {
				return nil, fmt.Errorf("session %q: encode fold state: %w", id, err)
			}
			if err := b.tx.Bucket(bucketStates).Put([]byte(id), raw); err != nil {
				return nil, err
			}
			b.inst.cache.put(id, s.state, s.v, cacheCost(id, s.state, s.v))
		}
		if err := putSession(b.tx, s.v); err != nil {
			return nil, err
		}
	}
	if err := b.finishUsage(); err != nil {
		return nil, err
	}
	if err := b.finishSummaries(); err != nil {
		return nil, err
	}
	if err := b.tx.Bucket(bucketMeta).Put(metaCheckpoint, u64(b.gen)); err != nil {
		return nil, err
	}
	for _, id := range b.created {
		b.commit.Sessions = append(b.commit.Sessions, b.sessions[id].v.info())
	}
	b.commit.Generation = b.gen
	return b.indexBatch(), nil
}

// indexBatch returns the batch's index operations as net final states:
// session deletions, then upserts (new docs and reclassified ones).
func (b *batch) indexBatch() *index.Batch {
	ib := &index.Batch{}
	for _, id := range sortedKeys(b.deletes) {
		ib.DeleteSession(id)
	}
	for _, k := range sortedDocKeys(b.docs) {
		if s := b.sessions[k.id]; s == nil || s.state != nil {
			ib.Upsert(b.docs[k])
		}
	}
	return ib
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedDocKeys[V any](m map[docKey]V) []docKey {
	out := make([]docKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].id != out[j].id {
			return out[i].id < out[j].id
		}
		return out[i].seq < out[j].seq
	})
	return out
}

// indexDoc is the index document of an event with semantic text.
func indexDoc(v *sessionValue, d dshq.SearchDocument) index.Doc {
	h := v.Header
	return index.Doc{
		SessionID: d.SessionID, Tenant: v.Tenant, Harness: harnessOrNil(h.Harness), Cwd: h.Cwd, Parent: h.ParentSession, CreatedAt: h.CreatedAt,
		Seq: d.Seq, Type: d.Type, Time: d.Time, Surface: d.Surface, Text: d.Text,
	}
}

// harnessOrNil is a header's harness as the index keeps it: nil for a
// native session.
func harnessOrNil(h string) *string {
	if h == "" {
		return nil
	}
	return &h
}

// abort forgets the fold states the batch touched: they may hold effects
// that were never committed.
func (b *batch) abort() {
	for id := range b.sessions {
		b.inst.cache.remove(id)
	}
}

// eventsFillPercent is how full a split leaves an events page (bbolt's
// default is 0.5). Measured on the bench corpus (800 sessions written 256 at
// a time): pages 46% full at 0.5, 73% at 0.9; at 1.0 the splits between
// interleaved sessions leave more small pages than they save.
const eventsFillPercent = 0.9

// applyBatch applies records (in stream order) to inst: records at or
// below the checkpoint are skipped; the index is fed before the store
// commits, so it is never behind a snapshot. It returns the Commit (nil when
// nothing was applied).
func (p *Projector) applyBatch(ctx context.Context, inst *instance, recs []streamRecord) (*Commit, error) {
	return p.applyBatchTimed(ctx, inst, recs, nil)
}

// applyBatchTimed is applyBatch, noting when its stages end in t (nil:
// not noted).
func (p *Projector) applyBatchTimed(ctx context.Context, inst *instance, recs []streamRecord, t *stageTimes) (*Commit, error) {
	tx, err := inst.store.db.Begin(true)
	if err != nil {
		return nil, fmt.Errorf("begin batch: %w", err)
	}
	// Events are keyed by session then seq, so each session's appends land
	// at its own tail: a split page never takes keys again, and bbolt's
	// default split (half full) leaves the bucket half empty.
	tx.Bucket(bucketEvents).FillPercent = eventsFillPercent
	b := p.newBatch(inst, tx)
	ok := false
	defer func() {
		if !ok {
			tx.Rollback()
			b.abort()
		}
	}()
	cp, err := readU64(tx.Bucket(bucketMeta).Get(metaCheckpoint))
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint: %v", ErrCorruptStore, err)
	}
	applied := 0
	for _, r := range recs {
		if r.seq <= cp {
			continue // redelivered: already applied
		}
		if err := b.apply(r); err != nil {
			return nil, err
		}
		cp = r.seq
		applied++
	}
	if applied == 0 {
		return nil, nil
	}
	ib, err := b.finish()
	if err != nil {
		return nil, err
	}
	t.note(stageFolded)
	if err := p.hook("before-index", b.gen); err != nil {
		return nil, err
	}
	if b.gen > inst.indexGen {
		// A batch in flight completes even when shutdown begins: it is
		// bounded, and finishing it is cheaper than replaying it.
		if err := inst.index.Apply(context.WithoutCancel(ctx), ib, b.gen); err != nil {
			return nil, fmt.Errorf("apply batch to index: %w", err)
		}
		inst.indexGen = b.gen
	}
	t.note(stageIndexed)
	if err := p.hook("before-commit", b.gen); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit batch: %w", err)
	}
	t.note(stageCommitted)
	ok = true
	for kind, n := range b.counts {
		p.metrics.applied.WithLabelValues(kind).Add(float64(n))
	}
	p.metrics.quarantined.Add(float64(b.counts["quarantined"]))
	p.metrics.cacheBytes.Set(float64(inst.cache.bytes()))
	return &b.commit, nil
}

// releaseEvery bounds how often a writer releases the mapped pages of its
// store and index. A release costs a read of /proc/self/maps and a madvise
// per segment file; a batch re-touches up to a large folio (1-2 MiB on
// ext4) of every segment (Bleve reads each segment's id dictionary), so a
// long interval lets merges' reads pile up on top.
const releaseEvery = 200 * time.Millisecond

// releaseMapped drops the pages of the store's and the index's file maps
// from the process's resident set, at most once per releaseEvery: both
// read their files through shared maps, so the pages a process touched
// would otherwise grow with the data (see store.releaseMapped and
// index.Index.ReleaseMapped). The caller holds writeMu.
func (p *Projector) releaseMapped(inst *instance) {
	if time.Since(inst.released) < releaseEvery {
		return
	}
	inst.released = time.Now()
	if err := inst.store.releaseMapped(); err != nil {
		p.log.Warn("cannot release the store's mapped pages", "err", err)
	}
	if err := inst.index.ReleaseMapped(); err != nil {
		p.log.Warn("cannot release the index's mapped pages", "err", err)
	}
}

func (p *Projector) hook(point string, gen uint64) error {
	if p.cfg.hook == nil {
		return nil
	}
	return p.cfg.hook(point, gen)
}
