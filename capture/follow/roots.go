package follow

import (
	"os"
	"path/filepath"

	"github.com/dshq/dshq/capture"
)

// Root is a directory a harness writes its session files under.
type Root struct {
	Format capture.Format
	Dir    string
}

// Environment variables that move the harnesses' homes (as the harnesses
// themselves read them).
const (
	// EnvClaudeConfigDir is Claude Code's configuration directory
	// (default ~/.claude); its transcripts are under projects/.
	EnvClaudeConfigDir = "CLAUDE_CONFIG_DIR"
	// EnvCodexHome is Codex's home (default ~/.codex); its rollouts are
	// under sessions/ and archived_sessions/.
	EnvCodexHome = "CODEX_HOME"
)

// DefaultRoots returns the harnesses' own roots: Claude Code's
// $CLAUDE_CONFIG_DIR/projects (default ~/.claude/projects), Codex's
// $CODEX_HOME/sessions and $CODEX_HOME/archived_sessions (default
// ~/.codex/…). getenv reads the environment; home is the user's home
// directory.
func DefaultRoots(getenv func(string) string, home string) []Root {
	claude := getenv(EnvClaudeConfigDir)
	if claude == "" {
		claude = filepath.Join(home, ".claude")
	}
	codexHome := getenv(EnvCodexHome)
	if codexHome == "" {
		codexHome = filepath.Join(home, ".codex")
	}
	return []Root{
		{Format: capture.FormatClaudeCode, Dir: filepath.Join(claude, "projects")},
		{Format: capture.FormatCodex, Dir: filepath.Join(codexHome, "sessions")},
		{Format: capture.FormatCodex, Dir: filepath.Join(codexHome, "archived_sessions")},
	}
}

// RootFormat returns the harness whose own root dir looks like (a
// projects directory of a .claude directory, a sessions or
// archived_sessions directory of a .codex directory), FormatUnknown for
// any other.
func RootFormat(dir string) capture.Format {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return capture.FormatUnknown
	}
	base, parent := filepath.Base(abs), filepath.Base(filepath.Dir(abs))
	switch {
	case base == "projects" && parent == ".claude":
		return capture.FormatClaudeCode
	case (base == "sessions" || base == "archived_sessions") && parent == ".codex":
		return capture.FormatCodex
	}
	return capture.FormatUnknown
}

// Exists reports whether dir is a directory.
func Exists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
