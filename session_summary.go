package dshq

import (
	"encoding/binary"
	"math"
)

// SessionSummary is what the projection keeps about a session's log as it
// applies it, so that a list or a header shows it without reading the
// events (an addition to the contract, docs/protocol.md#3-the-trusted-query-api):
// the span of its events' times, its turns, its tool calls and how many
// of them failed. Counts are of the stored log (shadowed events included,
// synthetic crash closers not).
type SessionSummary struct {
	// EventCount is the number of stored events the summary counted.
	EventCount int64 `json:"eventCount"`
	// FirstEventAt and LastEventAt are the least and the greatest event
	// time (epoch ms); absent while the session has no event.
	FirstEventAt *int64 `json:"firstEventAt,omitempty"`
	LastEventAt  *int64 `json:"lastEventAt,omitempty"`
	// LastActivityAt is LastEventAt, or createdAt for a session with no
	// event: the key of the activity orders.
	LastActivityAt int64 `json:"lastActivityAt"`
	// Turns counts turn/start events.
	Turns int64 `json:"turns"`
	// ToolCalls counts the calls the model made: the tool-call blocks of
	// assistant messages and the tool/call events, one per call id.
	ToolCalls int64 `json:"toolCalls"`
	// FailedToolCalls counts the tool results that failed (an error, or
	// a tool-result block marked isError).
	FailedToolCalls int64 `json:"failedToolCalls"`
}

// ListOrder is the order of sessions.list and sessions.filter (an
// addition: the request's "order"; "" is OrderCreatedDesc, the original's).
type ListOrder string

// The list orders. A descending order is newest first, ties by id
// ascending; an ascending order is its exact reverse.
const (
	OrderCreatedDesc  ListOrder = "created-desc"
	OrderCreatedAsc   ListOrder = "created-asc"
	OrderActivityDesc ListOrder = "activity-desc"
	OrderActivityAsc  ListOrder = "activity-asc"
)

// ListOrders lists the orders a request may name.
var ListOrders = []ListOrder{OrderCreatedDesc, OrderCreatedAsc, OrderActivityDesc, OrderActivityAsc}

// ByActivity reports whether o orders by last activity.
func (o ListOrder) ByActivity() bool { return o == OrderActivityDesc || o == OrderActivityAsc }

// Ascending reports whether o is oldest first.
func (o ListOrder) Ascending() bool { return o == OrderCreatedAsc || o == OrderActivityAsc }

// Key is a session's key in o: its time (createdAt, or the summary's
// LastActivityAt) descending, then its id ascending, as 8 big-endian bytes
// and the id. Both directions share the keys: an ascending order walks them
// backwards. A list cursor carries the key of the last session it
// returned.
func (o ListOrder) Key(info SessionInfo) []byte {
	t := info.Header.Header.CreatedAt
	if o.ByActivity() && info.Summary != nil {
		t = info.Summary.LastActivityAt
	}
	return TimeKey(t, info.Header.Header.ID)
}

// TimeKey is the key of a time (epoch ms) descending, then an id
// ascending: the projection's order buckets' keys.
func TimeKey(t int64, id string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(id)), math.MaxUint64-(uint64(t)^(1<<63)))
	return append(k, id...)
}
