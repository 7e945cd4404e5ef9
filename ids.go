package dshq

import (
	"fmt"
	"unicode/utf8"
)

// MaxSessionIDBytes is the longest session id, in bytes
// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys).
const MaxSessionIDBytes = 512

// SessionIDProblem returns what makes id not a session id — 1 to 512 bytes
// of valid UTF-8 with no control characters (C0, DEL, C1),
// docs/protocol.md#1-session-ids-subject-tokens-workspace-keys — or "" when
// it is one. The harness SDK refuses such an id before anything is stored (record.ValidateSessionID), the query API answers it
// SESSION_QUERY_INVALID_REQUEST, and the tools treat a caller so named as
// no stored session.
func SessionIDProblem(id string) string {
	switch {
	case len(id) == 0:
		return "session id is empty"
	case len(id) > MaxSessionIDBytes:
		return fmt.Sprintf("session id is %d bytes, more than the %d allowed", len(id), MaxSessionIDBytes)
	case !utf8.ValidString(id):
		return "session id is not valid UTF-8"
	}
	for i, r := range id {
		if r < 0x20 || (r >= 0x7F && r <= 0x9F) {
			return fmt.Sprintf("session id contains control character U+%04X at byte %d", r, i)
		}
	}
	return ""
}
