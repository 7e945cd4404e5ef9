package dshq

import "encoding/json"

// SessionInfo is what a projection knows of one session: the record the
// projector stores and the query engine reads.
type SessionInfo struct {
	// Header is the header record (header in version 2 shape, format
	// version, inherited count; Raw is the record as written).
	Header HeaderRecord
	// Token is the session's subject token.
	Token string
	// Tenant is the tenant whose log subject (dsh.log.<tenant>.<token>) holds
	// the session; "" for a session of the untenanted namespace
	// (dsh.log.<token>). The server's permissions guarantee it: a tenant
	// publishes only on its own subjects
	// (docs/protocol.md#2-the-session-log-stream). The session's log key, which
	// also keys its write lease, is record.LogKey(Tenant, Token).
	Tenant string
	// HeaderSeq is the stream sequence of the header record: the generation
	// at which the session appeared.
	HeaderSeq uint64
	// EventCount is the number of event records stored for the session,
	// invalid ones included: events occupy seqs 0..EventCount-1 (synthetic
	// closers are not counted).
	EventCount int64
	// Title is the latest session/title, nil when there is none.
	Title *Title
	// LastStepStart is the seq of the last step/start event, -1 if none.
	LastStepStart int64
	// InvalidFrom is the seq of the first event that failed decoding or the
	// fold's rules, -1 while the session is valid. Events from it on are
	// stored raw and marked invalid, never folded.
	InvalidFrom int64
	// InvalidReason says why InvalidFrom is invalid ("" while valid).
	InvalidReason string
	// ReclassifiedAt is the generation at which any event of this session
	// last changed surface (a replacement, or the session becoming invalid);
	// 0 if never. A cursor that counted this session is stale when it is
	// newer than the cursor's generation.
	ReclassifiedAt uint64
	// UpdatedAt is the generation at which anything about this session last
	// changed.
	UpdatedAt uint64
	// OrderKey is the session's key in the createdAt-desc/id-asc order, for
	// resuming a listing in that order.
	OrderKey []byte
	// Summary is what the projection keeps about the session's log (nil
	// when the source does not say).
	Summary *SessionSummary
}

// Valid reports whether the session's surface is valid (no invalid record).
func (s SessionInfo) Valid() bool { return s.InvalidFrom < 0 }

// StoredEvent is one projected event with its edges.
type StoredEvent struct {
	// Record is the lightweight record; Surface is the current
	// classification ("" for an invalid event).
	Record EventRecord
	// Raw is the record exactly as written.
	Raw json.RawMessage
	// Text is the semantic text ("" = no search document).
	Text string
	// Invalid is true for an event at or after its session's InvalidFrom.
	Invalid bool
	// ReplacedBy is the seq of the event that shadowed this one, nil if none.
	ReplacedBy *int64
	// ReplacedEventSeqs is what this event shadowed, in surface order.
	ReplacedEventSeqs []int64
	// Sources is the envelope sourceEventSeqs in recorded order.
	Sources []int64
	// Derived is every later event citing this one, ascending.
	Derived []int64
	// StreamSeq is the stream sequence of the record (0 for a synthetic
	// closer, which is never stored).
	StreamSeq uint64
}

// Event returns the stored event as an Event with only Raw, Type, Seq and
// Time set (enough to marshal it as written).
func (e StoredEvent) Event() Event {
	return Event{Type: e.Record.Type, Seq: e.Record.Seq, Time: e.Record.Time, Raw: e.Raw}
}
