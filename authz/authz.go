// Package authz holds the workspace rules of the model-facing tools (UPSTREAM
// §6.4): who the caller is, which session headers it may see, how a parent
// filter is pre-authorized so that hidden and missing sessions are
// indistinguishable, and how a lineage is pruned at the workspace boundary.
//
// It is pure: it takes values (headers and records observed from the
// projection, never from model arguments) and returns values. Every rule fails
// closed: anything not positively authorized is hidden.
package authz

import (
	"github.com/dshq/dshq"
)

// Safe messages of the authorization failures. They never name a target.
const (
	MsgMissingAgent   = "session query tools require an agent-bound caller"
	MsgUnauthorized   = "session target is outside the caller workspace"
	MsgNoWorkspace    = "cross-session search is unavailable because the caller session has no workspace"
	MsgNoCurrentStep  = "current-session search requires an active step boundary"
	MsgOutsideParent  = "[outside workspace]"
	MsgBoundaryMarker = "[outside workspace boundary]"
	MsgSubtreeMarker  = "[outside workspace subtree]"
)

// ErrMissingAgent returns the SESSION_QUERY_TOOL_MISSING_AGENT error.
func ErrMissingAgent() *dshq.Error {
	return &dshq.Error{Code: dshq.CodeToolMissingAgent, Message: MsgMissingAgent}
}

// ErrUnauthorized returns the SESSION_QUERY_TOOL_UNAUTHORIZED error for a
// target outside the caller's workspace (or missing: the two are one answer).
func ErrUnauthorized() *dshq.Error {
	return &dshq.Error{Code: dshq.CodeToolUnauthorized, Message: MsgUnauthorized}
}

// ErrNoWorkspace returns the SESSION_QUERY_TOOL_UNAUTHORIZED error of a
// cross-session search by a caller without a cwd.
func ErrNoWorkspace() *dshq.Error {
	return &dshq.Error{Code: dshq.CodeToolUnauthorized, Message: MsgNoWorkspace}
}

// Caller is the calling agent: its session header as the projection holds it.
// The zero Caller is no caller.
type Caller struct {
	header dshq.Header
	ok     bool
}

// NewCaller returns the caller whose session header was observed in the
// projection under the id the trusted harness named. It fails with
// SESSION_QUERY_TOOL_MISSING_AGENT when id is empty or the observed header is
// not that session's.
func NewCaller(id string, observed dshq.Header) (Caller, error) {
	if id == "" || observed.ID != id {
		return Caller{}, ErrMissingAgent()
	}
	return Caller{header: observed, ok: true}, nil
}

// ID returns the caller's session id.
func (c Caller) ID() string { return c.header.ID }

// Header returns the caller's session header.
func (c Caller) Header() dshq.Header { return c.header }

// Workspace returns the caller's cwd and whether it has one.
func (c Caller) Workspace() (string, bool) {
	if !c.ok {
		return "", false
	}
	return c.header.CwdOrEmpty()
}

// Authorized reports whether the caller may see a session with header h: its
// own session (with an equal cwd, both possibly absent), or any session whose
// cwd is exactly the caller's (string equality; symlink-equivalent paths do
// not match). A caller without a cwd sees only itself.
func (c Caller) Authorized(h dshq.Header) bool {
	if !c.ok {
		return false
	}
	hc, hok := h.CwdOrEmpty()
	cc, cok := c.header.CwdOrEmpty()
	if h.ID == c.header.ID && hok == cok && hc == cc {
		return true
	}
	return cok && hok && hc == cc
}

// Recheck re-checks a payload's header, observed in the same read as the
// payload, against the target the caller asked for. It fails with
// SESSION_QUERY_TOOL_UNAUTHORIZED when the header is another session's or is
// no longer authorized (a target replaced between preflight and use).
func (c Caller) Recheck(targetID string, observed dshq.Header) error {
	if observed.ID != targetID || !c.Authorized(observed) {
		return ErrUnauthorized()
	}
	return nil
}

// TargetFilters returns the filters of the preflight of a direct target that
// is not the caller: the target id within the caller's workspace. It fails
// with SESSION_QUERY_TOOL_UNAUTHORIZED when the caller has no cwd.
func (c Caller) TargetFilters(targetID string) ([]dshq.Filter, error) {
	cwd, ok := c.Workspace()
	if !ok {
		return nil, ErrUnauthorized()
	}
	return []dshq.Filter{
		{Kind: dshq.FilterID, Values: []*string{dshq.Str(targetID)}},
		{Kind: dshq.FilterCwd, Values: []*string{dshq.Str(cwd)}},
	}, nil
}

// AuthorizeTarget decides a direct target from the records its preflight
// (TargetFilters) returned: exactly one authorized record of that id, else
// SESSION_QUERY_TOOL_UNAUTHORIZED. It returns the authorized record.
func (c Caller) AuthorizeTarget(targetID string, found []dshq.SessionRecord) (dshq.SessionRecord, error) {
	if len(found) != 1 || c.Recheck(targetID, found[0].Header) != nil {
		return dshq.SessionRecord{}, ErrUnauthorized()
	}
	return found[0], nil
}

// SearchScope returns the session filter every cross-session search carries:
// the caller's cwd. It fails with SESSION_QUERY_TOOL_UNAUTHORIZED (no
// workspace) when the caller has no cwd.
func (c Caller) SearchScope() (dshq.Filter, error) {
	cwd, ok := c.Workspace()
	if !ok {
		return dshq.Filter{}, ErrNoWorkspace()
	}
	return dshq.Filter{Kind: dshq.FilterCwd, Values: []*string{dshq.Str(cwd)}}, nil
}

// AcceptHit reports whether a cross-session search hit may be shown: an
// authorized session other than the caller's own.
func (c Caller) AcceptHit(h dshq.Header) bool {
	return h.ID != c.header.ID && c.Authorized(h)
}
