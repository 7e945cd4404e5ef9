package engine_test

import (
	"fmt"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// turns returns n complete turns (turn/start, user message, step/start,
// step/end, turn/end) starting at turn first.
func turns(first, n int) []evSpec {
	var evs []evSpec
	for turn := first; turn < first+n; turn++ {
		tm := int64(turn * 10)
		evs = append(evs,
			plain("turn/start", tm, fmt.Sprintf(`{"turn":%d}`, turn)),
			userMsg(tm+1, fmt.Sprintf("turn %d text", turn)),
			plain("step/start", tm+2, fmt.Sprintf(`{"turn":%d,"step":1}`, turn)),
			plain("step/end", tm+3, fmt.Sprintf(`{"turn":%d,"step":1}`, turn)),
			plain("turn/end", tm+4, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn)))
	}
	return evs
}

func TestSessionsStat(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("long", hdr{createdAt: 5, cwd: "/w"})
	p.events("long", turns(1, 300)...)
	p.session("quiet", hdr{createdAt: 6})
	p.events("quiet", userMsg(1, "no turns here"))
	p.session("bad", hdr{createdAt: 7})
	p.events("bad", userMsg(10, "hello"), evSpec{typ: "turn/start", time: 11, data: `{"turn":1}`, extra: `"surfaceOp":"append"`})
	gen := p.sync()

	t.Run("a long log reports its last step/start and event count", func(t *testing.T) {
		st, err := p.client.StatSession(ctx, dshq.SessionStatRequest{SessionID: "long"}, query.WithMinGeneration(gen))
		if err != nil {
			t.Fatal(err)
		}
		if st.LastStepStartSeq == nil || *st.LastStepStartSeq != 1497 || st.EventCount != 1500 {
			t.Fatalf("stat %+v: want lastStepStartSeq 1497 and eventCount 1500", st)
		}
		if st.Session.Header.ID != "long" || !st.Session.Persisted || st.InvalidFromSeq != nil || st.Title != nil || st.Generation < gen {
			t.Fatalf("stat %+v", st)
		}
	})
	t.Run("a later step/start is seen at its generation", func(t *testing.T) {
		g := p.events("long", turns(301, 1)...)
		st, err := p.client.StatSession(ctx, dshq.SessionStatRequest{SessionID: "long"}, query.WithMinGeneration(g))
		if err != nil {
			t.Fatal(err)
		}
		if st.LastStepStartSeq == nil || *st.LastStepStartSeq != 1502 || st.EventCount != 1505 {
			t.Fatalf("stat %+v: want lastStepStartSeq 1502 and eventCount 1505", st)
		}
	})
	t.Run("a session without a step/start has no lastStepStartSeq", func(t *testing.T) {
		body, err := p.client.Raw(ctx, wire.EndpointSessionsStat, []byte(`{"sessionId":"quiet"}`))
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"session":{"header":{"version":2,"id":"quiet","createdAt":6,"isSeeded":false},"live":false,"persisted":true},"inheritedEventCount":0,"eventCount":1,` +
			`"summary":{"eventCount":1,"firstEventAt":1,"lastEventAt":1,"lastActivityAt":6,"turns":0,"toolCalls":0,"failedToolCalls":0},"generation":`)
		if len(body) < len(want) || string(body[:len(want)]) != want {
			t.Fatalf("reply %s\nwant prefix %s", body, want)
		}
	})
	t.Run("an invalid session says from which seq", func(t *testing.T) {
		st, err := p.client.StatSession(ctx, dshq.SessionStatRequest{SessionID: "bad"})
		if err != nil {
			t.Fatal(err)
		}
		if st.InvalidFromSeq == nil || *st.InvalidFromSeq != 1 || st.InvalidReason == "" || st.EventCount != 2 {
			t.Fatalf("stat %+v: want invalidFromSeq 1 with a reason", st)
		}
	})
	t.Run("a missing session is SESSION_NOT_FOUND", func(t *testing.T) {
		_, err := p.client.StatSession(ctx, dshq.SessionStatRequest{SessionID: "nope"})
		wantErr(t, err, dshq.CodeSessionNotFound, `session "nope" was not found`)
	})
	t.Run("an unknown field is INVALID_REQUEST", func(t *testing.T) {
		_, err := p.client.Raw(ctx, wire.EndpointSessionsStat, []byte(`{"sessionId":"long","limit":3}`))
		wantErr(t, err, dshq.CodeInvalidRequest, `unknown request field "limit"`)
	})
	t.Run("a sessionId that is not a string is INVALID_REQUEST", func(t *testing.T) {
		_, err := p.client.Raw(ctx, wire.EndpointSessionsStat, []byte(`{"sessionId":7}`))
		wantErr(t, err, dshq.CodeInvalidRequest, "sessionId")
	})
}
