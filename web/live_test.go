package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/record"
)

// sseEvent is one event of a stream.
type sseEvent struct {
	ID, Name string
	Data     map[string]any
}

// sseStream reads a live stream in the test's background.
type sseStream struct {
	events chan sseEvent
	cancel context.CancelFunc
	done   chan struct{}
}

// openStream connects to path (lastID as Last-Event-ID when set).
func (s *stack) openStream(t *testing.T, path, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		res.Body.Close()
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	st := &sseStream{events: make(chan sseEvent, 1024), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(st.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Name != "" {
					select {
					case st.events <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{ID: ev.ID}
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.Data)
			}
		}
	}()
	t.Cleanup(st.close)
	return st
}

func (st *sseStream) close() { st.cancel(); <-st.done }

// next returns the next event named one of names (others are dropped),
// failing after d.
func (st *sseStream) next(t *testing.T, d time.Duration, names ...string) sseEvent {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-st.events:
			for _, n := range names {
				if ev.Name == n {
					return ev
				}
			}
		case <-deadline:
			t.Fatalf("no %v event within %v", names, d)
		}
	}
}

// liveURL returns a page's live stream URL.
func liveURL(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`data-live-url="([^"]*)"`).FindStringSubmatch(body)
	if m == nil || m[1] == "" {
		t.Fatal("the page has no live stream")
	}
	return html.UnescapeString(m[1])
}

func userEvent(seq int64, text string) dshq.Event {
	var e dshq.Event
	line := fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m-%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":%q}]},"surfaceOp":"append"}`,
		seq, 1788000000000+seq, seq, text)
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		panic(err)
	}
	return e
}

func event(line string) dshq.Event {
	var e dshq.Event
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		panic(err)
	}
	return e
}

// liveSession creates a session held open by the test (live) with n user
// messages.
func (s *stack) liveSession(t *testing.T, id string, n int) *bus.Handle {
	t.Helper()
	ctx := testContext(t)
	h, err := s.store.Create(ctx, dshq.Header{Version: 2, ID: id, CreatedAt: time.Now().UnixMilli(), Cwd: dshq.Str("/live")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close(context.Background()) })
	var evs []dshq.Event
	for i := range n {
		evs = append(evs, userEvent(int64(i), fmt.Sprintf("message %d", i)))
	}
	if n > 0 {
		gen, err := h.Append(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		s.waitGeneration(t, gen)
	}
	return h
}

func TestSessionPageFollowsTheSessionWithNoGapAndNoDuplicate(t *testing.T) {
	s := newStack(t)
	h := s.liveSession(t, "live-1", 3)
	ctx := testContext(t)
	body := s.page(t, "/s/live-1")
	mustContain(t, "live page", body, `data-last-page="true"`, `data-live-kind="session"`, "message 2")
	live := liveURL(t, body)

	// Appended after the page was read and before its stream opened: the
	// stream, resumed from the page's generation, must deliver it.
	if _, err := h.Append(ctx, []dshq.Event{userEvent(3, "between page and stream <b>x</b>")}); err != nil {
		t.Fatal(err)
	}
	st := s.openStream(t, live, "")
	ev := st.next(t, 10*time.Second, "event")
	if ev.Data["seq"] != 3.0 || !strings.Contains(ev.Data["html"].(string), "between page and stream &lt;b&gt;x&lt;/b&gt;") || ev.Data["count"] != 4.0 {
		t.Fatalf("first live event: %+v", ev)
	}
	checkMarkup(t, "live event", ev.Data["html"].(string))
	status := st.next(t, 5*time.Second, "status")
	if status.Data["bus"] != "connected" || status.Data["pending"] != 0.0 {
		t.Fatalf("status: %+v", status.Data)
	}

	start := time.Now()
	if _, err := h.Append(ctx, []dshq.Event{userEvent(4, "published during the test")}); err != nil {
		t.Fatal(err)
	}
	ev = st.next(t, 2*time.Second, "event")
	if ev.Data["seq"] != 4.0 {
		t.Fatalf("second live event: %+v", ev.Data)
	}
	t.Logf("append → live event on the stream: %v", time.Since(start))
	lastID := ev.ID
	st.close()

	// A reconnect with the last id goes on after it: the next event is 5,
	// not a repeat of 4.
	if _, err := h.Append(ctx, []dshq.Event{userEvent(5, "after the reconnect")}); err != nil {
		t.Fatal(err)
	}
	st = s.openStream(t, live, lastID)
	ev = st.next(t, 10*time.Second, "event")
	if ev.Data["seq"] != 5.0 {
		t.Fatalf("after reconnect: %+v", ev.Data)
	}

	// A compaction shadows what it replaces: surface events for each.
	compaction := event(`{"type":"user/message","seq":6,"time":1788000000006,"data":{"id":"m-c","role":"user","source":{"kind":"plugin","plugin":"compact","compactionId":"c1"},"content":[{"type":"text","text":"summary"}]},"surfaceOp":{"op":"replace","start":0,"end":5},"sourceEventSeqs":[0,1,2,3,4,5]}`)
	if _, err := h.Append(ctx, []dshq.Event{compaction}); err != nil {
		t.Fatal(err)
	}
	shadowed := map[float64]bool{}
	for len(shadowed) < 6 {
		ev := st.next(t, 10*time.Second, "surface")
		if ev.Data["to"] != "shadowed" || ev.Data["replacedBy"] != 6.0 {
			t.Fatalf("surface: %+v", ev.Data)
		}
		shadowed[ev.Data["seq"].(float64)] = true
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	lease := st.next(t, 30*time.Second, "lease")
	if lease.Data["live"] != false {
		t.Fatalf("lease: %+v", lease.Data)
	}
}

func TestSessionListFollowsNewSessionsTitlesAndLeases(t *testing.T) {
	s := newStack(t)
	s.liveSession(t, "first", 1)
	body := s.page(t, "/")
	st := s.openStream(t, liveURL(t, body), "")
	st.next(t, 5*time.Second, "status")

	h := s.liveSession(t, "second <i>", 1) // a session is materialised by its first append
	ev := st.next(t, 10*time.Second, "session")
	if ev.Data["id"] != "second <i>" || !strings.Contains(ev.Data["html"].(string), `data-sid="second &lt;i&gt;"`) {
		t.Fatalf("session: %+v", ev.Data)
	}
	checkMarkup(t, "live row", ev.Data["html"].(string))
	ctx := testContext(t)
	title := event(`{"type":"session/title","seq":1,"time":1788000000001,"data":{"title":"A <new> title","messageSeqs":[0],"source":{"kind":"user"}}}`)
	if _, err := h.Append(ctx, []dshq.Event{title}); err != nil {
		t.Fatal(err)
	}
	ev = st.next(t, 10*time.Second, "title")
	if ev.Data["id"] != "second <i>" || ev.Data["title"] != "A <new> title" {
		t.Fatalf("title: %+v", ev.Data)
	}
	counts := s.page(t, "/api/counts?id=second+%3Ci%3E&id=first")
	var got map[string]struct {
		Count int64
		Live  bool
	}
	if err := json.Unmarshal([]byte(counts), &got); err != nil || got["second <i>"].Count != 2 || !got["first"].Live {
		t.Fatalf("counts: %s (%v)", counts, err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ev = st.next(t, 30*time.Second, "lease")
	if ev.Data["id"] != "second <i>" || ev.Data["live"] != false {
		t.Fatalf("lease: %+v", ev.Data)
	}
}

func TestAListConfinedToAWorkspaceHearsOnlyIt(t *testing.T) {
	s := newStack(t)
	body := s.page(t, "/?cwd=/live")
	st := s.openStream(t, liveURL(t, body), "")
	st.next(t, 5*time.Second, "status")
	ctx := testContext(t)
	other, err := s.store.Create(ctx, dshq.Header{Version: 2, ID: "elsewhere", CreatedAt: time.Now().UnixMilli(), Cwd: dshq.Str("/other")})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Append(ctx, []dshq.Event{userEvent(0, "x")}); err != nil {
		t.Fatal(err)
	}
	s.liveSession(t, "here", 1)
	ev := st.next(t, 10*time.Second, "session")
	if ev.Data["id"] != "here" {
		t.Fatalf("the /live list heard %v", ev.Data["id"])
	}
}

func TestLiveStreamsEndWhenTheServerCloses(t *testing.T) {
	s := newStack(t)
	s.liveSession(t, "s1", 1)
	st := s.openStream(t, liveURL(t, s.page(t, "/s/s1")), "")
	st.next(t, 5*time.Second, "status")
	closed := make(chan struct{})
	go func() { s.ui.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the live stream")
	}
	select {
	case <-st.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's response did not end")
	}
}

func TestAStreamFarBehindSaysSoWhileItCatchesUp(t *testing.T) {
	s := newStack(t)
	lines := []string{`{"type":"session","version":2,"id":"behind","createdAt":1788000000000,"cwd":"/w","isSeeded":false}`}
	const n = 450
	for i := 0; i < n; i++ {
		lines = append(lines, fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"message %d"}]},"surfaceOp":"append"}`, i, 1788000000000+i, i, i))
	}
	s.waitGeneration(t, s.importLines(t, lines...))
	// The feed publishes a commit's messages after the projection has
	// applied it: the stream starts n behind only once the feed holds them
	// all (else it may start with the feed and never be behind).
	s.waitFeedEvents(t, "behind", n)
	st := s.openStream(t, "/s/behind/live?after=0", "")
	var behind []float64
	next := 0.0
	for next < n {
		ev := st.next(t, 20*time.Second, "event", "status")
		switch ev.Name {
		case "status":
			if p := ev.Data["pending"].(float64); p > 0 {
				behind = append(behind, p)
			}
		case "event":
			if ev.Data["seq"] != next {
				t.Fatalf("event %v, want %v", ev.Data["seq"], next)
			}
			next++
		}
	}
	if len(behind) == 0 {
		t.Fatal("no status said the stream was behind while it caught up")
	}
	if ev := st.next(t, 5*time.Second, "status"); ev.Data["pending"] != 0.0 {
		t.Fatalf("caught up, the status says %v pending", ev.Data["pending"])
	}
	t.Logf("behind by %v while catching up", behind)
}

// waitFeedEvents waits until the live feed holds n event messages of
// session id.
func (s *stack) waitFeedEvents(t *testing.T, id string, n uint64) {
	t.Helper()
	tok, err := record.SubjectToken(id)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	held := uint64(0)
	for {
		if stream, err := js.Stream(ctx, dshq.FeedStream); err == nil {
			if info, err := stream.Info(ctx, jetstream.WithSubjectFilter(dshq.FeedSubjectPrefix+"*."+tok+"."+string(feed.KindEvent))); err == nil {
				held = 0
				for _, c := range info.State.Subjects {
					held += c
				}
				if held >= n {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the feed holds %d event messages of %s, want %d", held, id, n)
		case <-tick.C:
		}
	}
}

// flakyProxy forwards TCP connections to target until cut, and refuses
// them while it is down.
type flakyProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex // guards conns, down
	conns  []net.Conn
	down   bool
	wg     sync.WaitGroup
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.setDown(true); p.wg.Wait() })
	return p
}

func (p *flakyProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
		go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
	}
}

// setDown cuts every connection and refuses new ones (down), or lets them
// through again.
func (p *flakyProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

func TestALiveStreamRidesOutTheUIsBusConnectionDropping(t *testing.T) {
	s := newStack(t)
	h := s.liveSession(t, "rides", 2)
	proxy := newFlakyProxy(t, strings.TrimPrefix(s.natsURL, "nats://"))
	nc, err := nats.Connect("nats://"+proxy.ln.Addr().String(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ui, err := New(nc, WithLogger(discardLogger()), WithStatusEvery(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui)
	defer srv.Close()
	defer ui.Close()
	flaky := &stack{srv: srv, ui: ui}
	st := flaky.openStream(t, liveURL(t, flaky.page(t, "/s/rides")), "")
	st.next(t, 5*time.Second, "status")

	proxy.setDown(true)
	for {
		ev := st.next(t, 10*time.Second, "status")
		if ev.Data["bus"] == "reconnecting" {
			break
		}
	}
	ctx := testContext(t)
	if _, err := h.Append(ctx, []dshq.Event{userEvent(2, "while the UI was cut off")}); err != nil {
		t.Fatal(err)
	}
	proxy.setDown(false)
	ev := st.next(t, 30*time.Second, "event")
	if ev.Data["seq"] != 2.0 {
		t.Fatalf("after the reconnect: %+v", ev.Data)
	}
	if _, err := h.Append(ctx, []dshq.Event{userEvent(3, "after")}); err != nil {
		t.Fatal(err)
	}
	if ev := st.next(t, 10*time.Second, "event"); ev.Data["seq"] != 3.0 {
		t.Fatalf("then: %+v (a repeat or a gap)", ev.Data)
	}
	for {
		if ev := st.next(t, 10*time.Second, "status"); ev.Data["bus"] == "connected" {
			break
		}
	}
}
