package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/record"
)

// Live streams are Server-Sent Events. Each data line is one JSON object;
// the event names are:
//
//	event    {seq, html, count}          a new event of the session (its row)
//	surface  {seq, to, replacedBy?}      an event's surface changed
//	title    {id?, title}                a session's title changed
//	lease    {id?, live}                 a session became live or stopped
//	session  {id, html}                  a new session (its list row)
//	status   {pending, bus, epoch, generation}  every statusEvery
//	resync   {reason}                    the page must be reloaded
//
// The SSE id of a message is its feed position (the list's: the positions
// of its three subscriptions, "s.t.l"); a reconnecting EventSource sends it
// back as Last-Event-ID (or the script as ?resume=), and the stream goes on
// exactly after it.

// sse writes one event stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) (*sse, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return nil, err
	}
	return &sse{w: w, rc: rc}, rc.Flush()
}

// send writes one event; id "" sends none.
func (s *sse) send(event, id string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if id != "" {
		sb.WriteString("id: " + id + "\n")
	}
	sb.WriteString("event: " + event + "\ndata: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	if _, err := s.w.Write([]byte(sb.String())); err != nil {
		return err
	}
	return s.rc.Flush()
}

// mark moves the stream's last event id to id without an event: the
// browser resumes after a message the page had no use for.
func (s *sse) mark(id string) error {
	if _, err := fmt.Fprintf(s.w, "id: %s\n\n", id); err != nil {
		return err
	}
	return s.rc.Flush()
}

// delivery is one result of a subscription's Next.
type delivery struct {
	sub int
	m   feed.Message
	err error
}

// follower runs feed subscriptions for one stream and hands their messages
// to the handler through ch. Each subscription is resubscribed after its
// last delivered position when it fails (the bus connection dropped).
type follower struct {
	s     *Server
	ch    chan delivery
	state chan string // the bus state changes: "connected", "reconnecting"
}

// follow reads sub (started at start) until ctx ends, sending to ch; on a
// failure it says so on state and resubscribes with backoff: after the last
// delivered position, or at start when nothing was delivered yet.
func (f *follower) follow(ctx context.Context, i int, filter feed.Filter, start feed.Start, sub *feed.Subscription) {
	defer func() { sub.Stop() }()
	var last uint64
	delivered := false
	for {
		m, err := sub.Next(ctx)
		if ctx.Err() != nil {
			return
		}
		var mal *feed.MalformedError
		switch {
		case err == nil:
			last, delivered = m.Position, true
			select {
			case f.ch <- delivery{sub: i, m: m}:
			case <-ctx.Done():
				return
			}
			continue
		case errors.As(err, &mal):
			last, delivered = mal.Position, true
			f.s.log.Warn("web: skipping a malformed feed message", "err", err)
			continue
		}
		f.s.log.Warn("web: live feed subscription failed; resubscribing", "err", err)
		select {
		case f.state <- "reconnecting":
		case <-ctx.Done():
			return
		}
		sub.Stop()
		if delivered {
			start = feed.AfterPosition(last)
		}
		sub = f.resubscribe(ctx, i, filter, start)
		if sub == nil {
			return
		}
		select {
		case f.state <- "connected":
		case <-ctx.Done():
			sub.Stop()
			return
		}
	}
}

// resubscribe retries a subscription from start until it succeeds (nil
// when ctx ends); a start point no longer retained is delivered as an
// error, which makes the page resync.
func (f *follower) resubscribe(ctx context.Context, i int, filter feed.Filter, start feed.Start) *feed.Subscription {
	wait := 250 * time.Millisecond
	for {
		sub, err := feed.Tail(ctx, f.s.js, filter, start, feed.WithSubscribeStream(f.s.feedStream))
		if err == nil {
			return sub
		}
		if errors.Is(err, feed.ErrNotRetained) {
			select {
			case f.ch <- delivery{sub: i, err: err}:
			case <-ctx.Done():
			}
			return nil
		}
		select {
		case <-time.After(wait):
			wait = min(2*wait, 5*time.Second)
		case <-ctx.Done():
			return nil
		}
	}
}

// resumePoints parses the stream's resume point: the SSE id of the last
// message the page saw (Last-Event-ID, or ?resume= from the script), one
// position per subscription. Without one the stream starts after the page's
// generation (?after=).
func resumePoints(r *http.Request, n int) ([]feed.Start, error) {
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("resume")
	}
	starts := make([]feed.Start, n)
	if last != "" {
		parts := strings.Split(last, ".")
		if len(parts) != n {
			return nil, badRequest("The resume point %q does not name %d positions.", last, n)
		}
		for i, p := range parts {
			pos, err := strconv.ParseUint(p, 10, 64)
			if err != nil {
				return nil, badRequest("The resume point %q is not a feed position.", last)
			}
			starts[i] = feed.AfterPosition(pos)
		}
		return starts, nil
	}
	after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if err != nil {
		return nil, badRequest("A live stream needs ?after=<generation>.")
	}
	for i := range starts {
		starts[i] = feed.AfterGeneration(after)
	}
	return starts, nil
}

// stream runs the subscriptions of filters from starts and calls handle
// with each delivery until the client goes, the server closes, or handle
// fails; it sends status events on its own.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, filters []feed.Filter, starts []feed.Start,
	handle func(out *sse, d delivery, ids []uint64) error) {
	if !s.startStream() {
		s.fail(w, r, &httpError{status: http.StatusServiceUnavailable, title: "Shutting down", msg: "This dshq UI is shutting down."})
		return
	}
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	subs := make([]*feed.Subscription, len(filters))
	for i, f := range filters {
		sub, err := feed.Tail(ctx, s.js, f, starts[i], feed.WithSubscribeStream(s.feedStream))
		if err != nil {
			for _, o := range subs[:i] {
				o.Stop()
			}
			if errors.Is(err, feed.ErrNotRetained) {
				if out, err := startSSE(w); err == nil {
					_ = out.send("resync", "", map[string]string{"reason": "the live feed no longer holds what this page needs"})
				}
				return
			}
			s.failStream(w, r, err)
			return
		}
		subs[i] = sub
	}
	out, err := startSSE(w)
	if err != nil {
		for _, sub := range subs {
			sub.Stop()
		}
		return
	}
	fl := &follower{s: s, ch: make(chan delivery), state: make(chan string)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitAll(ctx, fl, filters, starts, subs)
	}()
	defer func() { cancel(); <-done }()

	ids := make([]uint64, len(filters))
	for i, sub := range subs {
		ids[i] = startPosition(sub)
	}
	pending := make([]uint64, len(filters))
	bus, epoch, gen := "connected", "", uint64(0)
	status := func() error {
		var p uint64
		for _, n := range pending {
			p += n
		}
		b := bus
		if s.nc.Status() != nats.CONNECTED {
			b = "reconnecting"
		}
		return out.send("status", "", map[string]any{"pending": p, "bus": b, "epoch": epoch, "generation": gen})
	}
	if status() != nil {
		return
	}
	tick := time.NewTicker(s.statusEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if status() != nil {
				return
			}
		case b := <-fl.state:
			bus = b
			if status() != nil {
				return
			}
		case d := <-fl.ch:
			if d.err != nil {
				_ = out.send("resync", "", map[string]string{"reason": d.err.Error()})
				return
			}
			if epoch != "" && d.m.Epoch != "" && d.m.Epoch != epoch {
				_ = out.send("resync", "", map[string]string{"reason": "the projection was rebuilt"})
				return
			}
			if d.m.Epoch != "" {
				epoch = d.m.Epoch
			}
			gen = max(gen, d.m.Generation)
			ids[d.sub], pending[d.sub] = d.m.Position, d.m.Pending
			if err := handle(out, d, ids); err != nil {
				return
			}
			if d.m.Pending == 0 || d.m.Pending%100 == 0 {
				if status() != nil {
					return
				}
			}
		}
	}
}

// failStream answers a stream that could not start, as s.fail does,
// unless the page went away meanwhile (closed or navigated during the
// handshake): a client gone is no failure of the server, so it is neither
// answered nor logged above debug.
func (s *Server) failStream(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		s.log.Debug("web: the page left before its live stream started", "path", r.URL.Path, "err", err)
		return
	}
	s.fail(w, r, err)
}

// startPosition is the position a subscription resumes after before its
// first delivery: the one asked for, or the one before its first message.
func startPosition(sub *feed.Subscription) uint64 {
	if p := sub.StartPosition(); p > 0 {
		return p - 1
	}
	return 0
}

// waitAll follows every subscription and returns when all have stopped.
func waitAll(ctx context.Context, fl *follower, filters []feed.Filter, starts []feed.Start, subs []*feed.Subscription) {
	done := make(chan struct{}, len(subs))
	for i := range subs {
		go func() {
			defer func() { done <- struct{}{} }()
			fl.follow(ctx, i, filters[i], starts[i], subs[i])
		}()
	}
	for range subs {
		<-done
	}
}

func joinIDs(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(parts, ".")
}

// sessionLive streams one session's events, surface changes, title and
// lease, resumed after the page's generation.
func (s *Server) sessionLive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := record.SubjectToken(id); err != nil {
		s.fail(w, r, badRequest("%q is not a session id.", id))
		return
	}
	starts, err := resumePoints(r, 1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The inherited prefix is known once per stream.
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	st, err := s.statSession(ctx, id)
	cancel()
	if err != nil {
		s.failStream(w, r, err)
		return
	}
	filters := []feed.Filter{{SessionID: id}}
	conv := r.URL.Query().Get("view") == "conv"
	s.stream(w, r, filters, starts, func(out *sse, d delivery, ids []uint64) error {
		m, sid := d.m, joinIDs(ids)
		switch m.Kind {
		case feed.KindEvent:
			v, err := s.liveView(r.Context(), id, m.Event, st.InheritedEventCount)
			var html string
			var place convLive
			if err == nil {
				html, err = s.fragment("event-row", v)
			}
			if err == nil && conv {
				place, err = s.liveConv(v, html) // conversation_live.go
			}
			if err != nil {
				// Better a reload than a page with a hole in it.
				s.log.Warn("web: cannot render a live event", "session", id, "seq", m.Event.Seq, "err", err)
				_ = out.send("resync", "", map[string]string{"reason": "event " + strconv.FormatInt(m.Event.Seq, 10) + " could not be read"})
				return err
			}
			data := map[string]any{"seq": m.Event.Seq, "html": html, "count": m.Event.Seq + 1}
			if conv {
				data["conv"] = place
			}
			return out.send("event", sid, data)
		case feed.KindSurface:
			return out.send("surface", sid, map[string]any{"seq": m.Surface.Seq, "to": m.Surface.To, "replacedBy": m.Surface.ReplacedBy})
		case feed.KindTitle:
			return out.send("title", sid, map[string]any{"title": clean(m.Title.Title)})
		case feed.KindLease:
			return out.send("lease", sid, map[string]any{"live": m.Lease.Live})
		}
		return out.mark(sid)
	})
}

// liveView renders an event of the feed (reading it with events.read when
// the feed left the record out).
func (s *Server) liveView(ctx context.Context, id string, e *feed.EventBody, inherited int64) (eventView, error) {
	raw := e.Raw
	if e.RawOmitted || len(raw) == 0 {
		ctx, cancel := context.WithTimeout(ctx, queryTimeout)
		defer cancel()
		w, err := s.qc.ReadEvent(ctx, dshq.EventReadRequest{SessionID: id, Seq: e.Seq})
		if err != nil {
			return eventView{}, err
		}
		raw = w.Target.Raw
	}
	var ev dshq.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return eventView{}, fmt.Errorf("event %d: %w", e.Seq, err)
	}
	v := renderEvent(id, ev, inlineBytes, traceURL(id, ev.Seq)+"?all=1")
	v.Surface, v.Invalid, v.Inherited = string(e.Surface), e.Invalid, e.Seq < inherited
	return v, nil
}

// listLive streams new sessions, titles and lease changes for the list,
// confined to the list's workspace when it has one.
func (s *Server) listLive(w http.ResponseWriter, r *http.Request) {
	f := parseFilters(r.URL.Query())
	if _, err := f.session(); err != nil {
		s.fail(w, r, err)
		return
	}
	starts, err := resumePoints(r, 3)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ws := ""
	if f.Cwd != "" {
		cwd := f.Cwd
		ws = record.WorkspaceKey(&cwd)
	}
	kinds := []feed.Kind{feed.KindSession, feed.KindTitle, feed.KindLease}
	filters := make([]feed.Filter, len(kinds))
	for i, k := range kinds {
		filters[i] = feed.Filter{Workspace: ws, Kinds: []feed.Kind{k}}
	}
	s.stream(w, r, filters, starts, func(out *sse, d delivery, ids []uint64) error {
		m, sid := d.m, joinIDs(ids)
		switch m.Kind {
		case feed.KindSession:
			rec := sessionRecord{SessionRecord: m.Session.SessionRecord}
			ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
			st, err := s.statSession(ctx, m.SessionID)
			cancel()
			if err == nil {
				rec = sessionRecord{SessionRecord: st.Session, Harness: st.Harness}
			}
			if !f.keeps(rec, true) {
				return out.mark(sid)
			}
			row := newRow(rec, st)
			row.HasCount = true
			html, err := s.fragment("session-row", row)
			if err != nil {
				return err
			}
			return out.send("session", sid, map[string]any{"id": m.SessionID, "html": html})
		case feed.KindTitle:
			return out.send("title", sid, map[string]any{"id": m.SessionID, "title": clean(m.Title.Title)})
		case feed.KindLease:
			return out.send("lease", sid, map[string]any{"id": m.SessionID, "live": m.Lease.Live})
		}
		return out.mark(sid)
	})
}
