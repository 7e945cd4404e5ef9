package record

import (
	"errors"
	"strings"
	"testing"

	"github.com/dshq/dshq"
)

func TestValidateTenant(t *testing.T) {
	for _, name := range []string{"teamA", "a", "team-a_1", strings.Repeat("T", MaxTenantBytes)} {
		if err := ValidateTenant(name); err != nil {
			t.Errorf("ValidateTenant(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", "a.b", "a b", "*", ">", "a~b", "a=b", "a:b", "é", "a\x00", strings.Repeat("T", MaxTenantBytes+1)} {
		err := ValidateTenant(name)
		if err == nil {
			t.Errorf("ValidateTenant(%q) = nil, want an error", name)
			continue
		}
		if !errors.Is(err, ErrInvalidTenant) || dshq.ErrorCode(err) != dshq.CodeInvalidRequest {
			t.Errorf("ValidateTenant(%q): error %v has the wrong type", name, err)
		}
	}
}

func TestSplitLogKey(t *testing.T) {
	tests := []struct {
		name, key, tenant, token string
	}{
		{"a token alone has no tenant", "session-1", "", "session-1"},
		{"an encoded token alone has no tenant", "~YS5i", "", "~YS5i"},
		{"two tokens are a tenant and a token", "teamA.session-1", "teamA", "session-1"},
		{"a tenant's encoded token", "teamA.~YS5i", "teamA", "~YS5i"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, token, err := SplitLogKey(tt.key)
			if err != nil || tenant != tt.tenant || token != tt.token {
				t.Fatalf("SplitLogKey(%q) = %q, %q, %v; want %q, %q", tt.key, tenant, token, err, tt.tenant, tt.token)
			}
			if back := LogKey(tenant, token); back != tt.key {
				t.Fatalf("LogKey(%q, %q) = %q, want %q", tenant, token, back, tt.key)
			}
		})
	}
}

func TestSplitLogKeyRefusesWhatNoWriterProduces(t *testing.T) {
	tests := []struct {
		name, key string
		kind      error
	}{
		{"an empty key", "", ErrInvalidSubjectToken},
		{"three tokens", "a.b.c", ErrInvalidSubjectToken},
		{"an empty tenant", ".session-1", ErrInvalidTenant},
		{"an empty token after a tenant", "teamA.", ErrInvalidSubjectToken},
		{"a wildcard tenant", "*.session-1", ErrInvalidTenant},
		{"a wildcard token", "teamA.>", ErrInvalidSubjectToken},
		{"a non-canonical token", "teamA.~YWJj", ErrInvalidSubjectToken},
		{"a tenant too long", strings.Repeat("t", MaxTenantBytes+1) + ".s", ErrInvalidTenant},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			tenant, token, err := SplitLogKey(tt.key)
			if err == nil {
				t.Fatalf("SplitLogKey(%q) = %q, %q, want an error", tt.key, tenant, token)
			}
			if !errors.Is(err, tt.kind) || dshq.ErrorCode(err) != dshq.CodeInvalidRequest {
				t.Errorf("error %v does not wrap %v with SESSION_QUERY_INVALID_REQUEST", err, tt.kind)
			}
		})
	}
}

// FuzzSplitLogKey checks that SplitLogKey and LogKey are exact inverses:
// every key that splits is rebuilt byte for byte, and every valid tenant and
// session id give a key that splits back to them.
func FuzzSplitLogKey(f *testing.F) {
	for _, s := range []string{"session-1", "teamA.session-1", "teamA.~YS5i", "a.b.c", ".x", "x.", "*.>", "t.~YWJj", "会话", "a\x00.b"} {
		f.Add(s, "teamA", "s-1")
	}
	f.Fuzz(func(t *testing.T, key, tenant, id string) {
		if tn, tok, err := SplitLogKey(key); err == nil {
			if back := LogKey(tn, tok); back != key {
				t.Fatalf("LogKey(SplitLogKey(%q)) = %q", key, back)
			}
			if tn != "" && ValidateTenant(tn) != nil {
				t.Fatalf("SplitLogKey(%q) returned an invalid tenant %q", key, tn)
			}
			if _, err := ParseSubjectToken(tok); err != nil {
				t.Fatalf("SplitLogKey(%q) returned an invalid token %q: %v", key, tok, err)
			}
		}
		tok, err := SubjectToken(id)
		if err != nil {
			return
		}
		if ValidateTenant(tenant) != nil {
			tenant = ""
		}
		tn, back, err := SplitLogKey(LogKey(tenant, tok))
		if err != nil || tn != tenant || back != tok {
			t.Fatalf("SplitLogKey(LogKey(%q, %q)) = %q, %q, %v", tenant, tok, tn, back, err)
		}
	})
}
