package tools

import (
	"context"
	"encoding/json"
)

// tenantKey is the context key of the tenant a call is bound to.
type tenantKey struct{}

// CallInTenant runs tool name as Call does, for a call that arrived on the tool
// subjects of tenant (docs/protocol.md#4-the-model-facing-tools), where the
// server lets only that tenant's credential publish. The caller is bound to the
// credential: a callerID whose session is not tenant's — another tenant's, one
// of no tenant, or an empty tenant — fails with
// SESSION_QUERY_TOOL_MISSING_AGENT, exactly as a missing caller does. The
// workspace rules are Call's: a caller sees only its own tenant's sessions, and
// of those its own and the ones with exactly its cwd.
func (t *Tools) CallInTenant(ctx context.Context, tenant, callerID, name string, args json.RawMessage) (Result, error) {
	return t.Call(context.WithValue(ctx, tenantKey{}, tenant), callerID, name, args)
}

// boundTenant returns the tenant the call in ctx is bound to, if any.
func boundTenant(ctx context.Context) (string, bool) {
	tenant, ok := ctx.Value(tenantKey{}).(string)
	return tenant, ok
}

// workspaceKey is the context key of a workspace caller's cwd.
type workspaceKey struct{}

// CallAsWorkspace runs tool name as Call does for a workspace caller
// (authz.NewWorkspaceCaller): no session of its own, the workspace cwd,
// named by whoever configured the harness that calls (dshq mcp
// --workspace), never by the model. It sees exactly the sessions whose cwd
// is cwd (of the tenant the call is bound to, CallInTenant; none
// otherwise), excludes none from search, and a single-session tool needs
// session_id. A cwd that is not an absolute path is
// SESSION_QUERY_TOOL_MISSING_AGENT.
func (t *Tools) CallAsWorkspace(ctx context.Context, cwd, name string, args json.RawMessage) (Result, error) {
	return t.Call(context.WithValue(ctx, workspaceKey{}, cwd), "", name, args)
}

// CallAsWorkspaceInTenant is CallAsWorkspace for a call that arrived on
// the tool subjects of tenant: the workspace is tenant's.
func (t *Tools) CallAsWorkspaceInTenant(ctx context.Context, tenant, cwd, name string, args json.RawMessage) (Result, error) {
	return t.CallAsWorkspace(context.WithValue(ctx, tenantKey{}, tenant), cwd, name, args)
}

// workspaceOf returns the workspace caller of the call in ctx, if any.
func workspaceOf(ctx context.Context) (string, bool) {
	cwd, ok := ctx.Value(workspaceKey{}).(string)
	return cwd, ok
}
