package authz

import (
	"testing"

	"github.com/dshq/dshq"
)

func inTenant(tenant string, r dshq.SessionRecord) dshq.SessionRecord {
	r.Tenant = tenant
	return r
}

func tenantCaller(t *testing.T, tenant string, r dshq.SessionRecord) Caller {
	t.Helper()
	c, err := NewTenantCaller(tenant, r.Header.ID, inTenant(tenant, r))
	if err != nil {
		t.Fatalf("NewTenantCaller: %v", err)
	}
	return c
}

func TestNewTenantCallerBindsTheCallerToTheCredentialsTenant(t *testing.T) {
	me := rec("me", wsA, nil)
	for _, tc := range []struct {
		name     string
		tenant   string
		observed dshq.SessionRecord
		ok       bool
	}{
		{"a session of the subject's tenant is the caller", "teamA", inTenant("teamA", me), true},
		{"another tenant's session is no caller", "teamA", inTenant("teamB", me), false},
		{"a session of no tenant is no caller on a tenant's subject", "teamA", me, false},
		{"no tenant binds nothing: no caller", "", me, false},
		{"the tenant's own session of another id is no caller", "teamA", inTenant("teamA", rec("other", wsA, nil)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewTenantCaller(tc.tenant, "me", tc.observed)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil {
				if dshq.ErrorCode(err) != dshq.CodeToolMissingAgent || err.Error() != MsgUnknownCaller {
					t.Fatalf("err = %v: not the answer of an id the projection does not hold", err)
				}
				return
			}
			if c.Tenant() != tc.tenant || c.ID() != "me" {
				t.Fatalf("caller = %q of %q", c.ID(), c.Tenant())
			}
		})
	}
}

func TestAnotherTenantsSessionIsHiddenWhateverItsCwd(t *testing.T) {
	a := tenantCaller(t, "teamA", rec("me", wsA, nil))
	plain := mustCaller(t, hdr("me2", wsA, nil))
	for _, tc := range []struct {
		name   string
		caller Caller
		target dshq.SessionRecord
		want   bool
	}{
		{"the tenant's session in the same cwd is visible", a, inTenant("teamA", rec("x", wsA, nil)), true},
		{"another tenant's session in the same cwd is hidden", a, inTenant("teamB", rec("x", wsA, nil)), false},
		{"a session of no tenant in the same cwd is hidden from a tenant", a, rec("x", wsA, nil), false},
		{"a tenant's session in the same cwd is hidden from a caller of no tenant", plain, inTenant("teamA", rec("x", wsA, nil)), false},
		{"the tenant's session in another cwd is hidden", a, inTenant("teamA", rec("x", wsB, nil)), false},
		{"the caller's own id under another tenant is hidden", a, inTenant("teamB", rec("me", wsA, nil)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.caller.Authorized(tc.target); got != tc.want {
				t.Fatalf("Authorized = %v, want %v", got, tc.want)
			}
			if got := tc.caller.AcceptHit(tc.target); got != tc.want {
				t.Fatalf("AcceptHit = %v, want %v", got, tc.want)
			}
			_, err := tc.caller.AuthorizeTarget("x", []dshq.SessionRecord{tc.target})
			if tc.target.Header.ID == "x" && (err == nil) != tc.want {
				t.Fatalf("AuthorizeTarget err = %v, want authorized=%v", err, tc.want)
			}
		})
	}
}

func TestTenantScopedFilters(t *testing.T) {
	a := tenantCaller(t, "teamA", rec("me", wsA, nil))
	tenantOf := func(fs []dshq.Filter) (string, bool) {
		for _, f := range fs {
			if f.Kind == dshq.FilterTenant {
				if len(f.Values) != 1 || f.Values[0] == nil {
					return "<null>", true
				}
				return *f.Values[0], true
			}
		}
		return "", false
	}
	scope, err := a.SearchScope()
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tenantOf(scope); !ok || got != "teamA" {
		t.Errorf("search scope %+v does not carry tenant teamA", scope)
	}
	target, err := a.TargetFilters("x")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tenantOf(target); !ok || got != "teamA" {
		t.Errorf("target preflight %+v does not carry tenant teamA", target)
	}
	parents, err := a.ParentPreflight([]string{"p"})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tenantOf(parents); !ok || got != "teamA" {
		t.Errorf("parent preflight %+v does not carry tenant teamA", parents)
	}
	plainScope, err := mustCaller(t, hdr("me", wsA, nil)).SearchScope()
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := tenantOf(plainScope); !ok || got != "<null>" {
		t.Errorf("a caller of no tenant searches %+v, want the null tenant", plainScope)
	}
	// Records of another tenant that a preflight returned anyway (a
	// service that ignored the filter) are still hidden.
	clause, ok := a.ParentClause([]string{"p", "q"}, []dshq.SessionRecord{
		inTenant("teamB", rec("p", wsA, nil)), inTenant("teamA", rec("q", wsA, nil))}, false)
	if !ok || len(clause.Values) != 1 || *clause.Values[0] != "q" {
		t.Errorf("parent clause = %+v, want q only", clause)
	}
}

func TestLineageIsPrunedAtTheTenantBoundary(t *testing.T) {
	a := tenantCaller(t, "teamA", rec("me", wsA, nil))
	mine := func(id string, parent *string) dshq.SessionRecord { return inTenant("teamA", rec(id, wsA, parent)) }
	theirs := func(id string, parent *string) dshq.SessionRecord { return inTenant("teamB", rec(id, wsA, parent)) }
	node := func(r dshq.SessionRecord, kids ...dshq.LineageNode) dshq.LineageNode {
		return dshq.LineageNode{Session: r, Descendants: kids}
	}
	l, err := a.PruneLineage("t", dshq.LineageTrace{
		Target: mine("t", dshq.Str("p1")), Complete: true,
		Ancestors: []dshq.SessionRecord{mine("p1", dshq.Str("p2")), theirs("p2", dshq.Str("p3")), mine("p3", nil)},
		Descendants: []dshq.LineageNode{
			node(mine("c1", dshq.Str("t")), node(theirs("g1", dshq.Str("c1")), node(mine("gg", dshq.Str("g1"))))),
			node(theirs("c2", dshq.Str("t"))),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := render(l), "anc: p1 boundary=true desc: 0:c1 1:HIDDEN 0:HIDDEN"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := a.PruneLineage("t", dshq.LineageTrace{Target: theirs("t", nil), Complete: true}); dshq.ErrorCode(err) != dshq.CodeToolUnauthorized {
		t.Fatalf("a trace of another tenant's session with the same id: err = %v", err)
	}
}
