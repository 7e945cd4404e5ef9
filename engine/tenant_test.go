package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// TestTenantsAreRecordedAndFiltered runs the real pipeline over sessions of
// two tenants and of none, all with the same cwd: every SessionRecord names
// its session's tenant (absent for none), and the tenant filter — a tenant
// name, or null for no tenant — selects them in sessions.filter (the store)
// and sessions.search (the index) alike.
func TestTenantsAreRecordedAndFiltered(t *testing.T) {
	p := newPipe(t)
	ctx := context.Background()
	const cwd = "/srv/shared"
	p.inTenant("teamA", "a-root", "a-child")
	p.inTenant("teamB", "b-root")
	for i, id := range []string{"a-root", "a-child", "b-root", "plain"} {
		h := hdr{createdAt: 1_788_000_000_000 + int64(i), cwd: cwd}
		if id == "a-child" {
			h.parent = "a-root"
		}
		p.session(id, h)
		p.events(id, userMsg(1_788_000_000_100+int64(i), "cerulean tenancy probe from "+id))
	}
	p.setLive("a-root", true)
	p.sync()

	tenantOf := map[string]string{"a-root": "teamA", "a-child": "teamA", "b-root": "teamB", "plain": ""}
	check := func(where string, r dshq.SessionRecord) {
		t.Helper()
		if r.Tenant != tenantOf[r.Header.ID] {
			t.Errorf("%s: session %s has tenant %q, want %q", where, r.Header.ID, r.Tenant, tenantOf[r.Header.ID])
		}
	}
	list, err := p.client.ListSessions(ctx, dshq.SessionListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		check("sessions.list", r)
	}
	raw, err := json.Marshal(list.Items)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), `"tenant":`); n != 3 {
		t.Errorf("sessions.list JSON names a tenant %d times, want 3 (absent for no tenant): %s", n, raw)
	}
	tr, err := p.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: "a-child"})
	if err != nil {
		t.Fatal(err)
	}
	check("sessions.trace target", tr.Target)
	for _, a := range tr.Ancestors {
		check("sessions.trace ancestor", a)
	}
	st, err := p.client.StatSession(ctx, dshq.SessionStatRequest{SessionID: "b-root"})
	if err != nil {
		t.Fatal(err)
	}
	check("sessions.stat", st.Session)

	tenant := func(values ...*string) dshq.Filter { return dshq.Filter{Kind: dshq.FilterTenant, Values: values} }
	for _, c := range []struct {
		name   string
		filter dshq.Filter
		want   []string
	}{
		{"one tenant", tenant(dshq.Str("teamA")), []string{"a-child", "a-root"}},
		{"no tenant", tenant(nil), []string{"plain"}},
		{"a tenant or none", tenant(dshq.Str("teamB"), nil), []string{"b-root", "plain"}},
		{"an unknown tenant", tenant(dshq.Str("teamZ")), nil},
		{"no value", tenant(), nil},
	} {
		t.Run("the tenant filter selects "+c.name, func(t *testing.T) {
			filters := []dshq.Filter{c.filter, {Kind: dshq.FilterCwd, Values: []*string{dshq.Str(cwd)}}}
			page, err := p.client.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: filters})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range page.Items {
				check("sessions.filter", r)
				got = append(got, r.Header.ID)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("sessions.filter: %v, want %v", got, c.want)
			}
			hits, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "cerulean tenancy probe", SessionFilters: filters})
			if err != nil {
				t.Fatal(err)
			}
			got = nil
			for _, h := range hits.Items {
				check("sessions.search", h.SessionRecord)
				got = append(got, h.Header.ID)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("sessions.search: %v, want %v", got, c.want)
			}
		})
	}
	t.Run("a tenant filter value must be a string or null", func(t *testing.T) {
		_, err := p.client.Raw(ctx, wire.EndpointSessionsFilter, []byte(`{"filters":[{"kind":"tenant","values":[7]}]}`))
		if dshq.ErrorCode(err) != dshq.CodeInvalidFilter {
			t.Fatalf("err = %v, want %s", err, dshq.CodeInvalidFilter)
		}
	})
	t.Run("a tenant's lease makes its session live", func(t *testing.T) {
		page, err := p.client.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: []dshq.Filter{
			tenant(dshq.Str("teamA")), {Kind: dshq.FilterAvailability, Values: []*string{dshq.Str("live")}}}})
		if err != nil || len(page.Items) != 1 || page.Items[0].Header.ID != "a-root" {
			t.Fatalf("live teamA sessions: %+v, %v", page, err)
		}
	})
}
