package shellenv

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func newReg(t *testing.T) *Registry {
	t.Helper()
	r, err := NewRegistry("/home/u/.dsh")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func resolver(vals map[string]any) func(Execution) (map[string]any, error) {
	return func(Execution) (map[string]any, error) { return vals, nil }
}

func vars(kv ...string) map[string]Variable {
	m := map[string]Variable{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = Variable{Description: kv[i+1]}
	}
	return m
}

// Registration refusals, in the validation order (docs/sdk.md#contributors).
func TestRegister_Refusals(t *testing.T) {
	cases := []struct {
		name string
		c    Contributor
		want string
	}{
		{"a blank name is refused", Contributor{Name: "  ", Variables: vars("DSH_X", "x")}, "name must be non-empty"},
		{"a blank name is refused before a bad key", Contributor{Name: "", Variables: vars("bad", "")}, "name must be non-empty"},
		{"a duplicate name is refused", Contributor{Name: "first", Variables: vars("DSH_OTHER", "o")}, `"first" is already registered`},
		{"a duplicate name is refused before a bad key", Contributor{Name: "first", Variables: vars("bad", "")}, "already registered"},
		{"a lowercase key is refused", Contributor{Name: "c", Variables: vars("DSH_lower", "x")}, `declared invalid key "DSH_lower"`},
		{"a key without the DSH_ prefix is refused", Contributor{Name: "c", Variables: vars("HOME_X", "x")}, "declared invalid key"},
		{"a lowercase prefix is refused", Contributor{Name: "c", Variables: vars("dsh_X", "x")}, "declared invalid key"},
		{"a key starting with a digit after DSH_ is refused", Contributor{Name: "c", Variables: vars("DSH_1X", "x")}, "declared invalid key"},
		{"a bare DSH_ is refused", Contributor{Name: "c", Variables: vars("DSH_", "x")}, "declared invalid key"},
		{"the reserved DSH_HOME is refused", Contributor{Name: "c", Variables: vars("DSH_HOME", "x")}, `cannot own reserved key "DSH_HOME"`},
		{"the reserved DSH_SHELL is refused", Contributor{Name: "c", Variables: vars("DSH_SHELL", "x")}, "cannot own reserved key"},
		{"the reserved DSH_SESSION_ID is refused", Contributor{Name: "c", Variables: vars("DSH_SESSION_ID", "x")}, "cannot own reserved key"},
		{"a reserved key is refused before a blank description", Contributor{Name: "c", Variables: vars("DSH_HOME", " ")}, "cannot own reserved key"},
		{"a blank description is refused", Contributor{Name: "c", Variables: vars("DSH_Y", " \t")}, `must describe key "DSH_Y"`},
		{"a key owned by another contributor is refused", Contributor{Name: "second", Variables: vars("DSH_OWNED", "again")},
			`shell env key "DSH_OWNED" is already owned by contributor "first"; contributor "second" cannot also own it`},
		{"a contributor without a resolver is refused", Contributor{Name: "nores", Variables: vars("DSH_Z", "z")}, "no resolver"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReg(t)
			if _, err := r.Register(Contributor{Name: "first", Variables: vars("DSH_OWNED", "owned"), Resolve: resolver(nil)}); err != nil {
				t.Fatal(err)
			}
			c := tc.c
			if c.Resolve == nil && c.Name != "nores" {
				c.Resolve = resolver(nil)
			}
			_, err := r.Register(c)
			if !errors.Is(err, ErrRegistration) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a registration error containing %q", err, tc.want)
			}
			if got := r.List(); len(got) != 1 {
				t.Fatalf("a refused registration changed the registry: %v", got)
			}
		})
	}
}

func TestCollect(t *testing.T) {
	t.Run("the built-ins are always there and DSH_SESSION_ID only with an agent", func(t *testing.T) {
		r := newReg(t)
		env, err := r.Collect(Execution{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"DSH_HOME=/home/u/.dsh", "DSH_SHELL=1"}; !slices.Equal(env.Sorted(), want) {
			t.Fatalf("got %v, want %v", env.Sorted(), want)
		}
		env, _ = r.Collect(Execution{SessionID: "s-1"})
		if env[KeySessionID] != "s-1" {
			t.Fatalf("got %v", env)
		}
	})
	t.Run("contributor values are merged and sorted by key; missing keys are absent", func(t *testing.T) {
		r := newReg(t)
		mustRegister(t, r, Contributor{Name: "b", Variables: vars("DSH_B", "b", "DSH_MAYBE", "m"), Resolve: resolver(map[string]any{"DSH_B": "2"})})
		mustRegister(t, r, Contributor{Name: "a", Variables: vars("DSH_A", "a"), Resolve: func(e Execution) (map[string]any, error) {
			return map[string]any{"DSH_A": "for " + e.SessionID}, nil
		}})
		env, err := r.Collect(Execution{SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"DSH_A=for s", "DSH_B=2", "DSH_HOME=/home/u/.dsh", "DSH_SESSION_ID=s", "DSH_SHELL=1"}
		if !slices.Equal(env.Sorted(), want) {
			t.Fatalf("got %v, want %v", env.Sorted(), want)
		}
	})
	failures := []struct {
		name string
		vals map[string]any
		err  error
		want string
	}{
		{"an undeclared key fails the collect", map[string]any{"DSH_UNDECLARED": "x"}, nil, `returned undeclared key "DSH_UNDECLARED"`},
		{"a reserved key returned by a contributor fails the collect", map[string]any{"DSH_HOME": "/evil"}, nil, "returned undeclared key"},
		{"a number fails the collect", map[string]any{"DSH_C": 1}, nil, "returned a non-string value"},
		{"a nil value fails the collect", map[string]any{"DSH_C": nil}, nil, "returned a non-string value"},
		{"a resolver error fails the collect", nil, errors.New("boom"), "boom"},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			r := newReg(t)
			mustRegister(t, r, Contributor{Name: "c", Variables: vars("DSH_C", "c"), Resolve: func(Execution) (map[string]any, error) {
				return tc.vals, tc.err
			}})
			_, err := r.Collect(Execution{})
			if !errors.Is(err, ErrCollect) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a collect error containing %q", err, tc.want)
			}
		})
	}
	t.Run("a disposed contributor's keys disappear and can be owned again", func(t *testing.T) {
		r := newReg(t)
		dispose := mustRegister(t, r, Contributor{Name: "p", Variables: vars("DSH_P", "p"), Resolve: resolver(map[string]any{"DSH_P": "v"})})
		if env, _ := r.Collect(Execution{}); env["DSH_P"] != "v" {
			t.Fatalf("got %v", env)
		}
		dispose()
		dispose()
		if env, _ := r.Collect(Execution{}); len(env) != 2 {
			t.Fatalf("disposed keys remain: %v", env)
		}
		if len(r.List()) != 0 {
			t.Fatalf("list %v", r.List())
		}
		mustRegister(t, r, Contributor{Name: "p", Variables: vars("DSH_P", "again"), Resolve: resolver(nil)})
	})
	t.Run("the result is the caller's copy", func(t *testing.T) {
		r := newReg(t)
		env, _ := r.Collect(Execution{})
		env[KeyHome] = "/tampered"
		again, _ := r.Collect(Execution{})
		if again[KeyHome] != "/home/u/.dsh" {
			t.Fatal("collect result aliases registry state")
		}
	})
}

func TestList_SortedByKeyWithoutBuiltins(t *testing.T) {
	r := newReg(t)
	mustRegister(t, r, Contributor{Name: "z", Variables: vars("DSH_A", "first key"), Resolve: resolver(nil)})
	mustRegister(t, r, Contributor{Name: "a", Variables: vars("DSH_C", "third", "DSH_B", "second"), Resolve: resolver(nil)})
	got := r.List()
	want := []Declaration{{"z", "DSH_A", "first key"}, {"a", "DSH_B", "second"}, {"a", "DSH_C", "third"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func mustRegister(t *testing.T, r *Registry, c Contributor) func() {
	t.Helper()
	d, err := r.Register(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNewRegistry_RefusesRelativeOrUncleanHomes(t *testing.T) {
	for _, h := range []string{"", "rel/dir", "/a/../b", "/a/"} {
		if _, err := NewRegistry(h); err == nil {
			t.Errorf("home %q accepted", h)
		}
	}
}

func TestChildEnv(t *testing.T) {
	str := func(s string) *string { return &s }
	cases := []struct {
		name     string
		parent   []string
		explicit map[string]*string
		dsh      map[string]string
		want     []string
	}{
		{
			name:   "secrets and stale DSH_ keys of any case are dropped, terminal overrides added",
			parent: []string{"PATH=/bin", "AWS_SECRET_ACCESS_KEY=s", "GITHUB_TOKEN=t", "db_password=p", "api_key=k", "DSH_HOME=/old", "dsh_session_id=old", "Dsh_Shell=1", "HOME=/home/u"},
			want:   []string{"PATH=/bin", "HOME=/home/u", "GIT_PAGER=cat", "NO_COLOR=1", "PAGER=cat", "TERM=dumb"},
		},
		{
			name:   "terminal overrides replace inherited values in place",
			parent: []string{"TERM=xterm-256color", "PATH=/bin"},
			want:   []string{"TERM=dumb", "PATH=/bin", "GIT_PAGER=cat", "NO_COLOR=1", "PAGER=cat"},
		},
		{
			name:     "explicit values overlay and a nil value deletes an inherited key",
			parent:   []string{"PATH=/bin", "LANG=C", "TERM=x"},
			explicit: map[string]*string{"LANG": nil, "EDITOR": str("vi"), "TERM": str("xterm"), "PAGER": nil},
			want:     []string{"PATH=/bin", "TERM=xterm", "GIT_PAGER=cat", "NO_COLOR=1", "EDITOR=vi"},
		},
		{
			name:     "the managed snapshot is applied last and cannot be displaced",
			parent:   []string{"PATH=/bin"},
			explicit: map[string]*string{"DSH_HOME": str("/evil"), "DSH_SESSION_ID": nil},
			dsh:      map[string]string{"DSH_HOME": "/home/u/.dsh", "DSH_SHELL": "1", "DSH_SESSION_ID": "s"},
			want:     []string{"PATH=/bin", "GIT_PAGER=cat", "NO_COLOR=1", "PAGER=cat", "TERM=dumb", "DSH_HOME=/home/u/.dsh", "DSH_SESSION_ID=s", "DSH_SHELL=1"},
		},
		{
			name:   "malformed entries are skipped and the last duplicate wins",
			parent: []string{"NOEQUALS", "=bad", "A=1", "A=2", "B=x=y"},
			want:   []string{"A=2", "B=x=y", "GIT_PAGER=cat", "NO_COLOR=1", "PAGER=cat", "TERM=dumb"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.parent)
			got := ChildEnv(tc.parent, tc.explicit, tc.dsh)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
			if !slices.Equal(tc.parent, before) {
				t.Fatal("parent environment modified")
			}
		})
	}
}

func TestResolveHome(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	envOf := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		name       string
		configured *string
		env        map[string]string
		osHome     string
		want       string
	}{
		{"a configured home wins over $DSH_HOME", str("/cfg"), map[string]string{"DSH_HOME": "/env"}, "/home/u", "/cfg"},
		{"$DSH_HOME is used when nothing is configured", nil, map[string]string{"DSH_HOME": "/env/home/"}, "/home/u", "/env/home"},
		{"a whitespace $DSH_HOME falls back to ~/.dsh", nil, map[string]string{"DSH_HOME": " \t\n"}, "/home/u", "/home/u/.dsh"},
		{"an empty $DSH_HOME falls back to ~/.dsh", nil, map[string]string{"DSH_HOME": ""}, "/home/u", "/home/u/.dsh"},
		{"no $DSH_HOME falls back to ~/.dsh", nil, nil, "/home/u", "/home/u/.dsh"},
		{"a configured empty string is not unset: it resolves to the cwd", str(""), map[string]string{"DSH_HOME": "/env"}, "/home/u", cwd},
		{"a bare ~ expands to the OS home", str("~"), nil, "/home/u", "/home/u"},
		{"~/ expands against the OS home", nil, map[string]string{"DSH_HOME": "~/state/dsh"}, "/home/u", "/home/u/state/dsh"},
		{"~user is not expanded", str("~other/x"), nil, "/home/u", filepath.Join(cwd, "~other/x")},
		{"a relative path is made absolute against the cwd", str("rel/../dsh"), nil, "/home/u", filepath.Join(cwd, "dsh")},
		{"an absolute path is cleaned", str("/a/./b/../c/"), nil, "/home/u", "/a/c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveHome(tc.configured, envOf(tc.env), tc.osHome)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("the default without an OS home is an error", func(t *testing.T) {
		if _, err := ResolveHome(nil, envOf(nil), ""); err == nil {
			t.Fatal("no error")
		}
		if _, err := ResolveHome(str("~/x"), envOf(nil), ""); err == nil {
			t.Fatal("no error")
		}
	})
}
