package corpus

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDirFindsTheSharedCorpus(t *testing.T) {
	d := Require(t)
	paths, err := filepath.Glob(filepath.Join(d, "*.jsonl"))
	if err != nil || len(paths) < 100 {
		t.Fatalf("corpus %s: %d logs, err %v", d, len(paths), err)
	}
}

func TestDirHonoursTheOverride(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv(EnvDir, tmp)
	if d, err := Dir(); err != nil || d != tmp {
		t.Fatalf("Dir() = %q, %v; want %q", d, err, tmp)
	}
	t.Setenv(EnvDir, filepath.Join(tmp, "missing"))
	if _, err := Dir(); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("Dir() with a missing override: %v, want a not-exist error", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}
