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
