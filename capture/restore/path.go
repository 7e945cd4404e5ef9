package restore

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClaudeProjectKey is the directory name Claude Code keeps a project's
// transcripts under: the cwd with every character other than an ASCII
// letter or digit turned into "-" (what Claude Code 2.1 does: /, ., _,
// spaces and any other character alike).
func ClaudeProjectKey(cwd string) string {
	b := []byte(cwd)
	out := make([]byte, 0, len(b))
	for _, r := range cwd {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			out = append(out, byte(r))
		} else {
			out = append(out, '-')
		}
	}
	return string(out)
}

// ClaudeTranscript is where Claude Code looks for session sessionID of the
// project in cwd: <projects>/<key>/<sessionID>.jsonl.
func ClaudeTranscript(projects, cwd, sessionID string) string {
	return filepath.Join(projects, ClaudeProjectKey(cwd), sessionID+".jsonl")
}

// SubagentsLayoutSince is the first Claude Code version that writes a
// subagent's transcript under <sessionId>/subagents/ (before: beside the
// session's transcript).
const SubagentsLayoutSince = "2.1.2"

// ClaudeSubagent is where a subagent file of session sessionID goes: under
// <key>/<sessionID>/subagents/ when version (the Claude Code version its
// lines state, else its parent's) is SubagentsLayoutSince or later or not
// known, else beside the transcript, as that version wrote it.
func ClaudeSubagent(projects, cwd, sessionID, agentID, version string) string {
	dir := filepath.Join(projects, ClaudeProjectKey(cwd))
	name := "agent-" + agentID + ".jsonl"
	if version != "" && VersionLess(version, SubagentsLayoutSince) {
		return filepath.Join(dir, name)
	}
	return filepath.Join(dir, sessionID, "subagents", name)
}

// VersionLess reports a < b for dotted numeric versions ("2.0.29" <
// "2.1.2"); a part that is not a number compares as 0.
func VersionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(strings.TrimFunc(as[i], func(r rune) bool { return r < '0' || r > '9' }))
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// CodexRollout is where Codex keeps thread id started at t:
// <sessions>/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl, the date
// and time in t's location (Codex names its files in local time).
func CodexRollout(sessions string, t time.Time, id string) string {
	return filepath.Join(sessions, t.Format("2006"), t.Format("01"), t.Format("02"),
		fmt.Sprintf("rollout-%s-%s.jsonl", t.Format("2006-01-02T15-04-05"), id))
}

// Hint is how to restore a session and continue it, from its header alone
// (search hits and the web UI show it; dshq restore prints the exact
// command from the session's lines).
type Hint struct {
	// Restore is the dshq restore command line.
	Restore string `json:"restore"`
	// Continue is the harness's command that resumes the session ("" for a
	// session no harness here resumes: a native one).
	Continue string `json:"continue,omitempty"`
}

// HintFor returns the hint of session id of harness (the header's Harness)
// in cwd ("" when it states none). A Claude Code subagent is continued
// through its parent's session.
func HintFor(harness, id, cwd string) Hint {
	h := Hint{Restore: "dshq restore " + shellQuote(id)}
	cd := ""
	if cwd != "" {
		cd = "cd " + shellQuote(cwd) + " && "
	}
	switch harness {
	case "claude-code":
		sid, ok := strings.CutPrefix(id, "cc-")
		if i := strings.Index(sid, "-agent-"); i >= 0 {
			sid = sid[:i]
		}
		if ok && sid != "" {
			h.Continue = cd + "claude --resume " + shellQuote(sid)
		}
	case "codex":
		if tid, ok := strings.CutPrefix(id, "codex-"); ok && tid != "" {
			h.Continue = cd + "codex resume " + shellQuote(tid)
		}
	}
	return h
}

// ClaudeContinue and CodexContinue are the commands that resume a restored
// session in cwd.
func ClaudeContinue(cwd, sessionID string) string {
	return "cd " + shellQuote(cwd) + " && claude --resume " + shellQuote(sessionID)
}

// CodexContinue: see ClaudeContinue.
func CodexContinue(cwd, threadID string) string {
	if cwd == "" {
		return "codex resume " + shellQuote(threadID)
	}
	return "cd " + shellQuote(cwd) + " && codex resume " + shellQuote(threadID)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
