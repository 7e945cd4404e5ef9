package dshq

// Header format versions a reader accepts
// (docs/protocol.md#2-the-session-log-stream).
const (
	// FormatVersion0 is the original G0 header: seedLength instead of isSeeded.
	FormatVersion0 = 0
	// FormatVersion2 is the G2 header with isSeeded; every reply uses it.
	FormatVersion2 = 2
)

// OriginSubagent is the only allowed value of Header.Origin.
const OriginSubagent = "subagent"

// Harness names a session header's Harness can hold: the session was
// converted from that harness's own session file (docs/harnesses.md). A
// session written through the SDK by a harness of the original vocabulary
// has no Harness. Readers accept any name of the form record.ValidHarness
// checks, so a later converter needs no reader upgrade.
const (
	// HarnessClaudeCode is a Claude Code transcript
	// (~/.claude/projects/<project>/<session>.jsonl and its subagents).
	HarnessClaudeCode = "claude-code"
	// HarnessCodex is an OpenAI Codex CLI rollout
	// (~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl).
	HarnessCodex = "codex"
)

// Header is a session header in version 2 shape, the form every reply carries
// whatever version the log was written in
// (docs/protocol.md#3-the-trusted-query-api). Version is always 2.
type Header struct {
	Version         int     `json:"version"`
	ID              string  `json:"id"`
	CreatedAt       int64   `json:"createdAt"`
	Cwd             *string `json:"cwd,omitempty"`
	ParentSession   *string `json:"parentSession,omitempty"`
	IsSeeded        bool    `json:"isSeeded"`
	Origin          string  `json:"origin,omitempty"`
	DelegationDepth *int64  `json:"delegationDepth,omitempty"`
	AgentPreset     *string `json:"agentPreset,omitempty"`
	// Harness names the harness whose own file the session was converted
	// from (HarnessClaudeCode, HarnessCodex); "" for a native session.
	Harness string `json:"harness,omitempty"`
	// Machine names the host the session was captured on (dshq watch and
	// dshq import --machine; default the host name); "" when not recorded.
	Machine string `json:"machine,omitempty"`
}

// CwdOrEmpty returns the header's cwd and whether it has one.
func (h Header) CwdOrEmpty() (string, bool) {
	if h.Cwd == nil {
		return "", false
	}
	return *h.Cwd, true
}

// HeaderRecord is the first record of a session's log: the header as written,
// with the format version it was written in (the fold applies that version's
// rules) and the length of the inherited (forked) prefix.
type HeaderRecord struct {
	Header Header `json:"header"`
	// FormatVersion is 0 or 2: the version the log was written in.
	FormatVersion int `json:"formatVersion"`
	// InheritedEventCount is the number of leading events inherited from a
	// fork parent (G0 seedLength; G2 inheritedEventCount). 0 when absent.
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// Raw is the header record exactly as written (a JSON object).
	Raw []byte `json:"-"`
}

// Str returns a pointer to s, for optional header fields.
func Str(s string) *string { return &s }
