// Package projection is the projector: it folds the session log stream
// (JetStream DSH_SESSIONS) into a bbolt store (sessions, events, surfaces,
// replacement and provenance edges, lineage, quarantine, checkpoint) and a
// Bleve index, and serves consistent read snapshots of them.
//
// Generation: a projection's generation is the stream sequence through which
// it has been applied. Every batch of records commits its effects and the
// stream sequence it reached in one bbolt transaction, so a snapshot always
// reflects a prefix of the stream exactly.
//
// Consistency with the index: the index applies a batch before bbolt commits
// it, so the index is never behind a snapshot; it may be slightly ahead. A
// caller that searches the index must resolve every hit through the Snapshot
// (Snapshot.Event) and drop hits the snapshot does not hold, and take surfaces
// from the snapshot, not from the index.
//
// Crash safety: records are applied in stream order; a batch's index
// changes are applied (atomically, with the batch's generation) before its
// store transaction commits, and the messages are acknowledged after. On
// start the durable consumer is recreated to deliver from the store's
// checkpoint + 1 (the store, not the consumer's ack floor, says where to
// resume); batches whose end the index has already reached are not fed to
// it again, and an index found behind the store is re-fed from the store.
// So a crash at any instant followed by a restart yields exactly the
// projection an uninterrupted run yields. Each projector needs its own
// durable consumer name (WithDurable) and data directory.
//
// Layout of the data directory: CURRENT names the serving projection
// directory p-*, which holds projection.db (bbolt) and index/ (Bleve). A
// rebuild builds a new p-* beside it and swaps CURRENT atomically; a
// missing, corrupt or incompatible store is replaced by an empty one that
// the loop refills from stream sequence 1.
//
// Bad records never stop the projector: they are quarantined (see
// QuarantineRecord and Commit.Quarantined), counted in the metrics and
// logged; an invalid header record quarantines its subject, an invalid
// event (a seq that is not the next included) marks its session invalid
// from that seq on (later records of the session are stored raw and marked
// invalid, never folded). A byte-identical copy of an applied event or of
// the header record is quarantined and skipped, the session staying valid.
package projection

import (
	"github.com/dshq/dshq"
	"github.com/dshq/dshq/index"
)

// Snapshot is a consistent, read-only view of one projection at one
// generation: one bbolt read transaction plus the live set taken when the view
// began. A Snapshot is valid only inside the View callback that received it
// and must not be used from other goroutines.
type Snapshot interface {
	// Generation is the stream sequence through which this snapshot was
	// applied.
	Generation() uint64
	// Epoch identifies the projection instance: it changes when a rebuilt
	// projection is swapped in (the live feed's subscribers resynchronise).
	Epoch() string
	// Lineage identifies what the projection was built from: the stream
	// and the projection's version (Projector.Lineage). Every replica of
	// one stream, and a rebuild of it, has the same: cursors bind to it.
	Lineage() string
	// Index is the full-text index of the projection this snapshot reads;
	// it stays open while the snapshot is in use, even across a rebuild
	// swap. Its content may be ahead of the snapshot (see the package doc).
	Index() *index.Index
	// LiveVersion counts lease changes seen by this projector; it moves
	// independently of Generation.
	LiveVersion() uint64

	// Session returns a session by id; false when the id has no valid header
	// record in the stream (never listed, reads are SESSION_NOT_FOUND).
	Session(id string) (dshq.SessionInfo, bool)
	// SessionsByCreated calls fn for each session in createdAt descending, id
	// ascending (UTF-8 byte) order, starting strictly after afterKey (nil =
	// from the start; afterKey is a dshq.SessionInfo.OrderKey), until fn returns
	// false.
	SessionsByCreated(afterKey []byte, fn func(dshq.SessionInfo) bool) error
	// SessionsInOrder calls fn for each session in order (by creation or
	// last activity, either direction), starting strictly after afterKey
	// (nil = from the start; a dshq.ListOrder.Key), until fn returns false.
	SessionsInOrder(order dshq.ListOrder, afterKey []byte, fn func(dshq.SessionInfo) bool) error
	// Children returns the ids of sessions whose parentSession is parentID,
	// in createdAt ascending, id ascending order.
	Children(parentID string) []string

	// Event returns the event at seq (its position in the session's log).
	Event(id string, seq int64) (dshq.StoredEvent, bool)
	// Events calls fn for each event of the session from fromSeq upward in
	// seq order until fn returns false.
	Events(id string, fromSeq int64, fn func(dshq.StoredEvent) bool) error
	// SurfaceSeqs returns the session's current surface nodes in model
	// order (docs/events-and-surfaces.md#the-fold), which is not seq order
	// after a replacement.
	SurfaceSeqs(id string) []int64
	// Closers returns the synthetic crash closers
	// (docs/events-and-surfaces.md#crash-closers-and-the-balanced-view) for a
	// session whose lease is not held and whose last turn is open: the
	// balanced view a cold reader sees, as stored events (fold.StoredClosers:
	// surfaces, text, sources). They are never written. Nil for a balanced,
	// live, invalid or unknown session.
	Closers(id string) ([]dshq.StoredEvent, error)

	// IsLive reports whether a harness holds the session's write lease.
	IsLive(id string) bool
	// LiveSet returns the ids of the sessions that are live (sorted by
	// UTF-8 byte order). Leased subjects without a header record yet are
	// not included.
	LiveSet() []string
	// Record returns the session's SessionRecord (header, live,
	// persisted=true).
	Record(info dshq.SessionInfo) dshq.SessionRecord

	// Quarantined calls fn for each quarantined record in stream order,
	// starting after stream sequence afterSeq, until fn returns false.
	Quarantined(afterSeq uint64, fn func(QuarantineRecord) bool) error
}

// QuarantineRecord is a record the projector refused.
type QuarantineRecord struct {
	// StreamSeq is the record's stream sequence.
	StreamSeq uint64 `json:"streamSeq"`
	// Subject is the subject it was published on.
	Subject string `json:"subject"`
	// SessionID is the session it belongs to, "" when unknown (an invalid
	// header record or an unknown subject).
	SessionID string `json:"sessionId,omitempty"`
	// Reason names the problem.
	Reason string `json:"reason"`
	// Raw is the record's bytes, capped at MaxQuarantineRawBytes.
	Raw []byte `json:"raw"`
	// Truncated is true when Raw was capped.
	Truncated bool `json:"truncated,omitempty"`
}

// MaxQuarantineRawBytes caps the raw bytes kept for a quarantined record.
const MaxQuarantineRawBytes = 64 << 10

// Commit is what one applied batch (or a lease change) changed, delivered
// to the OnCommit hook after the change is visible to View. It is the source
// of the live feed.
type Commit struct {
	// Generation is the stream sequence the projection reached (unchanged
	// for a lease-only commit).
	Generation uint64
	// Epoch is the projection epoch the commit belongs to.
	Epoch string
	// Sessions are the sessions whose header records were applied.
	Sessions []dshq.SessionInfo
	// Events are the appended events, with semantic text, in stream order.
	Events []CommittedEvent
	// Reclassified are surface changes of earlier events.
	Reclassified []Reclassification
	// Titles are title changes.
	Titles []TitleChange
	// Leases are live-set changes.
	Leases []LeaseChange
	// Quarantined are the records refused in this batch.
	Quarantined []QuarantineRecord
}

// CommittedEvent is one event applied in a batch.
type CommittedEvent struct {
	dshq.SearchDocument
	// Token is the session's subject token.
	Token string
	// Workspace is the session's workspace key
	// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys).
	Workspace string
	// Invalid marks an event stored raw after its session became invalid.
	Invalid bool
	// Raw is the record as written.
	Raw []byte
	// StreamSeq is its stream sequence.
	StreamSeq uint64
}

// Reclassification is one event whose surface changed.
type Reclassification struct {
	SessionID string
	Seq       int64
	Surface   dshq.Surface
	// ReplacedBy is the replacing seq when Surface is shadowed.
	ReplacedBy *int64
}

// TitleChange is a session's new latest title.
type TitleChange struct {
	SessionID string
	Title     dshq.Title
}

// LeaseChange is a change of a session's live availability.
type LeaseChange struct {
	// Key is the log key the lease is for (the subject token, or
	// <tenant>.<token>).
	Key string
	// SessionID is the session, "" when its header is not projected yet.
	SessionID string
	Live      bool
}
