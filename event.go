package dshq

import "encoding/json"

// Surface is an event's placement in the folded session surface.
type Surface string

// The three surfaces (docs/events-and-surfaces.md#classification).
const (
	SurfaceCurrent  Surface = "current"
	SurfaceShadowed Surface = "shadowed"
	SurfaceLogOnly  Surface = "log-only"
)

// Valid reports whether s is one of the three surfaces.
func (s Surface) Valid() bool {
	return s == SurfaceCurrent || s == SurfaceShadowed || s == SurfaceLogOnly
}

// The three surface event types: only they may carry surfaceOp and
// sourceEventSeqs.
const (
	TypeUserMessage      = "user/message"
	TypeAssistantMessage = "assistant/message"
	TypeToolResult       = "tool/result"
)

// IsSurfaceType reports whether an event type takes part in the surface fold.
func IsSurfaceType(t string) bool {
	return t == TypeUserMessage || t == TypeAssistantMessage || t == TypeToolResult
}

// Event is one log entry, the upstream envelope
// (docs/events-and-surfaces.md#the-event-envelope). The decoded
// fields are for processing; Raw holds the record exactly as it was written,
// and is what is stored, exported and returned, so that every JSON value
// survives a round trip.
type Event struct {
	Type string
	Seq  int64
	Time int64
	// Data is the raw JSON of the data member.
	Data json.RawMessage
	// SurfaceOp is the raw JSON of surfaceOp, nil when absent.
	SurfaceOp json.RawMessage
	// SourceEventSeqs is the raw JSON of sourceEventSeqs, nil when absent.
	SourceEventSeqs json.RawMessage
	// Ignorable is true when the record carries "ignorable": true.
	Ignorable bool
	// Raw is the complete record as written (a compact JSON object).
	Raw json.RawMessage
}

// MarshalJSON returns the record as written.
func (e Event) MarshalJSON() ([]byte, error) {
	if len(e.Raw) == 0 {
		return []byte("null"), nil
	}
	return e.Raw, nil
}

// EventRecord is the lightweight projection of one event (SessionEventRecord).
type EventRecord struct {
	SessionID string  `json:"sessionId"`
	Seq       int64   `json:"seq"`
	Type      string  `json:"type"`
	Time      int64   `json:"time"`
	Surface   Surface `json:"surface"`
}

// SearchDocument is an event record with its semantic text
// (SessionEventSearchDocument). Events without semantic text have none.
type SearchDocument struct {
	EventRecord
	Text string `json:"text"`
}

// Title is the latest session/title of a session with the seq and time of the
// event that set it (docs/events-and-surfaces.md#titles).
type Title struct {
	Title       string          `json:"title"`
	MessageSeqs []int64         `json:"messageSeqs"`
	Source      json.RawMessage `json:"source"`
	EventSeq    int64           `json:"eventSeq"`
	UpdatedAt   int64           `json:"updatedAt"`
}
