package record

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"

	"github.com/dshq/dshq"
)

// MaxSessionIDBytes is the longest session id, in bytes
// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys).
const MaxSessionIDBytes = dshq.MaxSessionIDBytes

// maxPlainToken is the longest id that is its own subject token.
const maxPlainToken = 200

// ErrInvalidSessionID is the sentinel wrapped by every session id refusal.
var ErrInvalidSessionID = errors.New("invalid session id")

// ErrInvalidSubjectToken is the sentinel wrapped by every subject token
// refusal.
var ErrInvalidSubjectToken = errors.New("invalid subject token")

// tokenEncoding is unpadded base64url (RFC 4648 §5) that refuses non-zero
// trailing bits, so every id has exactly one token.
var tokenEncoding = base64.RawURLEncoding.Strict()

// ValidateSessionID reports whether id is a session id: 1 to 512 bytes of
// valid UTF-8 with no control characters (C0, DEL, C1). A refusal is a
// *dshq.Error with code SESSION_QUERY_INVALID_REQUEST whose message names the
// problem; it wraps ErrInvalidSessionID.
func ValidateSessionID(id string) error {
	if problem := dshq.SessionIDProblem(id); problem != "" {
		return invalidID("%s", problem)
	}
	return nil
}

func invalidID(format string, args ...any) error {
	e := dshq.Errorf(dshq.CodeInvalidRequest, format, args...)
	e.Err = ErrInvalidSessionID
	return e
}

func invalidToken(format string, args ...any) error {
	e := dshq.Errorf(dshq.CodeInvalidRequest, format, args...)
	e.Err = ErrInvalidSubjectToken
	return e
}

// isPlain reports whether id matches ^[A-Za-z0-9_-]{1,200}$.
func isPlain(id string) bool {
	if len(id) == 0 || len(id) > maxPlainToken {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// SubjectToken returns the NATS subject token of a session id
// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys):
// the id itself when it matches ^[A-Za-z0-9_-]{1,200}$, otherwise "~"
// followed by the unpadded base64url of its bytes. The mapping is injective.
// An invalid id is refused as by ValidateSessionID.
func SubjectToken(id string) (string, error) {
	if err := ValidateSessionID(id); err != nil {
		return "", err
	}
	if isPlain(id) {
		return id, nil
	}
	return "~" + tokenEncoding.EncodeToString([]byte(id)), nil
}

// ParseSubjectToken is the exact inverse of SubjectToken: it returns the
// session id whose token is tok. A token that SubjectToken would never
// produce (bad characters, bad base64, an encoded id that would have been
// plain, an invalid id) is refused with a *dshq.Error of code
// SESSION_QUERY_INVALID_REQUEST wrapping ErrInvalidSubjectToken.
func ParseSubjectToken(tok string) (string, error) {
	if len(tok) == 0 || tok[0] != '~' {
		if !isPlain(tok) {
			return "", invalidToken("subject token %q is neither a plain id nor ~base64url", tok)
		}
		return tok, nil
	}
	raw, err := tokenEncoding.DecodeString(tok[1:])
	if err != nil {
		return "", invalidToken("subject token %q: bad base64url: %v", tok, err)
	}
	id := string(raw)
	if err := ValidateSessionID(id); err != nil {
		return "", invalidToken("subject token %q encodes an invalid id: %v", tok, err)
	}
	if isPlain(id) {
		return "", invalidToken("subject token %q is not canonical: the id %q is its own token", tok, id)
	}
	// The decoder skips \r and \n; only the canonical spelling is a token.
	if "~"+tokenEncoding.EncodeToString(raw) != tok {
		return "", invalidToken("subject token %q is not canonical base64url", tok)
	}
	return id, nil
}

// WorkspaceKey returns the workspace key of a cwd
// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys): the
// lowercase hex of the first 16 bytes of SHA-256 of the cwd string, or "_"
// for a session without cwd.
func WorkspaceKey(cwd *string) string {
	if cwd == nil {
		return "_"
	}
	sum := sha256.Sum256([]byte(*cwd))
	return hex.EncodeToString(sum[:16])
}
