package tools

import (
	"context"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
)

// FromQueryClient adapts the trusted query API's Go client to Service.
// Failures are the client's (*dshq.Error for a service failure).
func FromQueryClient(c *query.Client) Service { return queryService{c: c} }

// queryService asks c; opts carry the minimum generation of its requests
// (AtGeneration).
type queryService struct {
	c    *query.Client
	opts []query.CallOption
}

// AtGeneration returns the service whose requests carry minGeneration g.
func (q queryService) AtGeneration(g uint64) Service {
	return queryService{q.c, []query.CallOption{query.WithMinGeneration(g)}}
}

// FilterSessions follows every page of sessions.filter.
func (q queryService) FilterSessions(ctx context.Context, filters []dshq.Filter) ([]dshq.SessionRecord, error) {
	var out []dshq.SessionRecord
	req := dshq.SessionFilterRequest{Filters: filters, Limit: dshq.MaxListLimit}
	err := query.Follow(q.opts, func(cursor string, opts []query.CallOption) (string, uint64, error) {
		req.Cursor = cursor
		p, err := q.c.FilterSessions(ctx, req, opts...)
		if err != nil {
			return "", 0, err
		}
		out = append(out, p.Items...)
		return p.NextCursor, p.Generation, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (q queryService) SearchSessions(ctx context.Context, req dshq.SessionSearchRequest) (dshq.SessionSearchPage, error) {
	p, err := q.c.SearchSessions(ctx, req, q.opts...)
	if err != nil {
		return dshq.SessionSearchPage{}, err
	}
	return *p, nil
}

func (q queryService) SearchEvents(ctx context.Context, req dshq.EventSearchRequest) (dshq.EventSearchPage, error) {
	p, err := q.c.SearchEvents(ctx, req, q.opts...)
	if err != nil {
		return dshq.EventSearchPage{}, err
	}
	return *p, nil
}

func (q queryService) TraceSession(ctx context.Context, id string) (dshq.LineageTrace, error) {
	p, err := q.c.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: id}, q.opts...)
	if err != nil {
		return dshq.LineageTrace{}, err
	}
	return *p, nil
}

func (q queryService) Titles(ctx context.Context, ids []string) ([]dshq.TitleResult, error) {
	p, err := q.c.ReadTitles(ctx, dshq.SessionTitlesRequest{SessionIDs: ids}, q.opts...)
	if err != nil {
		return nil, err
	}
	return p.Items, nil
}

// ReadEvent reads a window; dshq.Event keeps each record's exact bytes.
func (q queryService) ReadEvent(ctx context.Context, req dshq.EventReadRequest) (dshq.EventWindow, error) {
	p, err := q.c.ReadEvent(ctx, req, q.opts...)
	if err != nil {
		return dshq.EventWindow{}, err
	}
	return *p, nil
}

func (q queryService) TraceEvent(ctx context.Context, req dshq.EventTraceRequest) (dshq.EventTrace, error) {
	p, err := q.c.TraceEvent(ctx, req, q.opts...)
	if err != nil {
		return dshq.EventTrace{}, err
	}
	return *p, nil
}

// LastStepStart reads the session's last step/start seq from sessions.stat:
// one request whatever the length of the log. An invalid session is
// SESSION_QUERY_INVALID_SURFACE, as its event reads are.
func (q queryService) LastStepStart(ctx context.Context, id string) (int64, bool, error) {
	st, err := q.c.StatSession(ctx, dshq.SessionStatRequest{SessionID: id}, q.opts...)
	if err != nil {
		return 0, false, err
	}
	if st.InvalidFromSeq != nil {
		return 0, false, dshq.Errorf(dshq.CodeInvalidSurface, "invalid session surface: session %q is invalid from seq %d: %s",
			id, *st.InvalidFromSeq, st.InvalidReason)
	}
	if st.LastStepStartSeq == nil {
		return 0, false, nil
	}
	return *st.LastStepStartSeq, true, nil
}
