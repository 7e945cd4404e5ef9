package authz

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/dshq/dshq"
)

func hdr(id string, cwd *string, parent *string) dshq.Header {
	return dshq.Header{Version: 2, ID: id, CreatedAt: 1, Cwd: cwd, ParentSession: parent}
}

func rec(id string, cwd *string, parent *string) dshq.SessionRecord {
	return dshq.SessionRecord{Header: hdr(id, cwd, parent), Persisted: true}
}

func mustCaller(t *testing.T, h dshq.Header) Caller {
	t.Helper()
	c, err := NewCaller(h.ID, dshq.SessionRecord{Header: h, Persisted: true})
	if err != nil {
		t.Fatalf("NewCaller: %v", err)
	}
	return c
}

var (
	wsA = dshq.Str("/home/u/a")
	wsB = dshq.Str("/home/u/b")
)

func TestNewCaller(t *testing.T) {
	for _, tc := range []struct {
		name     string
		id       string
		observed dshq.Header
		ok       bool
	}{
		{"an empty id is no caller", "", hdr("", wsA, nil), false},
		{"a header of another session is no caller", "me", hdr("other", wsA, nil), false},
		{"the caller's own header makes a caller", "me", hdr("me", wsA, nil), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewCaller(tc.id, dshq.SessionRecord{Header: tc.observed})
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && dshq.ErrorCode(err) != dshq.CodeToolMissingAgent {
				t.Fatalf("code = %q", dshq.ErrorCode(err))
			}
		})
	}
}

func TestAuthorized(t *testing.T) {
	same := dshq.Str("/home/u/a")
	for _, tc := range []struct {
		name   string
		caller dshq.Header
		target dshq.Header
		want   bool
	}{
		{"a session in the same cwd is visible", hdr("me", wsA, nil), hdr("x", same, nil), true},
		{"a session in another cwd is hidden", hdr("me", wsA, nil), hdr("x", wsB, nil), false},
		{"a path that differs only by a trailing slash is hidden", hdr("me", wsA, nil), hdr("x", dshq.Str("/home/u/a/"), nil), false},
		{"a session without cwd is hidden from a caller with one", hdr("me", wsA, nil), hdr("x", nil, nil), false},
		{"a caller without cwd sees itself", hdr("me", nil, nil), hdr("me", nil, nil), true},
		{"a caller without cwd does not see another cwd-less session", hdr("me", nil, nil), hdr("x", nil, nil), false},
		{"a caller without cwd does not see a session with cwd", hdr("me", nil, nil), hdr("x", wsA, nil), false},
		{"the own id with a different cwd is hidden", hdr("me", wsA, nil), hdr("me", wsB, nil), false},
		{"the own id without cwd is hidden from a caller with one", hdr("me", wsA, nil), hdr("me", nil, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCaller(t, tc.caller)
			if got := c.Authorized(dshq.SessionRecord{Header: tc.target}); got != tc.want {
				t.Fatalf("Authorized = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestZeroCallerSeesNothing(t *testing.T) {
	var c Caller
	if c.Authorized(rec("", nil, nil)) {
		t.Fatal("the zero caller authorized a header")
	}
	if _, err := c.SearchScope(); dshq.ErrorCode(err) != dshq.CodeToolUnauthorized {
		t.Fatalf("SearchScope err = %v", err)
	}
}

func TestDirectTargets(t *testing.T) {
	c := mustCaller(t, hdr("me", wsA, nil))
	t.Run("a caller with cwd preflights the id within its cwd", func(t *testing.T) {
		f, err := c.TargetFilters("x")
		if err != nil {
			t.Fatal(err)
		}
		if len(f) != 3 || f[0].Kind != dshq.FilterID || *f[0].Values[0] != "x" || f[1].Kind != dshq.FilterCwd || *f[1].Values[0] != *wsA ||
			f[2].Kind != dshq.FilterTenant || len(f[2].Values) != 1 || f[2].Values[0] != nil {
			t.Fatalf("filters = %+v", f)
		}
	})
	t.Run("a caller without cwd cannot target another session", func(t *testing.T) {
		nc := mustCaller(t, hdr("me", nil, nil))
		if _, err := nc.TargetFilters("x"); dshq.ErrorCode(err) != dshq.CodeToolUnauthorized {
			t.Fatalf("err = %v", err)
		}
	})
	for _, tc := range []struct {
		name  string
		found []dshq.SessionRecord
		ok    bool
	}{
		{"no record is unauthorized", nil, false},
		{"two records are unauthorized", []dshq.SessionRecord{rec("x", wsA, nil), rec("x", wsA, nil)}, false},
		{"a record of another id is unauthorized", []dshq.SessionRecord{rec("y", wsA, nil)}, false},
		{"a record in another cwd is unauthorized", []dshq.SessionRecord{rec("x", wsB, nil)}, false},
		{"exactly the target in the workspace is authorized", []dshq.SessionRecord{rec("x", wsA, nil)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.AuthorizeTarget("x", tc.found)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				if dshq.ErrorCode(err) != dshq.CodeToolUnauthorized || err.Error() != MsgUnauthorized {
					t.Fatalf("err = %v", err)
				}
			}
		})
	}
}

func TestRecheck(t *testing.T) {
	c := mustCaller(t, hdr("me", wsA, nil))
	for _, tc := range []struct {
		name     string
		observed dshq.Header
		ok       bool
	}{
		{"the same target in the workspace passes", hdr("x", wsA, nil), true},
		{"a target that moved to another cwd fails", hdr("x", wsB, nil), false},
		{"a payload of another session fails", hdr("y", wsA, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Recheck("x", tc.observed)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestParentClause(t *testing.T) {
	c := mustCaller(t, hdr("me", wsA, nil))
	found := []dshq.SessionRecord{rec("visible", wsA, nil), rec("hidden", wsB, nil), rec("unrequested", wsA, nil)}
	str := func(f dshq.Filter) []string {
		var out []string
		for _, v := range f.Values {
			if v == nil {
				out = append(out, "<null>")
			} else {
				out = append(out, *v)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		requested   []string
		includeRoot bool
		want        []string
	}{
		{"visible, hidden, visible, missing plus root give visible and null", []string{"visible", "hidden", "visible", "missing"}, true, []string{"visible", "<null>"}},
		{"only hidden and missing guesses give an empty clause", []string{"hidden", "missing"}, false, nil},
		{"root alone gives null", nil, true, []string{"<null>"}},
		{"duplicates of a visible parent are sent once", []string{"visible", "visible"}, false, []string{"visible"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ok := c.ParentClause(tc.requested, found, tc.includeRoot)
			if ok != (tc.want != nil) {
				t.Fatalf("ok = %v", ok)
			}
			if ok && (f.Kind != dshq.FilterParent || !reflect.DeepEqual(str(f), tc.want)) {
				t.Fatalf("clause = %v", str(f))
			}
		})
	}
	t.Run("the preflight de-duplicates the requested ids", func(t *testing.T) {
		f, err := c.ParentPreflight([]string{"a", "b", "a"})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(str(f[0]), []string{"a", "b"}) || *f[1].Values[0] != *wsA {
			t.Fatalf("preflight = %v", f)
		}
	})
}

func TestParentLabel(t *testing.T) {
	visible := map[string]bool{"p": true}
	for _, tc := range []struct {
		name string
		h    dshq.Header
		want string
	}{
		{"a root session shows root", hdr("x", wsA, nil), "root"},
		{"a visible parent shows its id", hdr("x", wsA, dshq.Str("p")), "p"},
		{"a hidden parent shows the marker", hdr("x", wsA, dshq.Str("secret")), "[outside workspace]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParentLabel(tc.h, visible); got != tc.want {
				t.Fatalf("got %q", got)
			}
		})
	}
}

// render prints a pruned lineage compactly for comparison.
func render(l Lineage) string {
	s := "anc:"
	for _, a := range l.Ancestors {
		s += " " + a.Header.ID
	}
	s += fmt.Sprintf(" boundary=%v desc:", l.Boundary)
	Walk(l.Descendants, func(n Node, d int) {
		id := "HIDDEN"
		if n.Session != nil {
			id = n.Session.Header.ID
		}
		s += fmt.Sprintf(" %d:%s", d, id)
	})
	return s
}

func TestPruneLineage(t *testing.T) {
	c := mustCaller(t, hdr("me", wsA, nil))
	node := func(r dshq.SessionRecord, kids ...dshq.LineageNode) dshq.LineageNode {
		return dshq.LineageNode{Session: r, Descendants: kids}
	}
	target := rec("t", wsA, dshq.Str("p1"))
	for _, tc := range []struct {
		name  string
		trace dshq.LineageTrace
		want  string
	}{
		{
			"ancestors stop at the first hidden one",
			dshq.LineageTrace{Target: target, Complete: true, Ancestors: []dshq.SessionRecord{
				rec("p1", wsA, dshq.Str("p2")), rec("p2", wsB, dshq.Str("p3")), rec("p3", wsA, nil)}},
			"anc: p1 boundary=true desc:",
		},
		{
			"an incomplete chain of visible ancestors ends with a boundary",
			dshq.LineageTrace{Target: target, Complete: false, UnresolvedParentID: dshq.Str("gone"),
				Ancestors: []dshq.SessionRecord{rec("p1", wsA, dshq.Str("gone"))}},
			"anc: p1 boundary=true desc:",
		},
		{
			"a complete visible chain has no boundary",
			dshq.LineageTrace{Target: target, Complete: true, Ancestors: []dshq.SessionRecord{rec("p1", wsA, nil)}},
			"anc: p1 boundary=false desc:",
		},
		{
			"a hidden descendant's whole subtree is pruned",
			dshq.LineageTrace{Target: target, Complete: true, Descendants: []dshq.LineageNode{
				node(rec("c1", wsA, dshq.Str("t")), node(rec("g1", wsB, dshq.Str("c1")), node(rec("gg", wsA, dshq.Str("g1"))))),
				node(rec("c2", wsB, dshq.Str("t")), node(rec("g2", wsA, dshq.Str("c2")))),
				node(rec("c3", wsA, dshq.Str("t"))),
			}},
			"anc: boundary=false desc: 0:c1 1:HIDDEN 0:HIDDEN 0:c3",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := c.PruneLineage("t", tc.trace)
			if err != nil {
				t.Fatal(err)
			}
			if got := render(l); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	t.Run("a trace whose target is hidden fails closed", func(t *testing.T) {
		_, err := c.PruneLineage("t", dshq.LineageTrace{Target: rec("t", wsB, nil), Complete: true})
		if dshq.ErrorCode(err) != dshq.CodeToolUnauthorized {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a trace of another session than asked fails closed", func(t *testing.T) {
		_, err := c.PruneLineage("t", dshq.LineageTrace{Target: rec("u", wsA, nil), Complete: true})
		if dshq.ErrorCode(err) != dshq.CodeToolUnauthorized {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a lineage thousands deep is pruned without recursion", func(t *testing.T) {
		var n dshq.LineageNode
		for i := 5000; i >= 0; i-- {
			r := rec(fmt.Sprintf("d%d", i), wsA, nil)
			if i == 5000 {
				n = node(r)
			} else {
				n = node(r, n)
			}
		}
		l, err := c.PruneLineage("t", dshq.LineageTrace{Target: target, Complete: true, Descendants: []dshq.LineageNode{n}})
		if err != nil {
			t.Fatal(err)
		}
		depth := -1
		Walk(l.Descendants, func(_ Node, d int) { depth = d })
		if depth != 5000 {
			t.Fatalf("deepest = %d", depth)
		}
	})
}

// TestWorkspaceCaller: a workspace caller sees exactly its tenant's
// sessions of its cwd, excludes none from search, and fails closed on a
// workspace that is not an absolute path.
func TestWorkspaceCaller(t *testing.T) {
	rec := func(id, tenant string, cwd *string) dshq.SessionRecord {
		return dshq.SessionRecord{Header: dshq.Header{ID: id, Cwd: cwd}, Tenant: tenant}
	}
	c, err := NewWorkspaceCaller("", "/w")
	if err != nil || !c.IsWorkspace() || c.ID() != "" {
		t.Fatalf("NewWorkspaceCaller: %+v, %v", c, err)
	}
	if cwd, ok := c.Workspace(); !ok || cwd != "/w" {
		t.Fatalf("workspace %q %v", cwd, ok)
	}
	for _, tc := range []struct {
		r    dshq.SessionRecord
		want bool
	}{
		{rec("cc-1", "", dshq.Str("/w")), true},
		{rec("codex-1", "", dshq.Str("/w")), true},
		{rec("cc-2", "", dshq.Str("/w/sub")), false},
		{rec("cc-3", "", nil), false},
		{rec("", "", nil), false}, // an empty id is not the caller's own session
		{rec("cc-4", "teamA", dshq.Str("/w")), false},
	} {
		if got := c.Authorized(tc.r); got != tc.want {
			t.Errorf("Authorized(%s in %q, cwd %v) = %v, want %v", tc.r.Header.ID, tc.r.Tenant, tc.r.Header.Cwd, got, tc.want)
		}
		if got := c.AcceptHit(tc.r); got != tc.want {
			t.Errorf("AcceptHit(%s) = %v, want %v", tc.r.Header.ID, got, tc.want)
		}
	}
	scope, err := c.SearchScope()
	if err != nil || len(scope) != 2 || *scope[0].Values[0] != "/w" || scope[1].Values[0] != nil {
		t.Errorf("search scope %+v, %v", scope, err)
	}
	tc, err := NewWorkspaceCaller("teamA", "/w")
	if err != nil || !tc.Authorized(rec("cc-4", "teamA", dshq.Str("/w"))) || tc.Authorized(rec("cc-1", "", dshq.Str("/w"))) {
		t.Errorf("a tenant's workspace caller: %v", err)
	}
	// A Windows workspace is absolute, and its own: compared as written.
	win, err := NewWorkspaceCaller("", `e:\w`)
	if err != nil || !win.Authorized(rec("cc-5", "", dshq.Str(`e:\w`))) || win.Authorized(rec("cc-6", "", dshq.Str(`E:\w`))) {
		t.Errorf("a drive-letter workspace caller: %v", err)
	}
	if _, err := NewWorkspaceCaller("", `\\srv\share\w`); err != nil {
		t.Errorf("a UNC workspace caller: %v", err)
	}
	for _, bad := range []string{"", "w", "./w", `e:w`, `\\srv`} {
		if _, err := NewWorkspaceCaller("", bad); dshq.ErrorCode(err) != dshq.CodeToolMissingAgent {
			t.Errorf("NewWorkspaceCaller(%q) = %v, want %s", bad, err, dshq.CodeToolMissingAgent)
		}
	}
}
