package projection

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/dshq/dshq"
)

// The per-session summary (dshq.SessionSummary): counters of a session's
// log kept in its stored value as each event is applied, and the activity
// order bucket, so that a list page sorted by last activity, and its
// columns, cost the same whatever the corpus's size. A rebuild or replay
// applies the same events and reproduces both.
var (
	// TimeKey(last activity, id) → nil
	bucketByActivity = []byte("byactivity")
)

// maxRecentCalls is how many call ids a summary remembers: a call named
// by an assistant message's tool-call block and again by its tool/call
// event (Claude Code writes both, one after the other) counts once.
const maxRecentCalls = 32

// summaryState is the stored form of a session's summary, in its
// sessionValue.
type summaryState struct {
	// Timed is set once an event with a time was applied; First and Last
	// are then the least and greatest event time.
	Timed       bool  `json:"tm,omitempty"`
	First       int64 `json:"f,omitempty"`
	Last        int64 `json:"l,omitempty"`
	Turns       int64 `json:"t,omitempty"`
	Calls       int64 `json:"c,omitempty"`
	FailedCalls int64 `json:"x,omitempty"`
	// Recent are the last call ids counted, oldest first.
	Recent []string `json:"r,omitempty"`
}

// activity is a session's last activity: its latest event's time, never
// before its creation.
func (v *sessionValue) activity() int64 {
	if v.Sum.Timed {
		return max(v.Sum.Last, v.Header.CreatedAt)
	}
	return v.Header.CreatedAt
}

// summary is the session's dshq.SessionSummary.
func (v *sessionValue) summary() *dshq.SessionSummary {
	s := &dshq.SessionSummary{EventCount: v.EventCount, LastActivityAt: v.activity(),
		Turns: v.Sum.Turns, ToolCalls: v.Sum.Calls, FailedToolCalls: v.Sum.FailedCalls}
	if v.Sum.Timed {
		first, last := v.Sum.First, v.Sum.Last
		s.FirstEventAt, s.LastEventAt = &first, &last
	}
	return s
}

// summaryBatch is a batch's part of the activity order: the activity each
// moved session had before the batch.
type summaryBatch struct {
	before map[string]int64
}

// summaryHeader places a new session in the activity order.
func (b *batch) summaryHeader(v *sessionValue) error {
	return b.tx.Bucket(bucketByActivity).Put(dshq.TimeKey(v.activity(), v.Header.ID), nil)
}

// summaryEvent counts an applied event of type typ, time t, record data.
func (b *batch) summaryEvent(s *openSession, typ string, t int64, data []byte) {
	b.summaryTime(s, t)
	sum := &s.v.Sum
	switch typ {
	case "turn/start":
		sum.Turns++
	case "tool/call", dshq.TypeAssistantMessage, dshq.TypeToolResult:
	default:
		return
	}
	var env struct {
		Data struct {
			CallID  string          `json:"callId"`
			Error   json.RawMessage `json:"error"`
			Message struct {
				Content []struct {
					Type    string `json:"type"`
					ID      string `json:"id"`
					IsError bool   `json:"isError"`
				} `json:"content"`
			} `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &env) != nil {
		return // the fold accepted it; a shape it does not expect counts nothing
	}
	d := env.Data
	switch typ {
	case "tool/call":
		sum.call(d.CallID)
	case dshq.TypeAssistantMessage:
		for _, c := range d.Message.Content {
			if c.Type == "tool-call" {
				sum.call(c.ID)
			}
		}
	case dshq.TypeToolResult:
		failed := len(d.Error) > 0 && !bytes.Equal(d.Error, []byte("null"))
		for _, c := range d.Message.Content {
			failed = failed || c.IsError
		}
		if failed {
			sum.FailedCalls++
		}
	}
}

// summaryTime takes an event's time into the span and the activity order.
func (b *batch) summaryTime(s *openSession, t int64) {
	before := s.v.activity()
	sum := &s.v.Sum
	if !sum.Timed {
		sum.Timed, sum.First, sum.Last = true, t, t
	} else {
		sum.First, sum.Last = min(sum.First, t), max(sum.Last, t)
	}
	if s.v.activity() == before {
		return
	}
	if b.summaries == nil {
		b.summaries = &summaryBatch{before: map[string]int64{}}
	}
	if _, ok := b.summaries.before[s.v.Header.ID]; !ok {
		b.summaries.before[s.v.Header.ID] = before
	}
}

// call counts a call id once (an id-less call always).
func (s *summaryState) call(id string) {
	if id != "" {
		for _, r := range s.Recent {
			if r == id {
				return
			}
		}
		if len(s.Recent) == maxRecentCalls {
			s.Recent = append(s.Recent[:0], s.Recent[1:]...)
		}
		s.Recent = append(s.Recent, id)
	}
	s.Calls++
}

// finishSummaries moves the sessions whose activity changed in the
// activity order.
func (b *batch) finishSummaries() error {
	if b.summaries == nil {
		return nil
	}
	order := b.tx.Bucket(bucketByActivity)
	for _, id := range sortedKeys(b.summaries.before) {
		s := b.sessions[id]
		if s == nil {
			return fmt.Errorf("%w: summary of session %q outside its batch", ErrCorruptStore, id)
		}
		if err := order.Delete(dshq.TimeKey(b.summaries.before[id], id)); err != nil {
			return err
		}
		if err := order.Put(dshq.TimeKey(s.v.activity(), id), nil); err != nil {
			return err
		}
	}
	b.summaries = nil
	return nil
}

// SessionsInOrder calls fn for each session in order, starting strictly
// after afterKey (nil = from the start; a dshq.ListOrder.Key), until fn
// returns false. Each page walks an order bucket from its key: its cost
// does not depend on the number of sessions before it.
func (s *snapshot) SessionsInOrder(order dshq.ListOrder, afterKey []byte, fn func(dshq.SessionInfo) bool) error {
	bucket := bucketByCreated
	if order.ByActivity() {
		bucket = bucketByActivity
	}
	c := s.tx.Bucket(bucket).Cursor()
	next := c.Next
	var k []byte
	switch {
	case !order.Ascending() && afterKey == nil:
		k, _ = c.First()
	case !order.Ascending():
		if k, _ = c.Seek(afterKey); k != nil && bytes.Equal(k, afterKey) {
			k, _ = c.Next()
		}
	case afterKey == nil:
		next = c.Prev
		k, _ = c.Last()
	default:
		next = c.Prev
		// Seek lands on the first key at or after afterKey: the one
		// before it is the first strictly before.
		if k, _ = c.Seek(afterKey); k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev()
		}
	}
	for ; k != nil; k, _ = next() {
		if len(k) < 8 {
			return fmt.Errorf("corrupt order key %x", k)
		}
		v, err := getSession(s.tx, string(k[8:]))
		if err != nil {
			return err
		}
		if v == nil {
			return fmt.Errorf("order index names missing session %q", k[8:])
		}
		if !fn(v.info()) {
			return nil
		}
	}
	return nil
}
