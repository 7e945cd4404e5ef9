package capture_test

import (
	"go/build"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestConvertersImportOnlyTheVocabulary keeps the converters pure: the
// capture packages import the standard library, the vocabulary (the root
// package), record, fold and each other, and nothing that does I/O of its
// own (no bus, no projection, no NATS). record's own dependencies are its
// business.
func TestConvertersImportOnlyTheVocabulary(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	const module = "github.com/dshq/dshq"
	allowed := map[string]bool{
		module: true, module + "/record": true, module + "/fold": true,
		module + "/capture": true, module + "/capture/internal/build": true,
	}
	for _, pkg := range []string{".", "claudecode", "codex", "internal/build", "restore"} {
		p, err := build.ImportDir(filepath.Join(dir, pkg), 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range p.Imports {
			first, _, _ := strings.Cut(imp, "/")
			std := !strings.Contains(first, ".")
			if !std && !allowed[imp] {
				t.Errorf("capture/%s imports %s", pkg, imp)
			}
			if std && (imp == "os" || imp == "net" || strings.HasPrefix(imp, "net/") || imp == "io/fs") {
				t.Errorf("capture/%s imports %s: a converter does no I/O", pkg, imp)
			}
		}
	}
}
