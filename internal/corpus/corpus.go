// Package corpus gives tests the session logs they read.
//
// The fixture logs (Fixtures) are this repository's own, in testdata/logs at
// the module root: small logs written for the tests, covering every feature
// those tests rely on, always present. The shared corpora are real logs of
// other projects kept beside the checkout in ../shared/corpus, and never
// copied into this repository (they come from other repositories): the
// deepseek-harness logs (Dir, Require) and the Claude Code and Codex logs of
// agent-harnesses (HarnessesDir, RequireHarnesses).
//
// A shared corpus may be absent: a fresh clone has no ../shared. A test that
// reads one gets it from Require, RequireHarnesses, Optional or Each: when
// the corpus is absent the test is skipped with one line, unless the
// environment variable CI is set (to anything but "", "0" or "false";
// .ci/run sets CI=true), in which case it fails naming every place it
// looked. Every test that reads a shared corpus goes through this package.
package corpus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Environment variables that point at a corpus directory directly, instead
// of the walk up from the working directory; a set variable naming a
// missing directory is an error, CI or not.
const (
	// EnvDir overrides the location of the deepseek-harness logs.
	EnvDir = "DSHQ_CORPUS"
	// EnvHarnessesDir overrides the location of the agent-harnesses corpus.
	EnvHarnessesDir = "DSHQ_HARNESS_CORPUS"
	// EnvCI, when set, turns an absent shared corpus from a skip into a
	// failure.
	EnvCI = "CI"
)

// A Corpus is one shared corpus: where it sits below the directory that
// holds the checkout, and what overrides that.
type Corpus struct {
	// Name is how messages call it.
	Name string
	// Rel is its path below a directory above the working directory.
	Rel string
	// Env names the variable that overrides the walk.
	Env string
}

// DeepSeek is the deepseek-harness corpus: 154 G0 session logs from the
// original harness's snapshot tests (shared/corpus/deepseek-harness/logs).
func DeepSeek() Corpus {
	return Corpus{Name: "the deepseek-harness logs", Rel: filepath.Join("shared", "corpus", "deepseek-harness", "logs"), Env: EnvDir}
}

// Harnesses is the agent-harnesses corpus: Claude Code and Codex session
// logs with MANIFEST.md and FORMATS.md (shared/corpus/agent-harnesses).
func Harnesses() Corpus {
	return Corpus{Name: "the agent-harnesses logs", Rel: filepath.Join("shared", "corpus", "agent-harnesses"), Env: EnvHarnessesDir}
}

// NotFoundError is Find's error when a corpus is in none of the places
// looked.
type NotFoundError struct {
	Corpus Corpus
	Start  string   // where the walk began
	Tried  []string // every directory looked for, nearest first
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("corpus: %s are not beside this checkout: %s not found (looked in %s); set %s to their directory",
		e.Corpus.Name, e.Corpus.Rel, strings.Join(e.Tried, ", "), e.Corpus.Env)
}

// Dir returns the directory of the deepseek-harness logs, found from the
// working directory.
func Dir() (string, error) { return DeepSeek().Dir() }

// HarnessesDir returns the directory of the agent-harnesses corpus, found
// from the working directory.
func HarnessesDir() (string, error) { return Harnesses().Dir() }

// Dir returns the corpus directory, found from the working directory (a
// test's is its package directory).
func (c Corpus) Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("corpus: %w", err)
	}
	return c.Find(wd)
}

// Find returns $Env when set (an error when it is not a directory), else
// the first <d>/Rel that is a directory, d walking up from start to the
// root; a *NotFoundError when there is none.
func (c Corpus) Find(start string) (string, error) {
	if d := os.Getenv(c.Env); d != "" {
		if err := isDir(d); err != nil {
			return "", fmt.Errorf("corpus: %s=%s: %w", c.Env, d, err)
		}
		return d, nil
	}
	start, err := filepath.Abs(start)
	if err != nil {
		return "", fmt.Errorf("corpus: %w", err)
	}
	nf := &NotFoundError{Corpus: c, Start: start}
	for d := start; ; d = filepath.Dir(d) {
		cand := filepath.Join(d, c.Rel)
		if isDir(cand) == nil {
			return cand, nil
		}
		nf.Tried = append(nf.Tried, cand)
		if filepath.Dir(d) == d {
			return "", nf
		}
	}
}

func isDir(d string) error {
	st, err := os.Stat(d)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", d)
	}
	return nil
}

// TB is the part of testing.TB this package uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Require returns the directory of the deepseek-harness logs, or skips or
// fails the test when they are absent (see the package comment).
func Require(t TB) string { t.Helper(); return DeepSeek().Require(t) }

// RequireHarnesses returns the directory of the agent-harnesses corpus, or
// skips or fails the test when it is absent.
func RequireHarnesses(t TB) string { t.Helper(); return Harnesses().Require(t) }

// Require returns the corpus directory. When the corpus is absent it skips
// the test with one line, or fails it (naming where it looked) when CI is
// set; a set override naming no directory always fails.
func (c Corpus) Require(t TB) string {
	t.Helper()
	d, nf := c.lookup(t)
	if nf != nil {
		t.Skipf("corpus: %s are absent (no %s above %s; %s=DIR points at them); skipped because CI is unset",
			c.Name, c.Rel, nf.Start, c.Env)
	}
	return d
}

// Optional returns the directory of the deepseek-harness logs and true, or
// "" and false when they are absent and CI is unset (failing the test when
// it is set): for tests that run on the fixture logs and add the shared
// corpus when there is one (fuzz seeds).
func Optional(t TB) (string, bool) {
	t.Helper()
	d, nf := DeepSeek().lookup(t)
	return d, nf == nil
}

// lookup returns the corpus directory, or the *NotFoundError when it is
// absent and CI is unset; it fails the test on any other error or when CI
// is set.
func (c Corpus) lookup(t TB) (string, *NotFoundError) {
	t.Helper()
	d, err := c.Dir()
	var nf *NotFoundError
	switch {
	case err == nil:
		return d, nil
	case !errors.As(err, &nf):
		t.Fatalf("%v", err)
	case CI():
		t.Fatalf("%v (%s is set, so the corpus is required)", err, EnvCI)
	}
	return "", nf
}

// CI reports whether the environment variable CI is set to anything but
// "", "0" or "false" (any case).
func CI() bool {
	v := strings.TrimSpace(os.Getenv(EnvCI))
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// FixtureDir is the fixture logs' directory below the module root.
const FixtureDir = "testdata/logs"

// Fixtures returns the absolute path of the repository's fixture logs
// (testdata/logs at the module root, found walking up from the working
// directory to go.mod), failing the test when it is missing.
func Fixtures(t TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("corpus: %v", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir := filepath.Join(d, filepath.FromSlash(FixtureDir))
			if err := isDir(dir); err != nil {
				t.Fatalf("corpus: the fixture logs: %v", err)
			}
			return dir
		}
		if filepath.Dir(d) == d {
			t.Fatalf("corpus: no go.mod above %s", wd)
		}
	}
}

// Each runs fn in two subtests: "fixtures" on the fixture logs, and
// "shared" on the deepseek-harness logs (skipped or failed as Require
// says when they are absent). shared tells fn which it was given, for the
// facts it checks.
func Each(t *testing.T, fn func(t *testing.T, dir string, shared bool)) {
	t.Helper()
	t.Run("fixtures", func(t *testing.T) { fn(t, Fixtures(t), false) })
	t.Run("shared", func(t *testing.T) { fn(t, Require(t), true) })
}
