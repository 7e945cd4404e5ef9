package dshq

import "encoding/json"

// Request and reply shapes of the trusted query API that query.go does not
// already name (docs/protocol.md#3-the-trusted-query-api). Every request may
// also carry minGeneration and timeoutMs; the Go client adds them from its call
// options, so they are not fields here.

// SessionListRequest is the sessions.list request. Order and Summary are
// additions (docs/protocol.md#3-the-trusted-query-api): the list's order
// ("" is createdAt desc) and whether items carry their summary.
type SessionListRequest struct {
	Limit   int       `json:"limit,omitempty"`
	Cursor  string    `json:"cursor,omitempty"`
	Order   ListOrder `json:"order,omitempty"`
	Summary bool      `json:"summary,omitempty"`
}

// SessionFilterRequest is the sessions.filter request (Order and Summary
// as in SessionListRequest).
type SessionFilterRequest struct {
	Filters []Filter  `json:"filters"`
	Limit   int       `json:"limit,omitempty"`
	Cursor  string    `json:"cursor,omitempty"`
	Order   ListOrder `json:"order,omitempty"`
	Summary bool      `json:"summary,omitempty"`
}

// SessionPage is a sessions.list or sessions.filter reply: records in the
// request's order (newest first by default: createdAt desc, id asc).
type SessionPage struct {
	Items      []SessionRecord `json:"items"`
	NextCursor string          `json:"nextCursor,omitempty"`
	Generation uint64          `json:"generation"`
}

// SessionReadRequest is the sessions.read request (and, with the same
// fields, sessions.surface and events.list).
type SessionReadRequest struct {
	SessionID string `json:"sessionId"`
	Limit     int    `json:"limit,omitempty"`
	Cursor    string `json:"cursor,omitempty"`
}

// SessionRead is the sessions.read reply: the header, the inherited prefix
// length and one page of raw events in seq order.
type SessionRead struct {
	Session             Header  `json:"session"`
	InheritedEventCount int64   `json:"inheritedEventCount"`
	Events              []Event `json:"events"`
	NextCursor          string  `json:"nextCursor,omitempty"`
	Generation          uint64  `json:"generation"`
}

// SessionTraceRequest is the sessions.trace request.
type SessionTraceRequest struct {
	SessionID string `json:"sessionId"`
}

// SessionTitlesRequest is the sessions.titles request.
type SessionTitlesRequest struct {
	SessionIDs []string `json:"sessionIds"`
}

// SessionTitles is the sessions.titles reply: one item per unique id, in
// first-occurrence order.
type SessionTitles struct {
	Items      []TitleResult `json:"items"`
	Generation uint64        `json:"generation"`
}

// EventFilterRequest is the events.filter request.
type EventFilterRequest struct {
	SessionID string   `json:"sessionId"`
	Filters   []Filter `json:"filters"`
	Limit     int      `json:"limit,omitempty"`
	Cursor    string   `json:"cursor,omitempty"`
}

// EventRecordPage is an events.list reply.
type EventRecordPage struct {
	Items      []EventRecord `json:"items"`
	NextCursor string        `json:"nextCursor,omitempty"`
	Generation uint64        `json:"generation"`
}

// SearchDocumentPage is an events.filter reply.
type SearchDocumentPage struct {
	Items      []SearchDocument `json:"items"`
	NextCursor string           `json:"nextCursor,omitempty"`
	Generation uint64           `json:"generation"`
}

// ErrorReply is the body of a failed query API request:
// {"error":{"code","message"}}.
type ErrorReply struct {
	Error ErrorBody `json:"error"`
}

// UnmarshalJSON reads an event from a reply: Raw keeps the record's bytes
// exactly (the inverse of MarshalJSON), and the envelope fields are decoded
// from it for convenience. It does not validate the record (record.ParseEvent
// does).
func (e *Event) UnmarshalJSON(b []byte) error {
	var env struct {
		Type            string          `json:"type"`
		Seq             int64           `json:"seq"`
		Time            int64           `json:"time"`
		Data            json.RawMessage `json:"data"`
		SurfaceOp       json.RawMessage `json:"surfaceOp"`
		SourceEventSeqs json.RawMessage `json:"sourceEventSeqs"`
		Ignorable       bool            `json:"ignorable"`
	}
	if string(b) == "null" {
		*e = Event{}
		return nil
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return err
	}
	*e = Event{Type: env.Type, Seq: env.Seq, Time: env.Time, Data: env.Data, SurfaceOp: env.SurfaceOp,
		SourceEventSeqs: env.SourceEventSeqs, Ignorable: env.Ignorable, Raw: append(json.RawMessage(nil), b...)}
	return nil
}

// CorpusStats are the statistics BM25 ranks a phrase with: the number of
// docs, the total length of their text (in tokens) and, for each distinct
// term of the phrase, the number of docs that hold it. A projection
// partitioned into shards ranks with the sums of every shard's (the
// corpus's), so that a shard's scores are those of one index holding the
// whole corpus (docs/protocol.md, "Partitioned projections"): the
// corpus.stats reply of a shard, and the Dsh-Corpus-Stats header of a
// search sent to one.
type CorpusStats struct {
	Docs       uint64            `json:"docs"`
	TextLength uint64            `json:"textLength"`
	Terms      map[string]uint64 `json:"terms"`
}

// Add adds o's counts to s.
func (s *CorpusStats) Add(o CorpusStats) {
	s.Docs += o.Docs
	s.TextLength += o.TextLength
	if s.Terms == nil {
		s.Terms = map[string]uint64{}
	}
	for t, n := range o.Terms {
		s.Terms[t] += n
	}
}
