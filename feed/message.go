package feed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// Version is the feed message format version, the "v" member of every
// message and the value of HeaderVersion. A change that is not a pure
// addition of optional members bumps it.
const Version = 1

// Kind names what a feed message reports; it is the last token of the
// message's subject.
type Kind string

// The six kinds (docs/protocol.md#52-messages).
const (
	// KindSession: a session's header record was applied.
	KindSession Kind = "session"
	// KindEvent: an event was appended (record, semantic text, raw event).
	KindEvent Kind = "event"
	// KindSurface: an earlier event changed surface (a replacement shadowed
	// it, or its session became invalid).
	KindSurface Kind = "surface"
	// KindTitle: a session's latest title changed.
	KindTitle Kind = "title"
	// KindLease: a session became live or stopped being live.
	KindLease Kind = "lease"
	// KindQuarantine: the projector refused a record.
	KindQuarantine Kind = "quarantine"
)

// Kinds lists every kind, in the order FromCommit emits them within one
// session.
var Kinds = []Kind{KindSession, KindEvent, KindSurface, KindTitle, KindLease, KindQuarantine}

// Valid reports whether k is one of the six kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindSession, KindEvent, KindSurface, KindTitle, KindLease, KindQuarantine:
		return true
	}
	return false
}

// Message headers set on every feed message.
const (
	// HeaderGeneration is the message's generation, in decimal.
	HeaderGeneration = "Dsh-Generation"
	// HeaderKind is the message's kind.
	HeaderKind = "Dsh-Kind"
	// HeaderCommit is "<index>/<count>": the message's place in the commit
	// it was published with. The last message of a commit has
	// index = count-1.
	HeaderCommit = "Dsh-Commit"
	// HeaderVersion is the format version (Version).
	HeaderVersion = "Dsh-Feed-Version"
)

// SurfaceInvalid is the "to" of a surface change that marks an event
// invalid: its session broke the fold's rules at or before it.
const SurfaceInvalid = "invalid"

// Message is one feed message: what one commit of the projector changed
// for one session (or one refused record). Exactly one of the body members
// is set, the one named by Kind. See the package documentation for the
// JSON shape of each kind.
type Message struct {
	// V is the format version (Version).
	V int `json:"v"`
	// Kind names the body.
	Kind Kind `json:"kind"`
	// Generation is the generation of the commit that produced the message:
	// the session stream sequence through which the projection was applied.
	Generation uint64 `json:"generation"`
	// Workspace is the session's workspace key
	// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys), or
	// QuarantineWorkspace for a refused record of no known session.
	Workspace string `json:"workspace"`
	// Token is the session's subject token, or UnknownToken for a refused
	// record whose subject carries no valid token.
	Token string `json:"token"`
	// SessionID is the session id; "" only for a refused record of no known
	// session.
	SessionID string `json:"sessionId,omitempty"`
	// Epoch identifies the projection that committed the message; it
	// changes when a rebuilt projection is swapped in, and a subscriber
	// that sees it change resynchronises from the query API (what the
	// rebuilt projection holds may differ from what the feed said before).
	Epoch string `json:"epoch,omitempty"`

	// Session is the body of a session message.
	Session *SessionBody `json:"session,omitempty"`
	// Event is the body of an event message.
	Event *EventBody `json:"event,omitempty"`
	// Surface is the body of a surface message.
	Surface *SurfaceBody `json:"surface,omitempty"`
	// Title is the body of a title message: the session's new latest title.
	Title *dshq.Title `json:"title,omitempty"`
	// Lease is the body of a lease message.
	Lease *LeaseBody `json:"lease,omitempty"`
	// Quarantine is the body of a quarantine message.
	Quarantine *QuarantineBody `json:"quarantine,omitempty"`

	// Position is the feed stream sequence of a delivered message (0 before
	// publication). It is not part of the JSON; AfterPosition resumes
	// exactly after it.
	Position uint64 `json:"-"`
	// Pending is, for a delivered message, how many messages matching the
	// subscription's subject the stream held after it when it was delivered
	// (0 = the subscriber is caught up). It is not part of the JSON.
	Pending uint64 `json:"-"`
}

// SessionBody is the body of a session message: the session record (header
// in version 2 shape, live, persisted) and its inherited prefix length.
type SessionBody struct {
	dshq.SessionRecord
	// InheritedEventCount is the length of the prefix inherited from a
	// fork parent.
	InheritedEventCount int64 `json:"inheritedEventCount"`
}

// EventBody is the body of an event message: the event record
// {sessionId, seq, type, time, surface}, its semantic text ("" = none) and
// the event exactly as written.
type EventBody struct {
	dshq.EventRecord
	// Text is the semantic text; "" when the event has none.
	Text string `json:"text,omitempty"`
	// TextTruncated is true when Text was cut to keep the message within
	// the size limit (read the event with events.read for the rest).
	TextTruncated bool `json:"textTruncated,omitempty"`
	// Invalid is true for an event stored raw after its session became
	// invalid; its surface is "".
	Invalid bool `json:"invalid,omitempty"`
	// Raw is the event record as written; absent when RawOmitted.
	Raw json.RawMessage `json:"raw,omitempty"`
	// RawBytes is the size of the record as written.
	RawBytes int `json:"rawBytes"`
	// RawOmitted is true when Raw was left out to keep the message within
	// the size limit, or because the record is not JSON.
	RawOmitted bool `json:"rawOmitted,omitempty"`
}

// SurfaceBody is the body of a surface message: event Seq moved from From
// to To. From is omitted when the projector did not report it; To is a
// dshq.Surface or SurfaceInvalid. ReplacedBy is the replacing event's seq
// when To is shadowed.
type SurfaceBody struct {
	// Seq is the event whose surface changed.
	Seq int64 `json:"seq"`
	// From is its surface before, "" when not reported.
	From string `json:"from,omitempty"`
	// To is its surface now.
	To string `json:"to"`
	// ReplacedBy is the seq of the event that shadowed it.
	ReplacedBy *int64 `json:"replacedBy,omitempty"`
}

// LeaseBody is the body of a lease message.
type LeaseBody struct {
	// Live is true while a harness holds the session's write lease.
	Live bool `json:"live"`
}

// QuarantineBody is the body of a quarantine message. It never carries a
// refused record whole: Excerpt is at most MaxExcerptBytes of it, as valid
// UTF-8 (invalid bytes replaced by U+FFFD).
type QuarantineBody struct {
	// StreamSeq is the refused record's session stream sequence.
	StreamSeq uint64 `json:"streamSeq"`
	// Subject is the subject the record was published on (capped at
	// MaxSubjectBytes).
	Subject string `json:"subject"`
	// Reason names the problem (capped at MaxReasonBytes).
	Reason string `json:"reason"`
	// Excerpt is the start of the record.
	Excerpt string `json:"excerpt"`
	// RawBytes is how many bytes of the record the projector kept (the
	// record may have been longer when RawTruncated).
	RawBytes int `json:"rawBytes"`
	// RawTruncated is true when the projector capped the record.
	RawTruncated bool `json:"rawTruncated,omitempty"`
}

// Caps on what a quarantine message carries of a possibly hostile record.
const (
	MaxExcerptBytes = 256
	MaxReasonBytes  = 1024
	MaxSubjectBytes = 1024
)

// ErrMalformed is wrapped by every refusal of a message that does not have
// the feed's shape (Decode, Encode, Publish).
var ErrMalformed = errors.New("malformed feed message")

// malformed returns a *dshq.Error of code SESSION_QUERY_INVALID_REQUEST
// wrapping ErrMalformed.
func malformed(format string, args ...any) error {
	e := dshq.Errorf(dshq.CodeInvalidRequest, "feed message: "+format, args...)
	e.Err = ErrMalformed
	return e
}

// Validate checks that m has the feed's shape: the current version, a
// valid kind with exactly its body, a valid workspace key and token for it,
// and a session id whose token is Token. A refusal is a *dshq.Error of code
// SESSION_QUERY_INVALID_REQUEST wrapping ErrMalformed.
func (m *Message) Validate() error {
	if m.V != Version {
		return malformed("version %d, want %d", m.V, Version)
	}
	if !m.Kind.Valid() {
		return malformed("unknown kind %q", m.Kind)
	}
	if err := m.validateBody(); err != nil {
		return err
	}
	if err := validateAddress(m.Kind, m.Workspace, m.Token); err != nil {
		return err
	}
	return m.validateSession()
}

func (m *Message) validateBody() error {
	bodies := []struct {
		kind Kind
		set  bool
	}{
		{KindSession, m.Session != nil}, {KindEvent, m.Event != nil},
		{KindSurface, m.Surface != nil}, {KindTitle, m.Title != nil},
		{KindLease, m.Lease != nil}, {KindQuarantine, m.Quarantine != nil},
	}
	for _, b := range bodies {
		if b.set != (b.kind == m.Kind) {
			if b.set {
				return malformed("%s message carries a %s body", m.Kind, b.kind)
			}
			return malformed("%s message has no %s body", m.Kind, m.Kind)
		}
	}
	switch m.Kind {
	case KindSession:
		if m.Session.Header.ID != m.SessionID {
			return malformed("session body id %q is not the message's session %q", m.Session.Header.ID, m.SessionID)
		}
	case KindEvent:
		if m.Event.SessionID != m.SessionID {
			return malformed("event body session %q is not the message's session %q", m.Event.SessionID, m.SessionID)
		}
		if m.Event.Seq < 0 {
			return malformed("event seq %d is negative", m.Event.Seq)
		}
	case KindSurface:
		if m.Surface.Seq < 0 {
			return malformed("surface seq %d is negative", m.Surface.Seq)
		}
		if !validSurfaceName(m.Surface.To) || (m.Surface.From != "" && !validSurfaceName(m.Surface.From)) {
			return malformed("surface change %q -> %q names an unknown surface", m.Surface.From, m.Surface.To)
		}
	}
	return nil
}

func validSurfaceName(s string) bool {
	return s == SurfaceInvalid || dshq.Surface(s).Valid()
}

// validateSession checks the session id against the token: every message
// but a quarantine of an unknown session names its session, whose token is
// the subject's.
func (m *Message) validateSession() error {
	if m.SessionID == "" {
		if m.Kind != KindQuarantine || m.Workspace != QuarantineWorkspace {
			return malformed("%s message has no session id", m.Kind)
		}
		return nil
	}
	tok, err := record.SubjectToken(m.SessionID)
	if err != nil {
		return malformed("session id: %v", err)
	}
	if tok != m.Token {
		return malformed("token %q is not the token %q of session %q", m.Token, tok, m.SessionID)
	}
	return nil
}

// Encode validates m and returns its JSON (compact, HTML characters not
// escaped). A refusal is as for Validate.
func Encode(m *Message) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return marshal(m)
}

func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, malformed("encode: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Decode parses one feed message body and validates it. Unknown members
// are ignored (a later version may add optional ones). A refusal is a
// *dshq.Error of code SESSION_QUERY_INVALID_REQUEST wrapping ErrMalformed
// whose message names the problem.
func Decode(data []byte) (*Message, error) {
	if !json.Valid(data) {
		return nil, malformed("not valid JSON")
	}
	var m Message
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, malformed("%v", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// commitHeader formats HeaderCommit.
func commitHeader(index, count int) string {
	return strconv.Itoa(index) + "/" + strconv.Itoa(count)
}

// parseCommitHeader parses HeaderCommit.
func parseCommitHeader(s string) (index, count int, err error) {
	i := bytes.IndexByte([]byte(s), '/')
	if i < 0 {
		return 0, 0, fmt.Errorf("%s %q is not index/count", HeaderCommit, s)
	}
	index, err1 := strconv.Atoi(s[:i])
	count, err2 := strconv.Atoi(s[i+1:])
	if err1 != nil || err2 != nil || index < 0 || count <= index {
		return 0, 0, fmt.Errorf("%s %q is not index/count", HeaderCommit, s)
	}
	return index, count, nil
}
