// Package golden is the golden-file check of dshq's tests, with the one
// -update flag that rewrites the files: `go test ./pkg -update`, then
// review the diff.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files (then review the diff)")

// Updating reports whether the test run rewrites golden files (-update).
func Updating() bool { return *update }

// Check compares got with the golden file at path; under -update it writes
// got there instead (creating the directory).
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from its golden file (run the test with -update and review the diff)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
