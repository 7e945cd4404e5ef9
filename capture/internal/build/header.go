package build

import (
	"fmt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// HeaderFacts is what a converter learned for a session's header.
type HeaderFacts struct {
	ID        string
	Harness   string
	CreatedAt int64
	// Cwd is the first cwd the source states; CwdStated is false when it
	// states none.
	Cwd       string
	CwdStated bool
	// Parent is the parent session's id for a subagent (or spawned or
	// forked) session, "" for a top-level one; Depth its delegation depth.
	Parent string
	Depth  int64
}

// Record returns the header record and the notices a person must be told:
// a session without a usable cwd has no workspace, so no workspace caller
// sees it.
func (f HeaderFacts) Record() (dshq.HeaderRecord, []string) {
	h := dshq.Header{Version: dshq.FormatVersion2, ID: f.ID, CreatedAt: max(f.CreatedAt, 0), Harness: f.Harness}
	var notices []string
	switch {
	case f.CwdStated && Abs(f.Cwd):
		h.Cwd = dshq.Str(f.Cwd)
	case f.CwdStated:
		notices = append(notices, fmt.Sprintf("session %s: its cwd %q is not an absolute path, so the session has no workspace and no workspace caller sees it", f.ID, truncateUTF8(f.Cwd, 200)))
	default:
		notices = append(notices, fmt.Sprintf("session %s: its file states no cwd, so the session has no workspace and no workspace caller sees it", f.ID))
	}
	if f.Parent != "" {
		h.ParentSession = dshq.Str(f.Parent)
		h.Origin = dshq.OriginSubagent
		depth := max(f.Depth, 1)
		h.DelegationDepth = &depth
	}
	rec := dshq.HeaderRecord{Header: h, FormatVersion: dshq.FormatVersion2}
	raw, err := record.EncodeHeader(rec)
	if err != nil {
		// Every field was checked above; a cwd the codec still refuses
		// (it cannot happen for a slash-led valid string) is dropped.
		h.Cwd = nil
		rec.Header = h
		raw, _ = record.EncodeHeader(rec)
		notices = append(notices, fmt.Sprintf("session %s: its cwd cannot be stored (%v), so the session has no workspace", f.ID, err))
	}
	rec.Raw = raw
	return rec, notices
}
