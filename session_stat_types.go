package dshq

// SessionStatRequest is the sessions.stat request: one session's counters,
// read from the projection without touching its events.
type SessionStatRequest struct {
	SessionID string `json:"sessionId"`
}

// SessionStat is the sessions.stat reply: what the projection keeps about a
// session, at the reply's generation. It costs the same whatever the length
// of the session's log.
type SessionStat struct {
	// Session is the session's record.
	Session SessionRecord `json:"session"`
	// InheritedEventCount is the length of the fork-inherited prefix.
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// EventCount is the number of stored events (synthetic closers not
	// included): seqs 0..eventCount-1.
	EventCount int64 `json:"eventCount"`
	// Title is the latest session/title, absent when there is none.
	Title *Title `json:"title,omitempty"`
	// LastStepStartSeq is the seq of the last step/start event, absent when
	// the session has none.
	LastStepStartSeq *int64 `json:"lastStepStartSeq,omitempty"`
	// InvalidFromSeq is the seq from which the session is invalid, absent
	// while it is valid; InvalidReason says why.
	InvalidFromSeq *int64 `json:"invalidFromSeq,omitempty"`
	InvalidReason  string `json:"invalidReason,omitempty"`
	// Summary is the session's summary (an addition).
	Summary    *SessionSummary `json:"summary,omitempty"`
	Generation uint64          `json:"generation"`
}
