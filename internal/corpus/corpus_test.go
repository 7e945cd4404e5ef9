package corpus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records what Require did; Fatalf and Skipf end the call as the
// testing package's do (runtime.Goexit there, a panic here).
type fakeTB struct {
	fatal, skip string
}

type stopped struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(stopped{})
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	panic(stopped{})
}

// run calls fn with a fakeTB and returns it with fn's result.
func run(fn func(TB) string) (tb *fakeTB, dir string) {
	tb = &fakeTB{}
	defer func() {
		if r := recover(); r != nil && r != (stopped{}) {
			panic(r)
		}
	}()
	return tb, fn(tb)
}

// tree makes root/checkout/pkg and, when with, root/<c.Rel>; it returns the
// package directory and the corpus directory.
func tree(t *testing.T, c Corpus, with bool) (pkg, dir string) {
	t.Helper()
	root := t.TempDir()
	pkg = filepath.Join(root, "checkout", "pkg")
	dir = filepath.Join(root, c.Rel)
	must(t, os.MkdirAll(pkg, 0o755))
	if with {
		must(t, os.MkdirAll(dir, 0o755))
	}
	return pkg, dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	for _, c := range []Corpus{DeepSeek(), Harnesses()} {
		t.Run(c.Name+" are found in a directory above the start", func(t *testing.T) {
			t.Setenv(c.Env, "")
			pkg, dir := tree(t, c, true)
			if got, err := c.Find(pkg); err != nil || got != dir {
				t.Fatalf("Find = %q, %v; want %q", got, err, dir)
			}
		})
		t.Run(c.Name+" that are nowhere above give every place looked", func(t *testing.T) {
			t.Setenv(c.Env, "")
			pkg, dir := tree(t, c, false)
			_, err := c.Find(pkg)
			var nf *NotFoundError
			if !errors.As(err, &nf) || nf.Start != pkg || nf.Tried[0] != filepath.Join(pkg, c.Rel) || !strings.Contains(err.Error(), dir) ||
				nf.Tried[len(nf.Tried)-1] != filepath.Join(string(filepath.Separator), c.Rel) || !strings.Contains(err.Error(), c.Env) {
				t.Fatalf("Find: %v", err)
			}
		})
		t.Run(c.Name+" are taken from the override", func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv(c.Env, tmp)
			if got, err := c.Find("/nonexistent"); err != nil || got != tmp {
				t.Fatalf("Find = %q, %v; want %q", got, err, tmp)
			}
			t.Setenv(c.Env, filepath.Join(tmp, "missing"))
			var nf *NotFoundError
			if _, err := c.Find(tmp); err == nil || errors.As(err, &nf) || !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("Find with a missing override: %v, want a not-exist error", err)
			}
		})
	}
}

func TestRequire(t *testing.T) {
	tests := []struct {
		name, ci string
		with     bool
		fail     bool
	}{
		{"a present corpus is returned", "", true, false},
		{"a present corpus is returned under CI", "true", true, false},
		{"an absent corpus skips the test when CI is unset", "", false, false},
		{"an absent corpus skips the test when CI is false", "false", false, false},
		{"an absent corpus fails the test when CI is true", "true", false, true},
		{"an absent corpus fails the test when CI is 1", "1", false, true},
	}
	for _, c := range []Corpus{DeepSeek(), Harnesses()} {
		for _, tt := range tests {
			t.Run(c.Name+": "+tt.name, func(t *testing.T) {
				t.Setenv(c.Env, "")
				t.Setenv(EnvCI, tt.ci)
				pkg, dir := tree(t, c, tt.with)
				t.Chdir(pkg)
				tb, got := run(c.Require)
				switch {
				case tt.with:
					if got != dir || tb.fatal != "" || tb.skip != "" {
						t.Errorf("Require = %q (fatal %q, skip %q); want %q", got, tb.fatal, tb.skip, dir)
					}
				case tt.fail:
					if tb.fatal == "" || tb.skip != "" || !strings.Contains(tb.fatal, filepath.Join(pkg, c.Rel)) || !strings.Contains(tb.fatal, "CI is set") {
						t.Errorf("fatal %q, skip %q; want a failure naming %s", tb.fatal, tb.skip, filepath.Join(pkg, c.Rel))
					}
				default:
					if tb.skip == "" || tb.fatal != "" || strings.Contains(tb.skip, "\n") || !strings.Contains(tb.skip, c.Rel) || !strings.Contains(tb.skip, pkg) {
						t.Errorf("skip %q, fatal %q; want one line naming %s above %s", tb.skip, tb.fatal, c.Rel, pkg)
					}
				}
			})
		}
	}
	t.Run("a set override naming no directory fails the test even without CI", func(t *testing.T) {
		t.Setenv(EnvCI, "")
		t.Setenv(EnvDir, filepath.Join(t.TempDir(), "missing"))
		if tb, _ := run(Require); tb.fatal == "" || !strings.Contains(tb.fatal, EnvDir) {
			t.Errorf("fatal %q, skip %q", tb.fatal, tb.skip)
		}
	})
	t.Run("Optional reports an absent corpus without skipping", func(t *testing.T) {
		t.Setenv(EnvDir, "")
		t.Setenv(EnvCI, "")
		pkg, _ := tree(t, DeepSeek(), false)
		t.Chdir(pkg)
		var ok bool
		tb, _ := run(func(tb TB) string { d, o := Optional(tb); ok = o; return d })
		if ok || tb.fatal != "" || tb.skip != "" {
			t.Errorf("ok %v, fatal %q, skip %q", ok, tb.fatal, tb.skip)
		}
		t.Setenv(EnvCI, "true")
		if tb, _ := run(func(tb TB) string { d, _ := Optional(tb); return d }); tb.fatal == "" {
			t.Error("Optional under CI did not fail")
		}
	})
}

func TestFixtures(t *testing.T) {
	d := Fixtures(t)
	if !filepath.IsAbs(d) || !strings.HasSuffix(d, filepath.FromSlash(FixtureDir)) {
		t.Fatalf("Fixtures = %q", d)
	}
	paths, err := filepath.Glob(filepath.Join(d, "*.jsonl"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("%s: %d logs, err %v", d, len(paths), err)
	}
}

// The shared corpora themselves, when they are there.

func TestTheDeepSeekCorpusHoldsItsLogs(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(Require(t), "*.jsonl"))
	if err != nil || len(paths) != 154 {
		t.Fatalf("%d logs, err %v; want 154", len(paths), err)
	}
}

func TestTheHarnessesCorpusHoldsBothHarnesses(t *testing.T) {
	d := RequireHarnesses(t)
	for _, p := range []string{"MANIFEST.md", "FORMATS.md", "claude-code", "codex"} {
		if _, err := os.Stat(filepath.Join(d, p)); err != nil {
			t.Error(err)
		}
	}
}
