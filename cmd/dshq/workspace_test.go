package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAWorkspaceFlagKeepsAWindowsPath: Claude Code on Windows writes its
// sessions' cwd as a drive-letter or UNC path, and a workspace is compared
// byte for byte, so --workspace (of dshq mcp, tail and restore) keeps such a
// path as written; before, filepath.Abs on Linux took it for a relative path
// and put the working directory before it, and a workspace caller of a
// Windows workspace found nothing.
func TestAWorkspaceFlagKeepsAWindowsPath(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ in, want string }{
		{`e:\Workspace\src\github\claude-code-log`, `e:\Workspace\src\github\claude-code-log`},
		{`C:/Users/dev/kiln`, `C:/Users/dev/kiln`},
		{`\\server\share\x`, `\\server\share\x`},
		{"/home/dev/kiln", "/home/dev/kiln"},
		{"kiln", filepath.Join(wd, "kiln")},
		{`e:relative`, filepath.Join(wd, `e:relative`)},
	} {
		got, err := callerWorkspace(c.in)
		if err != nil || got != c.want {
			t.Errorf("callerWorkspace(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
		if got, err := workspaceArg(c.in); err != nil || got != c.want {
			t.Errorf("workspaceArg(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}
