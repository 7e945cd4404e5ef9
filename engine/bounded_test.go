package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
)

// TestBoundedReplies checks that list-shaped replies page within the reply
// budget and that events.read clamps its window by size.
func TestBoundedReplies(t *testing.T) {
	const budget = 16 << 10
	p := newPipe(t, func(c *pipeConfig) { c.engineOpts = append(c.engineOpts, engine.WithMaxReplyBytes(budget)) })
	ctx := ctxT(t)
	p.session("big", hdr{createdAt: 1})
	var evs []evSpec
	for i := range 60 {
		evs = append(evs, userMsg(int64(i), fmt.Sprintf("event %d %s", i, strings.Repeat("x", 1000))))
	}
	gen := p.events("big", evs...)
	p.sync()

	t.Run("sessions.read pages hold fewer than limit to stay within the payload", func(t *testing.T) {
		var seqs []int64
		pages := 0
		for cur := ""; ; pages++ {
			r, err := p.client.ReadSession(ctx, dshq.SessionReadRequest{SessionID: "big", Cursor: cur}, query.WithMinGeneration(gen))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(r)
			if len(b) > budget {
				t.Fatalf("page of %d bytes over the %d budget", len(b), budget)
			}
			seqs = append(seqs, seqsOf(r.Events, eventSeq)...)
			if cur = r.NextCursor; cur == "" {
				break
			}
		}
		if pages < 3 || len(seqs) != 60 || seqs[59] != 59 {
			t.Fatalf("%d pages, %d events", pages, len(seqs))
		}
	})
	t.Run("sessions.surface pages by size too", func(t *testing.T) {
		n := 0
		for cur := ""; ; {
			s, err := p.client.ReadSurface(ctx, dshq.SessionReadRequest{SessionID: "big", Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			n += len(s.Events)
			if cur = s.NextCursor; cur == "" {
				break
			}
			if s.CapturedThroughSeq == nil || *s.CapturedThroughSeq != 59 {
				t.Fatalf("capturedThroughSeq %v", s.CapturedThroughSeq)
			}
		}
		if n != 60 {
			t.Fatalf("%d surface events", n)
		}
	})
	t.Run("events.read clamps its window by size and keeps the target", func(t *testing.T) {
		w, err := p.client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: "big", Seq: 30, Before: 50, After: 50})
		if err != nil {
			t.Fatal(err)
		}
		if w.StartSeq > 30 || w.EndSeq < 30 || w.StartSeq == 0 || w.EndSeq == 59 || int64(len(w.Events)) != w.EndSeq-w.StartSeq+1 || eventSeq(w.Target) != 30 {
			t.Fatalf("window %d..%d with %d events", w.StartSeq, w.EndSeq, len(w.Events))
		}
		if got := seqsOf(w.Events, eventSeq); got[0] != w.StartSeq || got[len(got)-1] != w.EndSeq {
			t.Fatalf("events %v do not match %d..%d", got, w.StartSeq, w.EndSeq)
		}
	})
}

func TestSearchDisabled(t *testing.T) {
	p := newPipe(t)
	p.session("s", hdr{createdAt: 1})
	gen := p.sync()
	eng := engine.New(shardhost.Local(p.proj, shardhost.NoSearch()))
	for _, tt := range []struct{ endpoint, body string }{
		{wire.EndpointSessionsSearch, `{"query":"x"}`},
		{wire.EndpointEventsSearch, `{"sessionId":"s","query":"x"}`},
	} {
		t.Run(tt.endpoint+" without an index is SEARCH_DISABLED", func(t *testing.T) {
			req, err := wire.DecodeRequest(tt.endpoint, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = eng.Run(context.Background(), req)
			wantErr(t, err, dshq.CodeSearchDisabled, "search is disabled")
		})
	}
	t.Run("exact reads keep working without an index", func(t *testing.T) {
		req, _ := wire.DecodeRequest(wire.EndpointSessionsList, []byte(fmt.Sprintf(`{"minGeneration":%d}`, gen)))
		out, err := eng.Run(context.Background(), req)
		if err != nil || !strings.Contains(string(out), `"id":"s"`) {
			t.Fatalf("%v %s", err, out)
		}
	})
}
