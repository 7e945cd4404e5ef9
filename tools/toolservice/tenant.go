package toolservice

import (
	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tenancy"
	"github.com/dshq/dshq/tools"
)

// binding is where a call arrived: the trusted tool subjects
// (dsh.tools.v1.<endpoint>), or a tenant's (dsh.tools.v1.tenant.<tenant>.<endpoint>,
// where the server lets only that tenant's credential publish).
type binding struct {
	tenant   string
	tenanted bool
}

// bindingOf returns the binding of a request subject. A tenant's subject
// whose tenant is not a tenant name is not ok: no caller is bound to it.
func bindingOf(subject string) (binding, bool) {
	tenant, _, tenanted, ok := tenancy.ParseToolSubject(subject)
	return binding{tenant: tenant, tenanted: tenanted}, ok
}

// subject returns the subject of endpoint under the binding.
func (b binding) subject(endpoint string) string {
	if b.tenanted {
		return tenancy.ToolSubject(b.tenant, endpoint)
	}
	return dshq.ToolsSubjectPrefix + "." + endpoint
}

// bind binds c to the binding's tenant, if any: a tenant's call, session
// or workspace, is bound to its tenant (tools.Caller.InTenant); the
// trusted subjects' are the untenanted namespace's.
func (b binding) bind(c tools.Caller) tools.Caller {
	if b.tenanted {
		return c.InTenant(b.tenant)
	}
	return c
}
