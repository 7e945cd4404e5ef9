package corpus

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// HarnessFile is one session file of the agent-harnesses corpus.
type HarnessFile struct {
	// Harness is the corpus's top directory: "claude-code" or "codex".
	Harness string
	// Rel is the path below that directory, with slashes.
	Rel string
	// Path is the file's path.
	Path string
}

// HarnessFiles returns every .jsonl session file of the agent-harnesses
// corpus at dir (RequireHarnesses), in path order; sidecars such as
// agent-*.meta.json and the provenance README.md files are not session
// files.
func HarnessFiles(dir string) ([]HarnessFile, error) {
	var out []HarnessFile
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h, rest, _ := strings.Cut(filepath.ToSlash(rel), "/")
		out = append(out, HarnessFile{Harness: h, Rel: rest, Path: p})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// RequireHarnessFiles returns the session files of one harness of the
// agent-harnesses corpus (RequireHarnesses, HarnessFiles), failing t when
// the corpus cannot be read or holds none of that harness's files.
func RequireHarnessFiles(t TB, harness string) []HarnessFile {
	t.Helper()
	files, err := HarnessFiles(RequireHarnesses(t))
	if err != nil {
		t.Fatalf("%v", err)
	}
	var out []HarnessFile
	for _, f := range files {
		if f.Harness == harness {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Fatalf("the corpus has no %s session files", harness)
	}
	return out
}
