package web

import (
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
)

// liveTurn is a turn of a live session: its start, the prompt, a reply
// calling c1, the duplicate tool/call, a step line, the result, the end.
var liveTurn = []string{
	`{"type":"turn/start","seq":0,"time":1788000000100,"data":{"turn":1}}`,
	`{"type":"user/message","seq":1,"time":1788000000101,"data":{"id":"m1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"list the files"}]},"surfaceOp":"append"}`,
	`{"type":"assistant/message","seq":2,"time":1788000000200,"data":{"turn":1,"step":1,"message":{"id":"m2","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"tool-call","id":"c1","name":"ls","arguments":"{}"}]}},"surfaceOp":"append"}`,
	`{"type":"tool/call","seq":3,"time":1788000000201,"data":{"turn":1,"step":1,"callId":"c1","name":"ls","arguments":"{}"}}`,
	`{"type":"step/end","seq":4,"time":1788000000202,"data":{"turn":1,"step":1}}`,
	`{"type":"tool/result","seq":5,"time":1788000000300,"data":{"turn":1,"step":1,"message":{"id":"m3","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a.go b.go"}]}]}},"surfaceOp":"append","sourceEventSeqs":[3]}`,
	`{"type":"turn/end","seq":6,"time":1788000000400,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
}

func TestLiveEventsJoinTheConversation(t *testing.T) {
	s := newStack(t)
	h := s.liveSession(t, "live-conv", 0)
	ctx := testContext(t)
	var evs []dshq.Event
	for _, l := range liveTurn[:3] {
		evs = append(evs, event(l))
	}
	gen, err := h.Append(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	s.waitGeneration(t, gen)
	body := s.page(t, "/s/live-conv")
	live := liveURL(t, body)
	if !strings.Contains(live, "view=conv") {
		t.Fatalf("the conversation's stream %q does not ask for its places", live)
	}
	st := s.openStream(t, live, "")
	for _, l := range liveTurn[3:] {
		if _, err := h.Append(ctx, []dshq.Event{event(l)}); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct {
		place, callID, html string
	}{
		{"call", "c1", `<article id="e-3"`},
		{"fold", "", `<details class="bk" data-kinds="[[&#34;step/end&#34;,1]]"><summary><span class="bk-n">1</span> bookkeeping event <span class="bk-kinds">step/end</span>`},
		{"result", "c1", `<div class="call-result is-current" id="e-5" data-seq="5">`},
		{"end", "", `<footer class="turn-end" id="e-6" data-seq="6">`},
	}
	for _, w := range want {
		ev := st.next(t, 10*time.Second, "event")
		c, _ := ev.Data["conv"].(map[string]any)
		if c == nil {
			t.Fatalf("event %v has no place in the conversation: %+v", ev.Data["seq"], ev.Data)
		}
		got, _ := c["html"].(string)
		if c["place"] != w.place || (c["callId"] != nil && c["callId"] != w.callID) || !strings.Contains(got, w.html) {
			t.Errorf("event %v: place %v, call %v, html %q; want %s %q containing %q", ev.Data["seq"], c["place"], c["callId"], got, w.place, w.callID, w.html)
		}
		checkMarkup(t, "live conversation event", got)
	}
	// The event log's stream sends rows only.
	st.close()
	log := s.openStream(t, strings.Replace(live, "&view=conv", "", 1), "")
	if ev := log.next(t, 10*time.Second, "event"); ev.Data["conv"] != nil {
		t.Errorf("the log's stream places events: %+v", ev.Data)
	}
	// A turn/start opens a turn section.
	start := event(`{"type":"turn/start","seq":7,"time":1788000000500,"data":{"turn":2}}`)
	st = s.openStream(t, live, "")
	if _, err := h.Append(ctx, []dshq.Event{start}); err != nil {
		t.Fatal(err)
	}
	for {
		ev := st.next(t, 10*time.Second, "event")
		if ev.Data["seq"] != 7.0 {
			continue
		}
		c := ev.Data["conv"].(map[string]any)
		if c["place"] != "turn" || !strings.Contains(c["html"].(string), `<section class="turn" id="e-7" data-seq="7">`) {
			t.Errorf("turn/start: %+v", c)
		}
		break
	}
}
