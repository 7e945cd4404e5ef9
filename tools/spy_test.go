package tools_test

import (
	"context"
	"sync"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tools"
)

// spy decorates the real service at the tools' seam: it records the calls
// the tools make (op names are the query API's endpoints), fails those an
// injected fault names, and can shrink the pages of sessions.search. Every
// answer is the real engine's.
type spy struct {
	tools.Service
	*spied
}

// spied is what a spy records and injects, shared by the spies of one
// service at every generation (AtGeneration).
type spied struct {
	mu    sync.Mutex // guards the fields below
	calls []served
	// fail, when set, returns the failure of a call to op (nil: answer it).
	fail func(op string) error
	// pageSize, when not 0, is the limit every session search asks for.
	pageSize int
}

// served is one recorded call.
type served struct {
	Op      string
	Request any
}

func newSpy(svc tools.Service) *spy { return &spy{Service: svc, spied: &spied{}} }

// AtGeneration records the generation asked for (op "at generation") and
// returns the spy of the real service at it.
func (s *spy) AtGeneration(g uint64) tools.Service {
	s.mu.Lock()
	s.calls = append(s.calls, served{Op: "at generation", Request: g})
	s.mu.Unlock()
	return &spy{Service: s.Service.AtGeneration(g), spied: s.spied}
}

// failWith makes every call for which fn returns an error fail with it.
func (s *spy) failWith(fn func(op string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fn
}

func (s *spy) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// Calls returns the recorded calls.
func (s *spy) Calls() []served {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]served(nil), s.calls...)
}

// begin records a call and returns an injected failure, if any.
func (s *spy) begin(ctx context.Context, op string, req any) error {
	s.mu.Lock()
	s.calls = append(s.calls, served{Op: op, Request: req})
	fail := s.fail
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if fail != nil {
		return fail(op)
	}
	return nil
}

func (s *spy) FilterSessions(ctx context.Context, f []dshq.Filter) ([]dshq.SessionRecord, error) {
	if err := s.begin(ctx, "sessions.filter", f); err != nil {
		return nil, err
	}
	return s.Service.FilterSessions(ctx, f)
}

func (s *spy) SearchSessions(ctx context.Context, req dshq.SessionSearchRequest) (dshq.SessionSearchPage, error) {
	if err := s.begin(ctx, "sessions.search", req); err != nil {
		return dshq.SessionSearchPage{}, err
	}
	s.mu.Lock()
	if s.pageSize > 0 {
		req.Limit = s.pageSize
	}
	s.mu.Unlock()
	return s.Service.SearchSessions(ctx, req)
}

func (s *spy) SearchEvents(ctx context.Context, req dshq.EventSearchRequest) (dshq.EventSearchPage, error) {
	if err := s.begin(ctx, "events.search", req); err != nil {
		return dshq.EventSearchPage{}, err
	}
	return s.Service.SearchEvents(ctx, req)
}

func (s *spy) TraceSession(ctx context.Context, id string) (dshq.LineageTrace, error) {
	if err := s.begin(ctx, "sessions.trace", id); err != nil {
		return dshq.LineageTrace{}, err
	}
	return s.Service.TraceSession(ctx, id)
}

func (s *spy) Titles(ctx context.Context, ids []string) ([]dshq.TitleResult, error) {
	if err := s.begin(ctx, "sessions.titles", ids); err != nil {
		return nil, err
	}
	return s.Service.Titles(ctx, ids)
}

func (s *spy) ReadEvent(ctx context.Context, req dshq.EventReadRequest) (dshq.EventWindow, error) {
	if err := s.begin(ctx, "events.read", req); err != nil {
		return dshq.EventWindow{}, err
	}
	return s.Service.ReadEvent(ctx, req)
}

func (s *spy) TraceEvent(ctx context.Context, req dshq.EventTraceRequest) (dshq.EventTrace, error) {
	if err := s.begin(ctx, "events.trace", req); err != nil {
		return dshq.EventTrace{}, err
	}
	return s.Service.TraceEvent(ctx, req)
}

func (s *spy) LastStepStart(ctx context.Context, id string) (int64, bool, error) {
	if err := s.begin(ctx, "sessions.stat", id); err != nil {
		return 0, false, err
	}
	return s.Service.LastStepStart(ctx, id)
}
