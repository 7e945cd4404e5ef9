package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
)

// TestPagingWhileWritersAppend pages through every paged endpoint while 8
// writers keep appending to other sessions: each result comes exactly once
// and no cursor is stale.
func TestPagingWhileWritersAppend(t *testing.T) {
	p := newPipe(t, func(c *pipeConfig) { c.engineOpts = append(c.engineOpts, engine.WithMaxSearchResults(500)) })
	ctx := ctxT(t)
	const targetEvents = 150
	p.session("target", hdr{createdAt: 1})
	var evs []evSpec
	for i := range targetEvents {
		evs = append(evs, userMsg(int64(i), fmt.Sprintf("marker event %d", i)))
	}
	p.events("target", evs...)
	for i := range 20 {
		p.session(fmt.Sprintf("peer-%02d", i), hdr{createdAt: int64(100 + i)})
		p.events(fmt.Sprintf("peer-%02d", i), userMsg(1000, "a marker here"))
	}
	gen := p.sync()

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			peer := fmt.Sprintf("peer-%02d", w)
			fresh := fmt.Sprintf("writer-%d", w)
			p.session(fresh, hdr{createdAt: 50})
			// Writers are paced so that the 2-core CI machine keeps serving.
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-wctx.Done():
					return
				case <-tick.C:
				}
				p.events(peer, userMsg(int64(2000+n), "another marker from a writer"))
				p.events(fresh, userMsg(int64(3000+n), "marker in a new session"))
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()

	t.Run("events.filter returns every matching event once", func(t *testing.T) {
		ctx := ctxT(t)
		seen := map[int64]int{}
		cur := ""
		for {
			page, err := p.client.FilterEvents(ctx, dshq.EventFilterRequest{SessionID: "target", Limit: 7, Cursor: cur,
				Filters: []dshq.Filter{{Kind: "text", Text: "MARKER"}}}, query.WithMinGeneration(gen))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page.Items {
				seen[d.Seq]++
			}
			if cur = page.NextCursor; cur == "" {
				break
			}
		}
		checkOnce(t, seen, targetEvents)
	})
	t.Run("events.search returns every matching event once", func(t *testing.T) {
		ctx := ctxT(t)
		seen := map[int64]int{}
		cur := ""
		for {
			page, err := p.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: "target", Query: "marker", Limit: 9, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range page.Items {
				seen[h.Seq]++
			}
			if cur = page.NextCursor; cur == "" {
				break
			}
		}
		checkOnce(t, seen, targetEvents)
	})
	t.Run("events.list returns every event once", func(t *testing.T) {
		ctx := ctxT(t)
		seen := map[int64]int{}
		cur := ""
		for {
			page, err := p.client.ListEvents(ctx, dshq.SessionReadRequest{SessionID: "target", Limit: 11, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Items {
				seen[r.Seq]++
			}
			if cur = page.NextCursor; cur == "" {
				break
			}
		}
		checkOnce(t, seen, targetEvents)
	})
	t.Run("sessions.search returns every session of its first page once", func(t *testing.T) {
		ctx := ctxT(t)
		seen := map[string]int{}
		cur := ""
		first := true
		want := 0
		for {
			page, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "marker", Limit: 3, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range page.Items {
				seen[h.Header.ID]++
			}
			if first {
				want, first = countSearch(t, p), false
			}
			if cur = page.NextCursor; cur == "" {
				break
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("session %s returned %d times", id, n)
			}
		}
		if len(seen) < 21 || len(seen) > want {
			t.Fatalf("%d sessions; want between 21 and %d", len(seen), want)
		}
	})
	t.Run("sessions.list returns every session once", func(t *testing.T) {
		ctx := ctxT(t)
		seen := map[string]int{}
		cur := ""
		for {
			page, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 4, Cursor: cur})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Items {
				seen[r.Header.ID]++
			}
			if cur = page.NextCursor; cur == "" {
				break
			}
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("session %s listed %d times", id, n)
			}
		}
		if len(seen) < 21 {
			t.Fatalf("%d sessions listed", len(seen))
		}
	})
}

// countSearch counts the sessions a fresh unpaged search finds now (an
// upper bound for a paged search that started earlier).
func countSearch(t *testing.T, p *pipe) int {
	page, err := p.client.SearchSessions(ctxT(t), dshq.SessionSearchRequest{Query: "marker", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Items) + 100
}

func checkOnce(t *testing.T, seen map[int64]int, n int) {
	t.Helper()
	if len(seen) != n {
		t.Fatalf("%d distinct results; want %d", len(seen), n)
	}
	for seq, c := range seen {
		if c != 1 || seq < 0 || seq >= int64(n) {
			t.Fatalf("seq %d returned %d times", seq, c)
		}
	}
}

// TestWireErrors checks the raw wire shape of failures: micro error headers
// and the {"error":{code,message}} body, for bodies no client would send.
func TestWireErrors(t *testing.T) {
	p := newPipe(t)
	cases := []struct {
		name, endpoint, body string
		code                 dshq.Code
		message              string
	}{
		{"a JSON array body", wire.EndpointSessionsList, `[1]`, dshq.CodeInvalidRequest, "request body must be a JSON object"},
		{"a body of garbage bytes", wire.EndpointEventsRead, "{\"a\":\"\xff\"}", dshq.CodeInvalidRequest, "request body is not valid UTF-8"},
		{"an unknown field", wire.EndpointSessionsTrace, `{"sessionId":"a","x":1}`, dshq.CodeInvalidRequest, `unknown request field "x" (allowed: sessionId, minGeneration, timeoutMs)`},
		{"an unknown session", wire.EndpointSessionsTrace, `{"sessionId":"a b"}`, dshq.CodeSessionNotFound, `session "a b" was not found`},
		{"an invalid session id", wire.EndpointSessionsTrace, `{"sessionId":"a\nb"}`, dshq.CodeInvalidRequest, `sessionId is not a valid session id: session id contains control character U+000A at byte 1`},
	}
	for _, tt := range cases {
		t.Run(tt.name+" answers with error headers and body", func(t *testing.T) {
			msg, err := p.nc.RequestWithContext(ctxT(t), dshq.QuerySubjectPrefix+"."+tt.endpoint, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := msg.Header.Get(micro.ErrorCodeHeader); got != string(tt.code) {
				t.Fatalf("code header %q; want %s", got, tt.code)
			}
			if got := msg.Header.Get(micro.ErrorHeader); got == "" || got[:min(len(got), 10)] != strings.ReplaceAll(tt.message, "\n", " ")[:10] {
				t.Fatalf("message header %q", got)
			}
			want := fmt.Sprintf(`{"error":{"code":%q,"message":%q}}`, tt.code, tt.message)
			if string(msg.Data) != want {
				t.Fatalf("body %s; want %s", msg.Data, want)
			}
		})
	}
}
