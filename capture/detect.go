package capture

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/dshq/dshq"
)

// Format is the kind of session file Detect recognises.
type Format string

// The formats.
const (
	// FormatUnknown is a file that is none of the others.
	FormatUnknown Format = ""
	// FormatDeepseek is a session log of the original harness (a header
	// line, then events), which record reads.
	FormatDeepseek Format = "deepseek-harness"
	// FormatClaudeCode is a Claude Code transcript (package claudecode).
	FormatClaudeCode Format = dshq.HarnessClaudeCode
	// FormatCodex is a Codex rollout (package codex).
	FormatCodex Format = dshq.HarnessCodex
)

// DetectLines is how many lines of a file's start Detect reads at most.
const DetectLines = 16

// codexTypes are the envelope types of a current Codex rollout.
var codexTypes = map[string]bool{
	"session_meta": true, "response_item": true, "event_msg": true, "turn_context": true, "compacted": true,
}

// claudeTypes are record types only Claude Code writes.
var claudeTypes = map[string]bool{
	"summary": true, "file-history-snapshot": true, "queue-operation": true, "progress": true,
	"custom-title": true, "system": true, "last-prompt": true, "agent-name": true, "pr-link": true,
}

// codexItems are the response items a legacy Codex rollout writes bare.
var codexItems = map[string]bool{
	"message": true, "reasoning": true, "function_call": true, "function_call_output": true,
	"custom_tool_call": true, "custom_tool_call_output": true, "local_shell_call": true, "web_search_call": true,
}

// Detect tells the format of a session file from its name and the first
// bytes of its content (head; up to DetectLines lines are read, a torn last
// line is ignored). The content decides: a deepseek-harness header line
// ({"type":"session","version":…}); Codex's {timestamp, type, payload}
// envelope, or the legacy {id, timestamp} line followed by bare response
// items; Claude Code's records (sessionId, uuid, parentUuid, or a type only
// it writes). A file whose lines say nothing (empty, not JSON) falls back
// on its name: *.jsonl.zstd (zstd-framed, which only the original harness
// writes) is deepseek-harness, rollout-*.jsonl is Codex, anything else is
// unknown.
func Detect(path string, head []byte) Format {
	n := 0
	legacyCodex := false
	for len(head) > 0 && n < DetectLines {
		i := bytes.IndexByte(head, '\n')
		if i < 0 {
			break
		}
		line := head[:i]
		head = head[i+1:]
		var r map[string]json.RawMessage
		if json.Unmarshal(line, &r) != nil || r == nil {
			continue
		}
		n++
		typ := ""
		if raw, ok := r["type"]; ok {
			_ = json.Unmarshal(raw, &typ)
		}
		_, hasPayload := r["payload"]
		switch {
		case typ == "session" && r["id"] != nil:
			return FormatDeepseek
		case codexTypes[typ] && hasPayload:
			return FormatCodex
		case r["sessionId"] != nil || r["uuid"] != nil || r["parentUuid"] != nil || claudeTypes[typ]:
			return FormatClaudeCode
		case n == 1 && typ == "" && r["id"] != nil && r["timestamp"] != nil:
			legacyCodex = true
		case legacyCodex && codexItems[typ]:
			return FormatCodex
		}
	}
	_, base := splitPath(path)
	switch {
	case strings.HasSuffix(base, ".jsonl.zstd"):
		return FormatDeepseek
	case strings.HasPrefix(base, "rollout-") && strings.HasSuffix(base, ".jsonl"):
		return FormatCodex
	}
	return FormatUnknown
}

func splitPath(p string) (string, string) {
	i := strings.LastIndexAny(p, `/\`)
	return p[:i+1], p[i+1:]
}
