package tools

// Caller is who calls a tool, named by the trusted side (the harness that
// set DSH_SESSION_ID, the tool service from the subject a call arrived on,
// `dshq mcp --workspace`), never by the model. It is an argument of Call,
// not a value of its context.
type Caller struct {
	session     string
	workspace   string
	tenant      string
	asWorkspace bool
	bound       bool
	// minGeneration, when not 0, is the generation every query of the
	// call waits for (AtGeneration).
	minGeneration uint64
}

// AsSession is the session id's caller ("" means no caller:
// SESSION_QUERY_TOOL_MISSING_AGENT). It sees its own session and the
// sessions with exactly its cwd (of its tenant, InTenant).
func AsSession(id string) Caller { return Caller{session: id} }

// AsWorkspace is a workspace caller (authz.NewWorkspaceCaller): no session
// of its own, the workspace cwd. It sees exactly the sessions whose cwd is
// cwd (of the tenant the call is bound to, InTenant; none otherwise),
// excludes none from search, and a single-session tool needs session_id.
// A cwd that is not an absolute path is SESSION_QUERY_TOOL_MISSING_AGENT.
func AsWorkspace(cwd string) Caller { return Caller{workspace: cwd, asWorkspace: true} }

// InTenant binds the call to tenant: a call that arrived on the tool
// subjects of tenant (docs/protocol.md#4-the-model-facing-tools), where the
// server lets only that tenant's credential publish. A session caller whose
// session is not tenant's — another tenant's, one of no tenant, or an
// empty tenant — fails with SESSION_QUERY_TOOL_MISSING_AGENT, exactly as a
// missing caller does; a workspace caller's workspace is tenant's.
func (c Caller) InTenant(tenant string) Caller {
	c.tenant, c.bound = tenant, true
	return c
}

// AtGeneration makes every query of the call be answered by a projection
// that has applied at least generation g (the stream sequence of the
// caller's last append): read-your-writes for a harness that calls a tool
// right after appending. A projection that does not reach g in time fails
// the call with SESSION_QUERY_NOT_CAUGHT_UP. 0 asks for no generation.
func (c Caller) AtGeneration(g uint64) Caller {
	c.minGeneration = g
	return c
}
