package record

import (
	"errors"
	"strings"
	"testing"

	"github.com/dshq/dshq"
)

func TestValidateSessionID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want string // "" = valid; else a substring of the message
	}{
		{"a uuid is valid", "0b4f0c52-8d1e-4c6a-9a38-1f1f0e7f4a2b", ""},
		{"dots, stars, gt, slashes and spaces are valid data", "a.b*c>d/e f", ""},
		{"dot-dot is valid data", "..", ""},
		{"non-ASCII letters are valid", "会话-é", ""},
		{"512 bytes is valid", strings.Repeat("x", 512), ""},
		{"an empty id is refused", "", "empty"},
		{"513 bytes is refused", strings.Repeat("x", 513), "513 bytes"},
		{"a NUL is refused", "a\x00b", "U+0000"},
		{"a newline is refused", "a\nb", "U+000A"},
		{"DEL is refused", "a\x7fb", "U+007F"},
		{"a C1 control is refused", "a\u0085b", "U+0085"},
		{"invalid UTF-8 is refused", "a\xffb", "UTF-8"},
		{"a lone surrogate encoding is refused", "a\xed\xa0\x80b", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateSessionID(tt.id)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateSessionID: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateSessionID(%q) accepted", tt.id)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if dshq.ErrorCode(err) != dshq.CodeInvalidRequest {
				t.Errorf("code = %q", dshq.ErrorCode(err))
			}
			if !errors.Is(err, ErrInvalidSessionID) {
				t.Errorf("error does not wrap ErrInvalidSessionID")
			}
		})
	}
}

func TestSubjectToken(t *testing.T) {
	tests := []struct {
		name, id, tok string
	}{
		{"a plain id is its own token", "session-1_A", "session-1_A"},
		{"a 200-byte plain id is its own token", strings.Repeat("a", 200), strings.Repeat("a", 200)},
		{"a 201-byte plain id is encoded", strings.Repeat("a", 201), "~" + tokenEncoding.EncodeToString([]byte(strings.Repeat("a", 201)))},
		{"a dotted id is encoded", "a.b", "~YS5i"},
		{"a wildcard id is encoded", "*", "~Kg"},
		{"a tail wildcard id is encoded", ">", "~Pg"},
		{"a slash id is encoded", "../x", "~Li4veA"},
		{"a tilde id is encoded", "~a", "~fmE"},
		{"a space id is encoded", "a b", "~YSBi"},
		{"a non-ASCII id is encoded", "é", "~w6k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := SubjectToken(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if tok != tt.tok {
				t.Fatalf("SubjectToken(%q) = %q, want %q", tt.id, tok, tt.tok)
			}
			back, err := ParseSubjectToken(tok)
			if err != nil {
				t.Fatal(err)
			}
			if back != tt.id {
				t.Fatalf("ParseSubjectToken(%q) = %q, want %q", tok, back, tt.id)
			}
		})
	}
}

func TestSubjectTokenRefusesInvalidIDs(t *testing.T) {
	for _, id := range []string{"", "a\x00", "\xff", strings.Repeat("b", 513)} {
		if tok, err := SubjectToken(id); err == nil {
			t.Errorf("SubjectToken(%q) = %q, want an error", id, tok)
		}
	}
}

func TestParseSubjectTokenRefusesNonCanonicalTokens(t *testing.T) {
	tests := []struct{ name, tok string }{
		{"an empty token", ""},
		{"a bare tilde", "~"},
		{"a base64 form of a plain id", "~YWJj"},
		{"padded base64", "~YS5i="},
		{"standard base64 alphabet", "~Pz8/"},
		{"non-zero trailing bits", "~Kh"},
		{"an embedded newline", "~YS\n5i"},
		{"a dotted plain token", "a.b"},
		{"a 201-byte plain token", strings.Repeat("a", 201)},
		{"an encoded NUL", "~AA"},
		{"an encoded invalid UTF-8 byte", "~_w"},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			id, err := ParseSubjectToken(tt.tok)
			if err == nil {
				t.Fatalf("ParseSubjectToken(%q) = %q, want an error", tt.tok, id)
			}
			if !errors.Is(err, ErrInvalidSubjectToken) || dshq.ErrorCode(err) != dshq.CodeInvalidRequest {
				t.Errorf("error %v has the wrong type", err)
			}
		})
	}
}

func TestSubjectTokenIsInjective(t *testing.T) {
	// Ids that collide under any case-folding, escaping or truncation.
	ids := []string{"a", "A", "~YQ", "~a", "a.b", "a_b", "a-b", "a/b", "a b", "a*b", "a>b",
		".", "..", "é", "e\u0301", strings.Repeat("z", 200), strings.Repeat("z", 201), "~", "~~"}
	seen := map[string]string{}
	for _, id := range ids {
		tok, err := SubjectToken(id)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[tok]; ok {
			t.Fatalf("ids %q and %q share token %q", prev, id, tok)
		}
		seen[tok] = id
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c == '.' || c == '*' || c == '>' || c <= ' ' || c >= 0x7F {
				t.Fatalf("token %q holds a byte that is not subject-safe", tok)
			}
		}
	}
}

func TestWorkspaceKey(t *testing.T) {
	if got := WorkspaceKey(nil); got != "_" {
		t.Errorf("WorkspaceKey(nil) = %q", got)
	}
	// Expected values from `printf %s <cwd> | sha256sum | cut -c1-32`.
	for cwd, want := range map[string]string{
		"/work": "0c9a453fad615c83c57d57c2b2be05fa",
		"":      "e3b0c44298fc1c149afbf4c8996fb924",
	} {
		if got := WorkspaceKey(dshq.Str(cwd)); got != want {
			t.Errorf("WorkspaceKey(%q) = %q, want %q", cwd, got, want)
		}
	}
	if WorkspaceKey(dshq.Str("")) == "_" || WorkspaceKey(dshq.Str("/a")) == WorkspaceKey(dshq.Str("/b")) {
		t.Error("workspace keys collide")
	}
}
