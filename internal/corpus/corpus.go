// Package corpus locates the real session logs of the original harness that
// every developer and CI run has at ../shared/corpus/deepseek-harness/logs
// beside the project (see that directory's README). Tests use them as input.
package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// EnvDir names an environment variable that overrides the location.
const EnvDir = "DSHQ_CORPUS"

// rel is the corpus's path below the directory that holds the project.
var rel = filepath.Join("shared", "corpus", "deepseek-harness", "logs")

// Dir returns the corpus directory: $DSHQ_CORPUS when set, else the first
// ../shared/corpus/deepseek-harness/logs found walking up from this source
// file (the project root's parent holds shared/). It fails, naming where it
// looked, when there is none.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return existing(d)
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("corpus: cannot locate the source tree; set %s", EnvDir)
	}
	var tried []string
	for d := filepath.Dir(file); ; d = filepath.Dir(d) {
		c := filepath.Join(d, rel)
		if _, err := existing(c); err == nil {
			return c, nil
		}
		tried = append(tried, c)
		if parent := filepath.Dir(d); parent == d {
			break
		}
	}
	return "", fmt.Errorf("corpus: no session logs found (looked in %v); set %s", tried, EnvDir)
}

func existing(d string) (string, error) {
	st, err := os.Stat(d)
	if err != nil {
		return "", fmt.Errorf("corpus: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("corpus: %s is not a directory", d)
	}
	return d, nil
}

// TB is the part of testing.TB that Require uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Require returns the corpus directory or fails the test: the corpus is part
// of every checkout's surroundings, so its absence is an error, not a skip.
func Require(t TB) string {
	t.Helper()
	d, err := Dir()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d
}
