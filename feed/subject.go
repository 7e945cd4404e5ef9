package feed

import (
	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// Subject layout: dsh.feed.<workspace>.<token>.<kind>.
const (
	// QuarantineWorkspace is the workspace token of a refused record that
	// belongs to no known session (its subject had no valid header record,
	// or is not a session subject at all). It is neither a workspace key
	// (32 hex digits) nor "_" (the key of a session without cwd), so a
	// subscriber confined to workspaces never sees such records; operators
	// subscribe to dsh.feed._q.>.
	QuarantineWorkspace = "_q"
	// UnknownToken is the session token of a refused record whose subject
	// does not end in a valid subject token. It is never a session's token.
	UnknownToken = "!"
)

// Subject returns the subject of a message of kind k for workspace ws and
// session token tok: dsh.feed.<ws>.<tok>.<k>. It refuses (as Validate) a
// workspace that is not a workspace key, a token that is not a subject
// token, and an unknown kind; QuarantineWorkspace and UnknownToken are
// accepted for quarantine messages only.
func Subject(ws, tok string, k Kind) (string, error) {
	if !k.Valid() {
		return "", malformed("unknown kind %q", k)
	}
	if err := validateAddress(k, ws, tok); err != nil {
		return "", err
	}
	return dshq.FeedSubjectPrefix + ws + "." + tok + "." + string(k), nil
}

// validateAddress checks a message's workspace and token.
func validateAddress(k Kind, ws, tok string) error {
	if ws == QuarantineWorkspace {
		if k != KindQuarantine {
			return malformed("%s message in the quarantine workspace %q", k, QuarantineWorkspace)
		}
		if tok == UnknownToken {
			return nil
		}
	} else if !ValidWorkspace(ws) {
		return malformed("workspace %q is not a workspace key", ws)
	}
	if _, err := record.ParseSubjectToken(tok); err != nil {
		return malformed("token: %v", err)
	}
	return nil
}

// ValidWorkspace reports whether ws is a workspace key
// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys): 32
// lowercase hex digits, or "_".
func ValidWorkspace(ws string) bool {
	if ws == "_" {
		return true
	}
	if len(ws) != 32 {
		return false
	}
	for i := 0; i < len(ws); i++ {
		c := ws[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Filter selects feed messages. The zero Filter selects everything.
type Filter struct {
	// Workspace confines the selection to one workspace key (or
	// QuarantineWorkspace); "" = every workspace.
	Workspace string
	// SessionID confines it to one session; "" = every session.
	SessionID string
	// Kinds confines it to these kinds; empty = every kind.
	Kinds []Kind
}

// Subject returns the one subject filter of f, the one a NATS permission
// must allow for a consumer on f: dsh.feed.> when f is empty,
// dsh.feed.<ws>.> for a workspace, dsh.feed.*.<token>.> for a session,
// with the kind as last token when f has exactly one kind (several kinds
// are filtered after delivery). It refuses an invalid workspace, session id
// or kind.
func (f Filter) Subject() (string, error) {
	ws, tok, kind := "*", "*", "*"
	if f.Workspace != "" {
		if f.Workspace != QuarantineWorkspace && !ValidWorkspace(f.Workspace) {
			return "", malformed("filter workspace %q is not a workspace key", f.Workspace)
		}
		ws = f.Workspace
	}
	if f.SessionID != "" {
		t, err := record.SubjectToken(f.SessionID)
		if err != nil {
			return "", err
		}
		tok = t
	}
	for _, k := range f.Kinds {
		if !k.Valid() {
			return "", malformed("filter kind %q is unknown", k)
		}
	}
	if len(f.Kinds) == 1 {
		kind = string(f.Kinds[0])
	}
	switch {
	case kind != "*":
		return dshq.FeedSubjectPrefix + ws + "." + tok + "." + kind, nil
	case tok != "*":
		return dshq.FeedSubjectPrefix + ws + "." + tok + ".>", nil
	case ws != "*":
		return dshq.FeedSubjectPrefix + ws + ".>", nil
	}
	return dshq.FeedSubjects, nil
}

// wants reports whether a delivered message of kind k passes f's kinds.
func (f Filter) wants(k Kind) bool {
	if len(f.Kinds) == 0 {
		return true
	}
	for _, w := range f.Kinds {
		if w == k {
			return true
		}
	}
	return false
}
