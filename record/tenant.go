package record

import (
	"errors"
	"strings"

	"github.com/dshq/dshq"
)

// MaxTenantBytes is the longest tenant name, in bytes.
const MaxTenantBytes = 64

// ErrInvalidTenant is the sentinel wrapped by every tenant name refusal.
var ErrInvalidTenant = errors.New("invalid tenant")

// ValidateTenant reports whether t is a tenant name
// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys): 1
// to 64 bytes of [A-Za-z0-9_-]. A tenant name is one NATS subject token, a
// key-value key fragment and the tail of an inbox prefix (_INBOX_<tenant>);
// the empty string is no tenant (the trusted, untenanted namespace) and is
// refused here. A refusal is a *dshq.Error with code
// SESSION_QUERY_INVALID_REQUEST wrapping ErrInvalidTenant.
func ValidateTenant(t string) error {
	switch {
	case t == "":
		return invalidTenant("tenant name is empty")
	case len(t) > MaxTenantBytes:
		return invalidTenant("tenant name is %d bytes, more than the %d allowed", len(t), MaxTenantBytes)
	}
	for i := 0; i < len(t); i++ {
		if !plainByte(t[i]) {
			return invalidTenant("tenant name %q has a byte other than [A-Za-z0-9_-] at %d", t, i)
		}
	}
	return nil
}

func invalidTenant(format string, args ...any) error {
	e := dshq.Errorf(dshq.CodeInvalidRequest, format, args...)
	e.Err = ErrInvalidTenant
	return e
}

// LogKey returns the log key of a session: the part of its log subject after
// dsh.log. (docs/protocol.md#2-the-session-log-stream). It is the subject token
// alone for a session of no tenant (tenant ""), and <tenant>.<token> for a
// tenant's session. It does not validate its arguments.
func LogKey(tenant, token string) string {
	if tenant == "" {
		return token
	}
	return tenant + "." + token
}

// SplitLogKey is the inverse of LogKey: it splits a log key of one token
// (no tenant) or two (tenant, token) and validates both parts (ValidateTenant,
// ParseSubjectToken). Anything else — more tokens, an empty token, a tenant
// that is not a tenant name, a token SubjectToken would never produce — is a
// *dshq.Error with code SESSION_QUERY_INVALID_REQUEST wrapping
// ErrInvalidTenant or ErrInvalidSubjectToken.
func SplitLogKey(key string) (tenant, token string, err error) {
	tenant, token, tenanted := strings.Cut(key, ".")
	if !tenanted {
		tenant, token = "", key
	} else if err := ValidateTenant(tenant); err != nil {
		return "", "", err
	}
	if strings.Contains(token, ".") {
		return "", "", invalidToken("log key %q has more than two tokens", key)
	}
	if _, err := ParseSubjectToken(token); err != nil {
		return "", "", err
	}
	return tenant, token, nil
}

// plainByte reports whether c is in [A-Za-z0-9_-].
func plainByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
