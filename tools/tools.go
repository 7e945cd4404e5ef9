// Package tools implements the five model-facing session tools
// (docs/tools.md) — session_search, session_event_search, session_trace,
// session_event_trace and session_event_read — over the trusted query API:
// their JSON Schemas, argument validation in the original's order, workspace
// authorization (package authz), cursor-free collection, the error sanitizer
// and the exact text renderings.
//
// The caller is always named by the trusted harness (never by model
// arguments) and is resolved to its session header through the query API.
// Everything fails closed: a target that is hidden and one that does not
// exist give byte-identical answers.
package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/authz"
)

// Defaults of the tools' configuration (docs/tools.md).
const (
	DefaultMaxSearchResults = 100
	DefaultSearchTimeout    = 30 * time.Second
)

// Tools runs the five tools against a Service. It is safe for concurrent use.
type Tools struct {
	svc           Service
	maxResults    int
	searchTimeout time.Duration
	log           *slog.Logger
}

// Option configures Tools.
type Option func(*Tools)

// WithMaxSearchResults sets how many results a search collects before it
// reports the cap (default DefaultMaxSearchResults).
func WithMaxSearchResults(n int) Option { return func(t *Tools) { t.maxResults = n } }

// WithSearchTimeout sets the timeout of one search tool call (default
// DefaultSearchTimeout).
func WithSearchTimeout(d time.Duration) Option { return func(t *Tools) { t.searchTimeout = d } }

// WithLogger sets the logger that receives sanitized failures' diagnostics
// (default: discard).
func WithLogger(l *slog.Logger) Option { return func(t *Tools) { t.log = l } }

// New returns Tools over svc. It fails with SESSION_QUERY_INVALID_CONFIG
// when maxSearchResults is not a positive safe integer or the search timeout
// is not 1 ms..2 147 483 647 ms.
func New(svc Service, opts ...Option) (*Tools, error) {
	t := &Tools{
		svc:           svc,
		maxResults:    DefaultMaxSearchResults,
		searchTimeout: DefaultSearchTimeout,
		log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(t)
	}
	if svc == nil {
		return nil, dshq.Errorf(dshq.CodeInvalidConfig, "tools need a query service")
	}
	if t.maxResults < 1 || t.maxResults > maxSafe {
		return nil, dshq.Errorf(dshq.CodeInvalidConfig, "maxSearchResults must be a positive safe integer, got %d", t.maxResults)
	}
	if t.searchTimeout < time.Millisecond || t.searchTimeout > 2147483647*time.Millisecond {
		return nil, dshq.Errorf(dshq.CodeInvalidConfig, "searchTimeoutMs must be between 1 and 2147483647, got %v", t.searchTimeout)
	}
	if t.log == nil {
		return nil, dshq.Errorf(dshq.CodeInvalidConfig, "logger must not be nil")
	}
	return t, nil
}

// Result is one tool answer: the text a model sees. When IsError is true the
// text is "Error: <safe message>" and Code the failure's code.
type Result struct {
	Text    string
	IsError bool
	Code    dshq.Code
}

// Call runs tool name for caller (AsSession, AsWorkspace, either InTenant)
// with the model's argument object args. A failure is an
// error Result; the returned error is non-nil only when ctx ended, and is
// then ctx's cause (cancellation is preserved, never rendered or logged).
func (t *Tools) Call(ctx context.Context, caller Caller, name string, args json.RawMessage) (Result, error) {
	text, err := t.run(ctx, caller, name, args)
	if err == nil {
		return Result{Text: text}, nil
	}
	var c errCancelled
	if ctx.Err() != nil || errors.As(err, &c) {
		if ctx.Err() != nil {
			return Result{}, context.Cause(ctx)
		}
		err = c.cause // an inner deadline (the search timeout)
	}
	var e *dshq.Error
	if !errors.As(err, &e) {
		e = &dshq.Error{Code: dshq.CodeToolFailed, Message: msgGeneric}
	}
	return Result{Text: "Error: " + e.Message, IsError: true, Code: e.Code}, nil
}

func (t *Tools) run(ctx context.Context, by Caller, name string, raw json.RawMessage) (string, error) {
	if by.minGeneration > 0 {
		at := *t
		at.svc = t.svc.AtGeneration(by.minGeneration)
		t = &at
	}
	s, ok := specByName(name)
	if !ok {
		return "", dshq.Errorf(dshq.CodeInvalidArgs, "invalid arguments: unknown tool %q", name)
	}
	a, err := s.checkSchema(raw)
	if err != nil {
		return "", err
	}
	switch name {
	case NameSessionSearch, NameSessionEventSearch:
		sctx, cancel := context.WithTimeoutCause(ctx, t.searchTimeout, dshq.Errorf(dshq.CodeAborted,
			"session search timed out after %d ms", t.searchTimeout.Milliseconds()))
		defer cancel()
		if name == NameSessionSearch {
			return t.sessionSearch(sctx, by, a)
		}
		return t.sessionEventSearch(sctx, by, a)
	case NameSessionTrace:
		return t.sessionTrace(ctx, by, a)
	case NameSessionEventTrace:
		return t.sessionEventTrace(ctx, by, a)
	default:
		return t.sessionEventRead(ctx, by, a)
	}
}

// caller resolves the trusted caller to its session record. No id, an id
// the projection does not hold (an invalid id among them), or (for a call bound to a tenant,
// Caller.InTenant) a session of another tenant is
// SESSION_QUERY_TOOL_MISSING_AGENT, its message saying which (a session of
// another tenant reads as an id the projection does not hold).
func (t *Tools) caller(ctx context.Context, by Caller) (authz.Caller, error) {
	if by.asWorkspace {
		return authz.NewWorkspaceCaller(by.tenant, by.workspace)
	}
	callerID := by.session
	if callerID == "" {
		return authz.Caller{}, authz.ErrNoCaller()
	}
	if dshq.SessionIDProblem(callerID) != "" {
		// Not a session id (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys): no session is so named.
		return authz.Caller{}, authz.ErrUnknownCaller()
	}
	recs, err := t.svc.FilterSessions(ctx, []dshq.Filter{{Kind: dshq.FilterID, Values: []*string{dshq.Str(callerID)}}})
	if err != nil {
		return authz.Caller{}, sanitize(ctx, t.log, "resolve caller", err)
	}
	if len(recs) != 1 {
		return authz.Caller{}, authz.ErrUnknownCaller()
	}
	if by.bound {
		return authz.NewTenantCaller(by.tenant, callerID, recs[0])
	}
	return authz.NewCaller(callerID, recs[0])
}

// target resolves the session a single-session tool acts on: session_id
// (when given) or the caller's own. A target other than the caller is
// pre-authorized with one filter read; hidden and missing targets fail alike.
func (t *Tools) target(ctx context.Context, c authz.Caller, a args) (string, error) {
	id, ok := a.str("session_id")
	if !ok && c.IsWorkspace() {
		return "", dshq.Errorf(dshq.CodeInvalidArgs, authz.MsgNeedsSessionID)
	}
	if !ok || id == c.ID() {
		return c.ID(), nil
	}
	filters, err := c.TargetFilters(id)
	if err != nil {
		return "", err
	}
	if dshq.SessionIDProblem(id) != "" {
		return "", authzMissing(c, id) // no session is so named
	}
	recs, err := t.svc.FilterSessions(ctx, filters)
	if err != nil {
		return "", sanitize(ctx, t.log, "authorize target", err)
	}
	if _, err := c.AuthorizeTarget(id, recs); err != nil {
		return "", err
	}
	return id, nil
}

// authzMissing is the answer for a target the projection does not hold:
// the same as for a hidden one.
func authzMissing(c authz.Caller, id string) error {
	_, err := c.AuthorizeTarget(id, nil)
	return err
}

// titles reads the titles of ids in one batch and renders each as a label:
// the title, "untitled", or "untitled (title unavailable: <CODE>)" when that
// id's read failed. Every fulfilled observation is re-checked against the
// caller; a hidden one fails the whole call.
func (t *Tools) titles(ctx context.Context, c authz.Caller, ids []string) (map[string]string, error) {
	ids = authz.Dedupe(ids)
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	results, err := t.svc.Titles(ctx, ids)
	if err != nil {
		return nil, sanitize(ctx, t.log, "read titles", err)
	}
	for _, r := range results {
		if _, done := out[r.SessionID]; done || !contains(ids, r.SessionID) {
			continue
		}
		switch {
		case r.Status == "fulfilled" && r.Value != nil:
			if err := c.Recheck(r.SessionID, r.Value.Session); err != nil {
				return nil, err
			}
			out[r.SessionID] = "untitled"
			if r.Value.Title != nil && r.Value.Title.Title != "" {
				out[r.SessionID] = r.Value.Title.Title
			}
		default:
			code := dshq.CodeToolFailed
			if r.Reason != nil {
				code = safeCode(r.Reason.Code)
				logSafely(ctx, t.log, "session title read failed", slog.String("session", r.SessionID),
					slog.String("code", string(r.Reason.Code)), slog.String("diagnostic", r.Reason.Message))
			}
			out[r.SessionID] = fmt.Sprintf("untitled (title unavailable: %s)", code)
		}
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			out[id] = fmt.Sprintf("untitled (title unavailable: %s)", dshq.CodeToolFailed)
		}
	}
	return out, nil
}
