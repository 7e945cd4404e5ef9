package dshq

import "encoding/json"

// Query API limits (docs/search.md#limits, docs/query.md#event-read-windows).
const (
	DefaultSearchLimit = 20
	MaxSearchLimit     = 100
	DefaultListLimit   = 1000
	MaxListLimit       = 10000
	ReadWindowMax      = 50
	SnippetChars       = 240
	DefaultTimeoutMs   = 5000
	MaxTimeoutMs       = 30000
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes = 1 << 20
)

// SessionRecord is one logical session: its header and availability.
// Live is true while a harness holds the session's write lease; Persisted is
// true once its header record is in the stream.
type SessionRecord struct {
	Header Header `json:"header"`
	// Tenant is the tenant whose log subject holds the session
	// (dsh.log.<tenant>.<token>), "" (and absent on the wire) for a session
	// of no tenant. An addition to the contract
	// (docs/protocol.md#3-the-trusted-query-api).
	Tenant    string `json:"tenant,omitempty"`
	Live      bool   `json:"live"`
	Persisted bool   `json:"persisted"`
	// Summary is the session's summary, on the items of a sessions.list
	// or sessions.filter that asks for it ("summary": true; an addition,
	// docs/protocol.md#3-the-trusted-query-api).
	Summary *SessionSummary `json:"summary,omitempty"`
}

// Filter kinds (docs/query.md), and FilterTenant and FilterHarness
// (additions to the contract, docs/protocol.md#3-the-trusted-query-api): a
// session's tenant (a null value matches the sessions of no tenant), and the
// harness whose own file a session was converted from, its header's harness
// ("claude-code", "codex"; a null value matches native sessions).
// FilterMachine and FilterCwdPrefix (additions, sessions.filter only) match
// the header's machine (a null value: none recorded) and a cwd that is a
// value or under it.
const (
	FilterID           = "id"
	FilterTenant       = "tenant"
	FilterHarness      = "harness"
	FilterMachine      = "machine"
	FilterCwdPrefix    = "cwd-prefix"
	FilterCwd          = "cwd"
	FilterCreatedAt    = "created-at"
	FilterParent       = "parent"
	FilterAvailability = "availability"
	FilterSeq          = "seq"
	FilterTime         = "time"
	FilterType         = "type"
	FilterSurface      = "surface"
	FilterText         = "text"
)

// Filter is one session or event predicate. List kinds use Values (a nil
// element is JSON null, legal for cwd and parent); range kinds use From/To
// (inclusive, either may be absent); text uses Text. A filter array is ANDed;
// values within one clause are ORed.
type Filter struct {
	Kind   string
	Values []*string
	From   *float64
	To     *float64
	Text   string
}

// IsRange reports whether the filter kind is a range.
func (f Filter) IsRange() bool {
	return f.Kind == FilterCreatedAt || f.Kind == FilterSeq || f.Kind == FilterTime
}

// MarshalJSON writes the filter in its wire shape.
func (f Filter) MarshalJSON() ([]byte, error) {
	switch {
	case f.Kind == FilterText:
		return json.Marshal(struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		}{f.Kind, f.Text})
	case f.IsRange():
		return json.Marshal(struct {
			Kind string   `json:"kind"`
			From *float64 `json:"from,omitempty"`
			To   *float64 `json:"to,omitempty"`
		}{f.Kind, f.From, f.To})
	default:
		values := f.Values
		if values == nil {
			values = []*string{}
		}
		return json.Marshal(struct {
			Kind   string    `json:"kind"`
			Values []*string `json:"values"`
		}{f.Kind, values})
	}
}

// SessionSearchRequest is the sessions.search request.
type SessionSearchRequest struct {
	Query          string   `json:"query"`
	SessionFilters []Filter `json:"sessionFilters,omitempty"`
	EventFilters   []Filter `json:"eventFilters,omitempty"`
	Limit          int      `json:"limit,omitempty"`
	Cursor         string   `json:"cursor,omitempty"`
}

// EventSearchRequest is the events.search request.
type EventSearchRequest struct {
	SessionID string   `json:"sessionId"`
	Query     string   `json:"query"`
	Filters   []Filter `json:"filters,omitempty"`
	Limit     int      `json:"limit,omitempty"`
	Cursor    string   `json:"cursor,omitempty"`
}

// EventSearchHit is one event hit with a bounded snippet.
type EventSearchHit struct {
	EventRecord
	Snippet string `json:"snippet"`
}

// SessionSearchHit is one session grouped by its strongest matching event.
type SessionSearchHit struct {
	SessionRecord
	BestMatch EventSearchHit `json:"bestMatch"`
}

// SessionSearchPage is a sessions.search reply.
type SessionSearchPage struct {
	Items      []SessionSearchHit `json:"items"`
	NextCursor string             `json:"nextCursor,omitempty"`
	Generation uint64             `json:"generation"`
}

// EventSearchPage is an events.search reply.
type EventSearchPage struct {
	Session    Header           `json:"session"`
	Items      []EventSearchHit `json:"items"`
	NextCursor string           `json:"nextCursor,omitempty"`
	Generation uint64           `json:"generation"`
}

// LineageNode is one descendant with its own descendants.
type LineageNode struct {
	Session     SessionRecord `json:"session"`
	Descendants []LineageNode `json:"descendants"`
}

// LineageTrace is the sessions.trace reply (docs/lineage.md#tracing-a-lineage).
// Exactly one of Root (Complete) and UnresolvedParentID (!Complete) is set.
type LineageTrace struct {
	Target             SessionRecord   `json:"target"`
	Ancestors          []SessionRecord `json:"ancestors"`
	Descendants        []LineageNode   `json:"descendants"`
	Complete           bool            `json:"complete"`
	Root               *SessionRecord  `json:"root,omitempty"`
	UnresolvedParentID *string         `json:"unresolvedParentId,omitempty"`
	Generation         uint64          `json:"generation"`
}

// EventReadRequest is the events.read request.
type EventReadRequest struct {
	SessionID string `json:"sessionId"`
	Seq       int64  `json:"seq"`
	Before    int64  `json:"before,omitempty"`
	After     int64  `json:"after,omitempty"`
}

// EventWindow is the events.read reply (docs/query.md#event-read-windows).
// Target is also Events[Seq-StartSeq]; a reply that could not carry it twice
// within the payload leaves target out and says TargetOmitted
// (docs/protocol.md#3-the-trusted-query-api), and query.Client.ReadEvent
// fills Target from Events again.
type EventWindow struct {
	Session             Header  `json:"session"`
	InheritedEventCount int64   `json:"inheritedEventCount"`
	Target              Event   `json:"target,omitzero"`
	Events              []Event `json:"events"`
	StartSeq            int64   `json:"startSeq"`
	EndSeq              int64   `json:"endSeq"`
	// TargetOmitted (an addition) is true when target is left out.
	TargetOmitted bool   `json:"targetOmitted,omitempty"`
	Generation    uint64 `json:"generation"`
}

// EventTraceRequest is the events.trace request.
type EventTraceRequest struct {
	SessionID string `json:"sessionId"`
	Seq       int64  `json:"seq"`
}

// EventTrace is the events.trace reply (docs/events-and-surfaces.md#event-traces).
type EventTrace struct {
	Session           Header      `json:"session"`
	Target            EventRecord `json:"target"`
	ReplacedBy        *int64      `json:"replacedBy,omitempty"`
	ReplacementChain  []int64     `json:"replacementChain"`
	ReplacedEventSeqs []int64     `json:"replacedEventSeqs"`
	SourceEventSeqs   []int64     `json:"sourceEventSeqs"`
	DerivedEventSeqs  []int64     `json:"derivedEventSeqs"`
	Generation        uint64      `json:"generation"`
}

// TitleValue is a fulfilled title read: the header and, when the session has
// one, its latest title.
type TitleValue struct {
	Session Header `json:"session"`
	Title   *Title `json:"title,omitempty"`
}

// ErrorBody is the JSON of a failure: {code, message}.
type ErrorBody struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// TitleResult is one item of a sessions.titles reply.
type TitleResult struct {
	SessionID string      `json:"sessionId"`
	Status    string      `json:"status"` // "fulfilled" or "rejected"
	Value     *TitleValue `json:"value,omitempty"`
	Reason    *ErrorBody  `json:"reason,omitempty"`
}

// SurfaceSnapshot is the sessions.surface reply
// (docs/query.md#the-current-surface).
type SurfaceSnapshot struct {
	Session             Header  `json:"session"`
	InheritedEventCount int64   `json:"inheritedEventCount"`
	CapturedThroughSeq  *int64  `json:"capturedThroughSeq"`
	Events              []Event `json:"events"`
	NextCursor          string  `json:"nextCursor,omitempty"`
	Generation          uint64  `json:"generation"`
}
