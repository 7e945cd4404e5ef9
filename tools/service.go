package tools

import (
	"context"

	"github.com/dshq/dshq"
)

// Service is what the tools need from the trusted query API
// (docs/protocol.md#3-the-trusted-query-api). Implementations return failures
// as *dshq.Error with the taxonomy's codes; the tools sanitize every failure
// before a model sees it. query.Client is adapted to it by FromQueryClient;
// tests run on the real stack (package toolstest), decorated where they
// inject a failure.
type Service interface {
	// FilterSessions returns every session record matching the filters
	// (all pages), newest first.
	FilterSessions(ctx context.Context, filters []dshq.Filter) ([]dshq.SessionRecord, error)
	// SearchSessions answers one page of sessions.search.
	SearchSessions(ctx context.Context, req dshq.SessionSearchRequest) (dshq.SessionSearchPage, error)
	// SearchEvents answers one page of events.search.
	SearchEvents(ctx context.Context, req dshq.EventSearchRequest) (dshq.EventSearchPage, error)
	// TraceSession answers sessions.trace.
	TraceSession(ctx context.Context, sessionID string) (dshq.LineageTrace, error)
	// Titles answers sessions.titles: one result per unique id.
	Titles(ctx context.Context, sessionIDs []string) ([]dshq.TitleResult, error)
	// ReadEvent answers events.read.
	ReadEvent(ctx context.Context, req dshq.EventReadRequest) (dshq.EventWindow, error)
	// TraceEvent answers events.trace.
	TraceEvent(ctx context.Context, req dshq.EventTraceRequest) (dshq.EventTrace, error)
	// LastStepStart returns the seq of the session's last step/start event;
	// ok is false when it has none.
	LastStepStart(ctx context.Context, sessionID string) (seq int64, ok bool, err error)
	// AtGeneration returns the Service whose every query is answered by a
	// projection that has applied at least generation g (Caller.AtGeneration).
	AtGeneration(g uint64) Service
}
