package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// record is a session record as the UI reads it: the wire's record plus
// the optional header member "harness" (which writer produced the session),
// which the vocabulary's Header does not carry yet.
type sessionRecord struct {
	dshq.SessionRecord
	Harness string
}

// UnmarshalJSON decodes a SessionRecord and its header's "harness".
func (r *sessionRecord) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &r.SessionRecord); err != nil {
		return err
	}
	var h struct {
		Header struct {
			Harness string `json:"harness"`
		} `json:"header"`
	}
	if json.Unmarshal(b, &h) == nil {
		r.Harness = h.Header.Harness
	}
	return nil
}

// recordPage is a sessions.list or sessions.filter reply.
type recordPage struct {
	Items      []sessionRecord `json:"items"`
	NextCursor string          `json:"nextCursor"`
	Generation uint64          `json:"generation"`
}

// searchItem is one sessions.search hit.
type searchItem struct {
	Record    sessionRecord
	BestMatch dshq.EventSearchHit
}

// rawHitPage decodes sessions.search items in two passes.
type rawHitPage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"nextCursor"`
	Generation uint64            `json:"generation"`
}

// call sends req to endpoint through the typed client's Raw and decodes the
// reply into out.
func (s *Server) call(ctx context.Context, endpoint string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	data, err := s.qc.Raw(ctx, endpoint, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode reply: %w", endpoint, err)
	}
	return nil
}

// listRecords calls sessions.list, or sessions.filter with filters.
func (s *Server) listRecords(ctx context.Context, filters []dshq.Filter, limit int, cursor string) (*recordPage, error) {
	var out recordPage
	var err error
	if len(filters) == 0 {
		err = s.call(ctx, wire.EndpointSessionsList, dshq.SessionListRequest{Limit: limit, Cursor: cursor}, &out)
	} else {
		err = s.call(ctx, wire.EndpointSessionsFilter, dshq.SessionFilterRequest{Filters: filters, Limit: limit, Cursor: cursor}, &out)
	}
	if err != nil {
		return nil, err
	}
	for _, r := range out.Items {
		s.sawHarness(r.Harness)
	}
	return &out, nil
}

// searchSessions calls sessions.search.
func (s *Server) searchSessions(ctx context.Context, req dshq.SessionSearchRequest) ([]searchItem, string, uint64, error) {
	var raw rawHitPage
	if err := s.call(ctx, wire.EndpointSessionsSearch, req, &raw); err != nil {
		return nil, "", 0, err
	}
	items := make([]searchItem, len(raw.Items))
	for i, b := range raw.Items {
		if err := json.Unmarshal(b, &items[i].Record); err != nil {
			return nil, "", 0, fmt.Errorf("sessions.search: decode reply: %w", err)
		}
		var bm struct {
			BestMatch dshq.EventSearchHit `json:"bestMatch"`
		}
		if err := json.Unmarshal(b, &bm); err != nil {
			return nil, "", 0, fmt.Errorf("sessions.search: decode reply: %w", err)
		}
		items[i].BestMatch = bm.BestMatch
		s.sawHarness(items[i].Record.Harness)
	}
	return items, raw.NextCursor, raw.Generation, nil
}

// stat is a session's counters and its record with the harness.
type stat struct {
	dshq.SessionStat
	Harness string
}

// statSession calls sessions.stat.
func (s *Server) statSession(ctx context.Context, id string) (*stat, error) {
	var out struct {
		dshq.SessionStat
		Session sessionRecord `json:"session"`
	}
	if err := s.call(ctx, wire.EndpointSessionsStat, dshq.SessionStatRequest{SessionID: id}, &out); err != nil {
		return nil, err
	}
	st := &stat{SessionStat: out.SessionStat, Harness: out.Session.Harness}
	st.Session = out.Session.SessionRecord
	s.sawHarness(st.Harness)
	return st, nil
}

// statAll calls sessions.stat for every id, fanout at a time; a session
// that has gone (or fails) is left out of the map.
func (s *Server) statAll(ctx context.Context, ids []string) map[string]*stat {
	out := make([]*stat, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fanout)
	for i, id := range ids {
		g.Go(func() error {
			st, err := s.statSession(gctx, id)
			if err == nil {
				out[i] = st
			}
			return nil
		})
	}
	_ = g.Wait()
	m := make(map[string]*stat, len(ids))
	for i, st := range out {
		if st != nil {
			m[ids[i]] = st
		}
	}
	return m
}

// httpError is a failure shown as an error page.
type httpError struct {
	status int
	title  string
	msg    string
	code   dshq.Code
}

func (e *httpError) Error() string { return e.msg }

// pageError maps a query failure to what the page says.
func pageError(err error) *httpError {
	var he *httpError
	if errors.As(err, &he) {
		return he
	}
	code := dshq.ErrorCode(err)
	e := &httpError{status: http.StatusBadGateway, title: "The query failed", msg: err.Error(), code: code}
	switch code {
	case dshq.CodeSessionNotFound:
		e.status, e.title = http.StatusNotFound, "No such session"
	case dshq.CodeEventNotFound:
		e.status, e.title = http.StatusNotFound, "No such event"
	case dshq.CodeInvalidQuery, dshq.CodeInvalidFilter, dshq.CodeInvalidLimit, dshq.CodeInvalidCursor,
		dshq.CodeInvalidWindow, dshq.CodeInvalidRequest:
		e.status, e.title = http.StatusBadRequest, "That request is not valid"
	case dshq.CodeStaleCursor:
		e.status, e.title = http.StatusConflict, "The results changed"
		e.msg = "The results changed since the first page (a session was reclassified or the projection was rebuilt). Start again from the first page."
	case dshq.CodeReplyTooLarge:
		e.status, e.title = http.StatusUnprocessableEntity, "Too many results to page"
	case dshq.CodeNotCaughtUp:
		e.status, e.title = http.StatusServiceUnavailable, "The projection is behind"
	case "":
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			e.status, e.title = http.StatusServiceUnavailable, "dshq's query service is not running"
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			e.status, e.title = http.StatusGatewayTimeout, "dshq did not answer in time"
		case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
			e.status, e.title = http.StatusServiceUnavailable, "The connection to dshq is down"
		}
	}
	return e
}
