package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf16"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
)

// The original harness's session root
// (docs/file-format.md#the-session-root-layout):
// <root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.jsonl[.zstd], or
// <root>/_no-cwd/… for a header without cwd.

const (
	noCwdDir       = "_no-cwd"
	sessionPlain   = "session.jsonl"
	sessionZstd    = "session.jsonl.zstd"
	maxProjectKey  = 251
	projectDirWrap = "--"
)

// keepChar reports the characters both encodings keep as they are.
func keepChar(u uint16) bool {
	return u < 0x80 && (u >= 'a' && u <= 'z' || u >= 'A' && u <= 'Z' || u >= '0' && u <= '9' || u == '.' || u == '_' || u == '-')
}

// escapeUnit writes a UTF-16 code unit as ~XXXX.
func escapeUnit(b *strings.Builder, u uint16) { fmt.Fprintf(b, "~%04X", u) }

// encodeSegment is upstream's injective directory name of a session id.
func encodeSegment(id string) string {
	switch id {
	case ".":
		return "~002E"
	case "..":
		return "~002E~002E"
	}
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(id)) {
		if keepChar(u) {
			b.WriteByte(byte(u))
		} else {
			escapeUnit(&b, u)
		}
	}
	return b.String()
}

// projectDir is upstream's project directory of a cwd: runs of / \ : fold
// into one "-", other characters are kept or escaped, leading "-" are
// stripped ("root" if nothing is left), the key is cut to 251 characters
// and wrapped in "--…--". A session without cwd goes under _no-cwd.
func projectDir(cwd *string) string {
	if cwd == nil {
		return noCwdDir
	}
	var b strings.Builder
	sep := false
	for _, u := range utf16.Encode([]rune(*cwd)) {
		if u == '/' || u == '\\' || u == ':' {
			if !sep {
				b.WriteByte('-')
			}
			sep = true
			continue
		}
		sep = false
		if keepChar(u) {
			b.WriteByte(byte(u))
		} else {
			escapeUnit(&b, u)
		}
	}
	key := strings.TrimLeft(b.String(), "-")
	if key == "" {
		key = "root"
	}
	if len(key) > maxProjectKey {
		key = key[:maxProjectKey]
	}
	return projectDirWrap + key + projectDirWrap
}

// importFile is one file to import; when it sits in a session root,
// layout says so and is checked against its header.
type importFile struct {
	path string
	// inRoot is true for <root>/<project>/<id>/session.jsonl[.zstd].
	inRoot bool
	// refused is set when discovery already refused the file.
	refused string
	// hint is the format of the harness root the file was found under
	// (follow.RootFormat), used when its lines do not tell.
	hint capture.Format
}

// isProjectDir reports a directory name of the session root layout.
func isProjectDir(name string) bool {
	return name == noCwdDir || len(name) > 4 && strings.HasPrefix(name, projectDirWrap) && strings.HasSuffix(name, projectDirWrap)
}

// logSuffixes are the file names a directory walk imports: JSONL, and
// JSONL compressed with zstd under the zstd tool's suffix or the harness's.
var logSuffixes = []string{".jsonl", ".jsonl.zst", ".jsonl.zstd"}

// isLog reports a session log file name.
func isLog(name string) bool {
	for _, s := range logSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// skipReason says why a directory walk passes over an entry that is not a
// directory ("" when it imports it).
func skipReason(d fs.DirEntry) string {
	switch {
	case d.Type()&fs.ModeSymlink != 0:
		return "a symbolic link (not followed; name its target to import it)"
	case !d.Type().IsRegular():
		return "not a regular file"
	case !isLog(d.Name()):
		return "not a session log (.jsonl, .jsonl.zst, .jsonl.zstd)"
	}
	return ""
}

// discover expands the import arguments into files, in a stable order: a
// file is itself; a directory is walked for *.jsonl, *.jsonl.zst and
// *.jsonl.zstd files, and every other file it holds is returned as skipped,
// with its reason. Inside a session root a file is recognised by its place;
// a session directory holding both encodings, and a flat
// <project>/<id>.jsonl file (an older layout), are refused as upstream
// refuses them.
func discover(paths []string) (files []importFile, skipped []importResult, err error) {
	skipped = []importResult{}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("import %s: %w", p, unwrapPathError(err))
		}
		if !fi.IsDir() {
			files = append(files, classify(p))
			continue
		}
		var found []importFile
		hint := follow.RootFormat(p)
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if why := skipReason(d); why != "" {
				skipped = append(skipped, importResult{File: path, Reason: why})
				return nil
			}
			f := classify(path)
			f.hint = hint
			found = append(found, f)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("import %s: %w", p, unwrapPathError(err))
		}
		files = append(files, mixedEncodings(found)...)
	}
	return files, skipped, nil
}

// classify recognises a file's place in a session root.
func classify(path string) importFile {
	dir := filepath.Dir(path)
	name := filepath.Base(path)
	if name == sessionPlain || name == sessionZstd {
		if isProjectDir(filepath.Base(filepath.Dir(dir))) {
			return importFile{path: path, inRoot: true}
		}
	}
	if isProjectDir(filepath.Base(dir)) {
		return importFile{path: path, refused: "a flat <project>/<id>.jsonl file is an older layout the original refuses; move it to <project>/<id>/session.jsonl"}
	}
	return importFile{path: path}
}

// mixedEncodings refuses both files of a session directory that holds
// session.jsonl and session.jsonl.zstd (a root uses one encoding).
func mixedEncodings(files []importFile) []importFile {
	byDir := map[string][]int{}
	for i, f := range files {
		if f.inRoot {
			byDir[filepath.Dir(f.path)] = append(byDir[filepath.Dir(f.path)], i)
		}
	}
	for _, idx := range byDir {
		if len(idx) > 1 {
			for _, i := range idx {
				files[i].refused = "the session directory holds both session.jsonl and session.jsonl.zstd"
			}
		}
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files
}

// unwrapPathError drops the path an *fs.PathError repeats.
func unwrapPathError(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
