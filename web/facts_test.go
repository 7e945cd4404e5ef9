package web

import (
	"encoding/json"
	"testing"

	"github.com/dshq/dshq"
)

// TestTotalsAndTimelineCountOneReading runs one log through a session's
// totals and its timeline: both count a call its tool/call repeats once,
// close a call answered in the older result shape (data.callId, no
// message), see a failure stated either way, and name the turn as written.
func TestTotalsAndTimelineCountOneReading(t *testing.T) {
	events := []string{
		`{"type":"turn/start","data":{"turn":"7"}}`,
		`{"type":"user/message","data":{"content":[{"type":"text","text":"go"}]}}`,
		`{"type":"assistant/message","data":{"message":{"source":{"model":"m-1"},"content":[{"type":"tool-call","id":"c1","name":"read"},{"type":"tool-call","id":"c2","name":"bash"}]}}}`,
		`{"type":"tool/call","data":{"callId":"c1","name":"read"}}`,
		`{"type":"tool/result","data":{"callId":"c1","content":"ok"}}`,
		`{"type":"tool/result","data":{"message":{"source":{"callId":"c2"},"content":[{"type":"text","text":"no","isError":true}]}}}`,
		`{"type":"tool/call","data":{"callId":"c3","name":"grep"}}`,
		`{"type":"tool/result","data":{"callId":"c3","error":{"message":"boom"}}}`,
		`{"type":"assistant/message","data":{"message":{"source":{"model":"unknown"},"content":[{"type":"text","text":"done"}]}}}`,
		`{"type":"turn/end","data":{"turn":"7","reason":{"kind":"error"}}}`,
	}
	tot := &totals{models: map[string]bool{}}
	b := newTLBuilder("s")
	for i, line := range events {
		var e dshq.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		e.Seq, e.Time = int64(i), int64(1000*(i+1))
		tot.add(e)
		b.add(e)
	}
	if tot.Turns != 1 || tot.ToolCalls != 3 || tot.FailedCalls != 2 || tot.ModelList() != "m-1" {
		t.Errorf("totals: %d turns, %d calls, %d failed, models %q; want 1, 3, 2, m-1", tot.Turns, tot.ToolCalls, tot.FailedCalls, tot.ModelList())
	}
	if b.turns != 1 || b.requests != 2 || b.seen.Count != tot.ToolCalls {
		t.Errorf("timeline: %d turns, %d requests, %d calls; want 1, 2, %d", b.turns, b.requests, b.seen.Count, tot.ToolCalls)
	}
	spans := map[string]*tlSpan{}
	for _, sp := range b.rows(0) {
		spans[sp.Kind+" "+sp.Label] = sp
	}
	for label, want := range map[string]struct{ failed, open bool }{
		"tool read": {false, false}, "tool bash": {true, false}, "tool grep": {true, false}, "turn Turn 7": {true, false},
	} {
		sp := spans[label]
		if sp == nil {
			t.Errorf("no span %q in %v", label, spans)
			continue
		}
		if sp.Failed != want.failed || sp.Open != want.open {
			t.Errorf("%s: failed %v open %v, want %v %v", label, sp.Failed, sp.Open, want.failed, want.open)
		}
	}
}
