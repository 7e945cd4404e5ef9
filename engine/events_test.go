package engine_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// publishFile publishes a JSONL log from testdata as is.
func (p *pipe) publishFile(name string) (string, uint64) {
	p.t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		p.t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			lines = append(lines, string(l))
		}
	}
	var h struct{ ID string }
	_ = json.Unmarshal([]byte(lines[0]), &h)
	return h.ID, p.publish(h.ID, lines...)
}

func seqsOf[T any](items []T, seq func(T) int64) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = seq(it)
	}
	return out
}

func eventSeq(e dshq.Event) int64 {
	var v struct{ Seq int64 }
	_ = json.Unmarshal(e.Raw, &v)
	return v.Seq
}

func eq[T any](a, b T) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestEventReads(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	id, gen := p.publishFile("upstream-2.5.jsonl")
	p.sync()
	t.Run("events.list classifies every event", func(t *testing.T) {
		page, err := p.client.ListEvents(ctx, dshq.SessionReadRequest{SessionID: id}, query.WithMinGeneration(gen))
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 18 {
			t.Fatalf("%d records", len(page.Items))
		}
		want := map[int64]dshq.Surface{1: "shadowed", 5: "shadowed", 7: "shadowed", 10: "current", 15: "current", 0: "log-only", 17: "log-only"}
		for seq, s := range want {
			if got := page.Items[seq].Surface; got != s {
				t.Errorf("seq %d surface %s; want %s", seq, got, s)
			}
		}
	})
	t.Run("events.list pages by seq", func(t *testing.T) {
		var all []int64
		cur := ""
		for pages := 0; ; pages++ {
			page, err := p.client.ListEvents(ctx, dshq.SessionReadRequest{SessionID: id, Limit: 5, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, seqsOf(page.Items, func(r dshq.EventRecord) int64 { return r.Seq })...)
			if cur = page.NextCursor; cur == "" {
				break
			}
		}
		if len(all) != 18 || all[0] != 0 || all[17] != 17 {
			t.Fatalf("paged seqs %v", all)
		}
	})
	filterCases := []struct {
		name    string
		filters []dshq.Filter
		want    []int64
	}{
		{"a text clause scans whitespace-flexibly and case-insensitively", []dshq.Filter{{Kind: "text", Text: "RETRY    budget"}}, []int64{1, 10, 15, 17}},
		{"events without semantic text are never documents", []dshq.Filter{}, []int64{1, 5, 6, 7, 10, 15, 17}},
		{"a surface clause filters the classification", []dshq.Filter{{Kind: "surface", Values: []*string{dshq.Str("shadowed")}}}, []int64{1, 5, 7}},
		{"a seq range is inclusive", []dshq.Filter{{Kind: "seq", From: ptr(5.0), To: ptr(7.0)}}, []int64{5, 6, 7}},
		{"a type clause matches the open vocabulary", []dshq.Filter{{Kind: "type", Values: []*string{dshq.Str("todo/write"), dshq.Str("tool/call")}}}, []int64{6, 17}},
		{"regex syntax in text is literal", []dshq.Filter{{Kind: "text", Text: "src/config.ts:42"}}, []int64{7, 15}},
	}
	for _, tt := range filterCases {
		t.Run(tt.name, func(t *testing.T) {
			page, err := p.client.FilterEvents(ctx, dshq.EventFilterRequest{SessionID: id, Filters: tt.filters})
			if err != nil {
				t.Fatal(err)
			}
			if got := seqsOf(page.Items, func(d dshq.SearchDocument) int64 { return d.Seq }); !eq(got, tt.want) {
				t.Fatalf("seqs %v; want %v", got, tt.want)
			}
		})
	}
	t.Run("events.filter pages its matches", func(t *testing.T) {
		first, err := p.client.FilterEvents(ctx, dshq.EventFilterRequest{SessionID: id, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		second, err := p.client.FilterEvents(ctx, dshq.EventFilterRequest{SessionID: id, Limit: 2, Cursor: first.NextCursor})
		if err != nil {
			t.Fatal(err)
		}
		got := append(seqsOf(first.Items, func(d dshq.SearchDocument) int64 { return d.Seq }), seqsOf(second.Items, func(d dshq.SearchDocument) int64 { return d.Seq })...)
		if !eq(got, []int64{1, 5, 6, 7}) || second.NextCursor == "" {
			t.Fatalf("two pages %v, next %q", got, second.NextCursor)
		}
	})
	t.Run("sessions.surface returns the surface in model order", func(t *testing.T) {
		s, err := p.client.ReadSurface(ctx, dshq.SessionReadRequest{SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		if got := seqsOf(s.Events, eventSeq); !eq(got, []int64{15, 10}) || s.CapturedThroughSeq == nil || *s.CapturedThroughSeq != 17 {
			t.Fatalf("surface %v captured %v", got, s.CapturedThroughSeq)
		}
		if s.Session.ID != id || s.Session.Version != 2 {
			t.Fatalf("header %+v", s.Session)
		}
	})
	t.Run("sessions.read returns the raw events as written", func(t *testing.T) {
		r, err := p.client.ReadSession(ctx, dshq.SessionReadRequest{SessionID: id, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile("testdata/upstream-2.5.jsonl")
		line2 := bytes.Split(b, []byte("\n"))[2]
		if len(r.Events) != 10 || !bytes.Equal(r.Events[1].Raw, line2) || r.NextCursor == "" {
			t.Fatalf("%d events, event 1 = %s", len(r.Events), r.Events[1].Raw)
		}
		rest, err := p.client.ReadSession(ctx, dshq.SessionReadRequest{SessionID: id, Limit: 10, Cursor: r.NextCursor})
		if err != nil || len(rest.Events) != 8 || rest.NextCursor != "" {
			t.Fatalf("second page: %v, %d events", err, len(rest.Events))
		}
	})
	traceCases := []struct {
		seq                               int64
		surface                           dshq.Surface
		replacedBy                        *int64
		chain, replaced, sources, derived []int64
	}{
		{1, "shadowed", ptr[int64](15), []int64{15}, []int64{}, []int64{}, []int64{15}},
		{7, "shadowed", ptr[int64](15), []int64{15}, []int64{}, []int64{6}, []int64{15}},
		{6, "log-only", nil, []int64{}, []int64{}, []int64{}, []int64{7}},
		{15, "current", nil, []int64{}, []int64{1, 5, 7}, []int64{13, 14, 1, 5, 7}, []int64{}},
	}
	for _, tt := range traceCases {
		t.Run(fmt.Sprintf("events.trace of seq %d follows its edges", tt.seq), func(t *testing.T) {
			tr, err := p.client.TraceEvent(ctx, dshq.EventTraceRequest{SessionID: id, Seq: tt.seq})
			if err != nil {
				t.Fatal(err)
			}
			if tr.Target.Surface != tt.surface || !eq(tr.ReplacedBy, tt.replacedBy) && (tr.ReplacedBy == nil || tt.replacedBy == nil || *tr.ReplacedBy != *tt.replacedBy) ||
				!eq(tr.ReplacementChain, tt.chain) || !eq(tr.ReplacedEventSeqs, tt.replaced) || !eq(tr.SourceEventSeqs, tt.sources) || !eq(tr.DerivedEventSeqs, tt.derived) {
				t.Fatalf("trace = %+v", tr)
			}
		})
	}
	t.Run("events.read clamps the window at the log's edges", func(t *testing.T) {
		w, err := p.client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: id, Seq: 1, Before: 5, After: 2})
		if err != nil {
			t.Fatal(err)
		}
		if w.StartSeq != 0 || w.EndSeq != 3 || !eq(seqsOf(w.Events, eventSeq), []int64{0, 1, 2, 3}) || eventSeq(w.Target) != 1 {
			t.Fatalf("window %d..%d %v", w.StartSeq, w.EndSeq, seqsOf(w.Events, eventSeq))
		}
		end, err := p.client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: id, Seq: 16, After: 50})
		if err != nil || end.StartSeq != 16 || end.EndSeq != 17 {
			t.Fatalf("end window %v %+v", err, end)
		}
	})
	notFound := []struct {
		name string
		body string
		msg  string
	}{
		{"a seq past the end is EVENT_NOT_FOUND", `{"sessionId":"s-7f3c","seq":18}`, `session "s-7f3c" has no event at seq 18`},
		{"a negative seq is EVENT_NOT_FOUND", `{"sessionId":"s-7f3c","seq":-1}`, `session "s-7f3c" has no event at seq -1`},
		{"a fractional seq is EVENT_NOT_FOUND", `{"sessionId":"s-7f3c","seq":1.5}`, `session "s-7f3c" has no event at seq 1.5`},
	}
	for _, tt := range notFound {
		for _, ep := range []string{wire.EndpointEventsRead, wire.EndpointEventsTrace} {
			t.Run(ep+": "+tt.name, func(t *testing.T) {
				_, err := p.client.Raw(ctx, ep, []byte(tt.body))
				wantErr(t, err, dshq.CodeEventNotFound, tt.msg)
			})
		}
	}
	missing := []string{wire.EndpointSessionsRead, wire.EndpointSessionsSurface, wire.EndpointEventsList, wire.EndpointEventsRead, wire.EndpointEventsTrace}
	for _, ep := range missing {
		t.Run(ep+" of an unknown session is SESSION_NOT_FOUND", func(t *testing.T) {
			body := `{"sessionId":"nope"}`
			if ep == wire.EndpointEventsRead || ep == wire.EndpointEventsTrace {
				body = `{"sessionId":"nope","seq":-1}`
			}
			_, err := p.client.Raw(ctx, ep, []byte(body))
			wantErr(t, err, dshq.CodeSessionNotFound, `session "nope" was not found`)
		})
	}
}

func TestInvalidSession(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("bad", hdr{createdAt: 1})
	p.events("bad", userMsg(10, "hello needle"), evSpec{typ: "turn/start", time: 11, data: `{"turn":1}`, extra: `"surfaceOp":"append"`}, userMsg(12, "after"))
	gen := p.sync()
	for _, ep := range []string{wire.EndpointEventsList, wire.EndpointEventsFilter, wire.EndpointSessionsSurface, wire.EndpointEventsSearch} {
		t.Run(ep+" of an invalid session is INVALID_SURFACE", func(t *testing.T) {
			body := fmt.Sprintf(`{"sessionId":"bad","minGeneration":%d}`, gen)
			switch ep {
			case wire.EndpointEventsFilter:
				body = `{"sessionId":"bad","filters":[]}`
			case wire.EndpointEventsSearch:
				body = `{"sessionId":"bad","query":"needle"}`
			}
			_, err := p.client.Raw(ctx, ep, []byte(body))
			wantErr(t, err, dshq.CodeInvalidSurface, `invalid session surface: session "bad" is invalid from seq 1`)
		})
	}
	t.Run("events.trace of an existing seq is INVALID_SURFACE", func(t *testing.T) {
		_, err := p.client.TraceEvent(ctx, dshq.EventTraceRequest{SessionID: "bad", Seq: 0})
		wantErr(t, err, dshq.CodeInvalidSurface, "invalid session surface: ")
	})
	t.Run("events.trace past the end is EVENT_NOT_FOUND even when invalid", func(t *testing.T) {
		_, err := p.client.TraceEvent(ctx, dshq.EventTraceRequest{SessionID: "bad", Seq: 3})
		wantErr(t, err, dshq.CodeEventNotFound, `session "bad" has no event at seq 3`)
	})
	t.Run("raw reads still work", func(t *testing.T) {
		r, err := p.client.ReadSession(ctx, dshq.SessionReadRequest{SessionID: "bad"})
		if err != nil || len(r.Events) != 3 {
			t.Fatalf("sessions.read: %v, %d events", err, len(r.Events))
		}
		w, err := p.client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: "bad", Seq: 1, Before: 1, After: 1})
		if err != nil || len(w.Events) != 3 {
			t.Fatalf("events.read: %v %+v", err, w)
		}
	})
}

func TestBalancedView(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	p.session("crashed", hdr{createdAt: 1})
	p.setLive("crashed", true)
	p.events("crashed",
		plain("turn/start", 1, `{"turn":1}`),
		userMsg(2, "run it"),
		plain("step/start", 3, `{"turn":1,"step":1}`),
		evSpec{typ: "assistant/message", time: 4, extra: `"surfaceOp":"append"`,
			data: `{"turn":1,"step":1,"message":{"id":"m-a","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[{"type":"tool-call","id":"call_1","name":"bash","arguments":"{}"}]}}`},
		plain("tool/call", 5, `{"turn":1,"step":1,"callId":"call_1","name":"bash","arguments":"{}"}`))
	gen := p.sync()
	t.Run("a live session with an open turn has no closers", func(t *testing.T) {
		page, err := p.client.ListEvents(ctx, dshq.SessionReadRequest{SessionID: "crashed"}, query.WithMinGeneration(gen))
		if err != nil || len(page.Items) != 5 {
			t.Fatalf("%v: %+v", err, page)
		}
	})
	p.setLive("crashed", false)
	t.Run("a lapsed lease with an open turn reads balanced", func(t *testing.T) {
		page, err := p.client.ListEvents(ctx, dshq.SessionReadRequest{SessionID: "crashed"})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, r := range page.Items[5:] {
			types = append(types, r.Type)
		}
		if !eq(types, []string{"tool/result", "step/end", "turn/end"}) || page.Items[5].Surface != dshq.SurfaceCurrent {
			t.Fatalf("closers %v (%+v)", types, page.Items)
		}
		tr, err := p.client.TraceEvent(ctx, dshq.EventTraceRequest{SessionID: "crashed", Seq: 4})
		if err != nil || !eq(tr.DerivedEventSeqs, []int64{5}) {
			t.Fatalf("trace of the tool call: %v %+v", err, tr)
		}
		s, err := p.client.ReadSurface(ctx, dshq.SessionReadRequest{SessionID: "crashed"})
		if err != nil || !eq(seqsOf(s.Events, eventSeq), []int64{1, 3, 5}) || *s.CapturedThroughSeq != 7 {
			t.Fatalf("surface %v: %v", err, s)
		}
		w, err := p.client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: "crashed", Seq: 7, Before: 1})
		if err != nil || w.StartSeq != 6 || w.EndSeq != 7 {
			t.Fatalf("window %v %+v", err, w)
		}
	})
}
