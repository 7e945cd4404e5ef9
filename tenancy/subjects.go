package tenancy

import (
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// toolsTenantToken is the token after dshq.ToolsSubjectPrefix that starts a
// tenant's tool subjects; no endpoint is named after it.
const toolsTenantToken = "tenant"

// ToolSubject returns the subject of a tool endpoint for tenant:
// dsh.tools.v1.tenant.<tenant>.<endpoint>. A request there is a call bound to
// tenant: the server lets only that tenant's credential (and the trusted
// user) publish on it.
func ToolSubject(tenant, endpoint string) string {
	return dshq.ToolsSubjectPrefix + "." + toolsTenantToken + "." + tenant + "." + endpoint
}

// ToolSubjectPattern is the subscription of a tool endpoint for every
// tenant: dsh.tools.v1.tenant.*.<endpoint>.
func ToolSubjectPattern(endpoint string) string { return ToolSubject("*", endpoint) }

// ToolSubjects is every tool subject of tenant: dsh.tools.v1.tenant.<tenant>.>,
// what its permissions allow.
func ToolSubjects(tenant string) string { return ToolSubject(tenant, ">") }

// ParseToolSubject returns the tenant and endpoint of a tenant's tool
// subject. ok is false for any other subject; tenanted is false with ok for
// a trusted tool subject (dsh.tools.v1.<endpoint>). A tenant that is not a
// tenant name (record.ValidateTenant) is not ok.
func ParseToolSubject(subject string) (tenant, endpoint string, tenanted, ok bool) {
	rest, found := strings.CutPrefix(subject, dshq.ToolsSubjectPrefix+".")
	if !found || rest == "" {
		return "", "", false, false
	}
	rest, found = strings.CutPrefix(rest, toolsTenantToken+".")
	if !found {
		return "", rest, false, true
	}
	tenant, endpoint, found = strings.Cut(rest, ".")
	if !found || endpoint == "" || record.ValidateTenant(tenant) != nil {
		return "", "", true, false
	}
	return tenant, endpoint, true, true
}
