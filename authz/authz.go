// Package authz holds the workspace rules of the model-facing tools
// (docs/tools.md#workspace-authorization): who the caller is, which sessions it
// may see, how a parent filter is pre-authorized so that hidden and missing
// sessions are indistinguishable, and how a lineage is pruned at the workspace
// boundary.
//
// A workspace is a tenant and a cwd
// (docs/protocol.md#4-the-model-facing-tools): a caller sees only sessions of
// its own tenant (the tenant whose log subject holds them; none for the
// untenanted namespace), and of those only its own session and the sessions
// with exactly its cwd. A call that arrived on a tenant's tool subjects
// (NewTenantCaller) is further bound to that tenant: a caller of another tenant
// is no caller at all.
//
// It is pure: it takes values (records observed from the projection, never
// from model arguments) and returns values. Every rule fails closed:
// anything not positively authorized is hidden.
package authz

import (
	"github.com/dshq/dshq"
)

// Safe messages of the authorization failures. They never name a target.
const (
	MsgMissingAgent = "session query tools require an agent-bound caller"
	// MsgNoCaller and MsgUnknownCaller are MsgMissingAgent saying which it
	// is: no caller was named, or the one named is not a stored session.
	MsgNoCaller       = MsgMissingAgent + ": no caller session is named"
	MsgUnknownCaller  = MsgMissingAgent + ": the caller session is not stored (or not projected yet)"
	MsgUnauthorized   = "session target is outside the caller workspace"
	MsgNoWorkspace    = "cross-session search is unavailable because the caller session has no workspace"
	MsgNoCurrentStep  = "current-session search requires an active step boundary"
	MsgOutsideParent  = "[outside workspace]"
	MsgBoundaryMarker = "[outside workspace boundary]"
	MsgSubtreeMarker  = "[outside workspace subtree]"
	// MsgBadWorkspace is MsgMissingAgent for a workspace caller whose
	// workspace is not an absolute path.
	MsgBadWorkspace = MsgMissingAgent + ": the caller workspace is not an absolute path"
	// MsgNeedsSessionID is the failure of a single-session tool called by
	// a workspace caller without session_id: a workspace has no session of
	// its own to default to.
	MsgNeedsSessionID = "invalid arguments: session_id is required: the caller is a workspace, not a session"
)

// ErrNoCaller returns the SESSION_QUERY_TOOL_MISSING_AGENT error of a call
// that names no caller.
func ErrNoCaller() *dshq.Error {
	return &dshq.Error{Code: dshq.CodeToolMissingAgent, Message: MsgNoCaller}
}

// ErrUnknownCaller returns the SESSION_QUERY_TOOL_MISSING_AGENT error of a
// caller id that names no stored session.
func ErrUnknownCaller() *dshq.Error {
	return &dshq.Error{Code: dshq.CodeToolMissingAgent, Message: MsgUnknownCaller}
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

// Caller is the calling agent: its session header and tenant as the
// projection holds them, or a workspace (NewWorkspaceCaller). The zero
// Caller is no caller.
type Caller struct {
	header dshq.Header
	tenant string
	ok     bool
	// workspace is true for a workspace caller: header holds only its cwd.
	workspace bool
}

// NewWorkspaceCaller returns a workspace caller: no session of its own, the
// workspace cwd of tenant ("" for the untenanted namespace), named by
// whoever configured the harness that calls (dshq mcp --workspace), never
// by the model. It sees exactly the sessions of tenant whose cwd is cwd
// (string equality, as for a session caller), and excludes none of them
// from search; a single-session tool needs session_id. A cwd that is not an
// absolute path (dshq.AbsoluteCwd: POSIX, Windows drive-letter or UNC) fails
// with SESSION_QUERY_TOOL_MISSING_AGENT (MsgBadWorkspace).
func NewWorkspaceCaller(tenant, cwd string) (Caller, error) {
	if !dshq.AbsoluteCwd(cwd) {
		return Caller{}, &dshq.Error{Code: dshq.CodeToolMissingAgent, Message: MsgBadWorkspace}
	}
	return Caller{header: dshq.Header{Cwd: &cwd}, tenant: tenant, ok: true, workspace: true}, nil
}

// IsWorkspace reports whether c is a workspace caller (ID is then "").
func (c Caller) IsWorkspace() bool { return c.workspace }

// NewCaller returns the caller whose session record was observed in the
// projection under the id the trusted harness named. It fails with
// SESSION_QUERY_TOOL_MISSING_AGENT when id is empty or the observed record is
// not that session's.
func NewCaller(id string, observed dshq.SessionRecord) (Caller, error) {
	if id == "" {
		return Caller{}, ErrNoCaller()
	}
	if observed.Header.ID != id {
		return Caller{}, ErrUnknownCaller()
	}
	return Caller{header: observed.Header, tenant: observed.Tenant, ok: true}, nil
}

// NewTenantCaller is NewCaller for a call that arrived on the tool subjects
// of tenant, where the server lets only that tenant's credential publish: the
// caller is bound to the credential, not to the header alone. A caller whose
// session is not tenant's — another tenant's, or one of no tenant — fails
// with SESSION_QUERY_TOOL_MISSING_AGENT and the text of an id the projection
// does not hold (ErrUnknownCaller), so that a credential learns nothing of
// other tenants' ids; so does an empty tenant.
func NewTenantCaller(tenant, id string, observed dshq.SessionRecord) (Caller, error) {
	if tenant == "" || observed.Tenant != tenant {
		return Caller{}, ErrUnknownCaller()
	}
	return NewCaller(id, observed)
}

// ID returns the caller's session id, "" for a workspace caller.
func (c Caller) ID() string { return c.header.ID }

// Header returns the caller's session header.
func (c Caller) Header() dshq.Header { return c.header }

// Tenant returns the caller's tenant, "" for none.
func (c Caller) Tenant() string { return c.tenant }

// Workspace returns the caller's cwd and whether it has one.
func (c Caller) Workspace() (string, bool) {
	if !c.ok {
		return "", false
	}
	return c.header.CwdOrEmpty()
}

// Authorized reports whether the caller may see session r: a session of the
// caller's tenant (both possibly none) that is its own session (with an
// equal cwd, both possibly absent), or any session whose cwd is exactly the
// caller's (string equality; symlink-equivalent paths do not match). A
// caller without a cwd sees only itself; another tenant's session is hidden
// whatever its cwd.
func (c Caller) Authorized(r dshq.SessionRecord) bool {
	return c.ok && r.Tenant == c.tenant && c.headerAuthorized(r.Header)
}

// headerAuthorized is the workspace rule of Authorized without the tenant.
func (c Caller) headerAuthorized(h dshq.Header) bool {
	if !c.ok {
		return false
	}
	hc, hok := h.CwdOrEmpty()
	cc, cok := c.header.CwdOrEmpty()
	if !c.workspace && h.ID == c.header.ID && hok == cok && hc == cc {
		return true
	}
	return cok && hok && hc == cc
}

// Recheck re-checks a payload's header, observed in the same read as the
// payload, against the target the caller asked for. It fails with
// SESSION_QUERY_TOOL_UNAUTHORIZED when the header is another session's or is
// no longer authorized (a target replaced between preflight and use).
//
// A header carries no tenant: Recheck is for payloads of a target that a
// preflight already authorized as a record (AuthorizeTarget, a search hit, a
// lineage) or that is the caller itself. Session ids are unique across
// tenants (the projection keeps the first header of an id and refuses any
// other), so the header observed for that id is the same session's.
func (c Caller) Recheck(targetID string, observed dshq.Header) error {
	if observed.ID != targetID || !c.headerAuthorized(observed) {
		return ErrUnauthorized()
	}
	return nil
}

// tenantFilter is the session filter of the caller's tenant (a null value
// for none).
func (c Caller) tenantFilter() dshq.Filter {
	var v *string
	if c.tenant != "" {
		v = dshq.Str(c.tenant)
	}
	return dshq.Filter{Kind: dshq.FilterTenant, Values: []*string{v}}
}

// TargetFilters returns the filters of the preflight of a direct target that
// is not the caller: the target id within the caller's workspace (its tenant
// and cwd). It fails with SESSION_QUERY_TOOL_UNAUTHORIZED when the caller
// has no cwd.
func (c Caller) TargetFilters(targetID string) ([]dshq.Filter, error) {
	cwd, ok := c.Workspace()
	if !ok {
		return nil, ErrUnauthorized()
	}
	return []dshq.Filter{
		{Kind: dshq.FilterID, Values: []*string{dshq.Str(targetID)}},
		{Kind: dshq.FilterCwd, Values: []*string{dshq.Str(cwd)}},
		c.tenantFilter(),
	}, nil
}

// AuthorizeTarget decides a direct target from the records its preflight
// (TargetFilters) returned: exactly one authorized record of that id, else
// SESSION_QUERY_TOOL_UNAUTHORIZED. It returns the authorized record.
func (c Caller) AuthorizeTarget(targetID string, found []dshq.SessionRecord) (dshq.SessionRecord, error) {
	if len(found) != 1 || found[0].Header.ID != targetID || !c.Authorized(found[0]) {
		return dshq.SessionRecord{}, ErrUnauthorized()
	}
	return found[0], nil
}

// SearchScope returns the session filters every cross-session search
// carries: the caller's cwd and tenant. It fails with
// SESSION_QUERY_TOOL_UNAUTHORIZED (no workspace) when the caller has no cwd.
func (c Caller) SearchScope() ([]dshq.Filter, error) {
	cwd, ok := c.Workspace()
	if !ok {
		return nil, ErrNoWorkspace()
	}
	return []dshq.Filter{{Kind: dshq.FilterCwd, Values: []*string{dshq.Str(cwd)}}, c.tenantFilter()}, nil
}

// AcceptHit reports whether a cross-session search hit may be shown: an
// authorized session other than the caller's own.
func (c Caller) AcceptHit(r dshq.SessionRecord) bool {
	return r.Header.ID != c.header.ID && c.Authorized(r)
}
