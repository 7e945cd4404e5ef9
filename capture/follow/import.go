package follow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
)

// SessionResult is what importing a file did to one of its sessions.
type SessionResult struct {
	ID string `json:"id"`
	// Parent is the parent session of a child (a subagent, a spawned
	// thread), "" for the file's own session when it has none.
	Parent string `json:"parent,omitempty"`
	// Events is the session's event count; Stored the records this import
	// published (0: already present); Continued that a stored prefix was
	// completed.
	Events    int  `json:"events"`
	Stored    int  `json:"stored"`
	Continued bool `json:"continued,omitempty"`
}

// FileResult is what importing one Claude Code or Codex file did.
type FileResult struct {
	Format capture.Format `json:"format"`
	// Sessions are the file's sessions, its own first (the one that holds
	// its lines), then its inline children.
	Sessions []SessionResult `json:"sessions"`
	// Counts of the conversion of the whole file.
	Lines        int64 `json:"lines"`
	Bytes        int64 `json:"bytes"`
	Events       int64 `json:"events"`
	LogOnly      int64 `json:"logOnly"`
	InvalidLines int64 `json:"invalidLines"`
	Children     int   `json:"childSessions"`
	// Held is the size of the file's last line when it has no newline and
	// is not a whole JSON value yet (a write in progress, capture.Lines.
	// Complete): it is not stored, and a later import stores it once its
	// line is complete.
	Held int64 `json:"held,omitempty"`
	// Notices are what the converter said once about a session (a cwd
	// that cannot be known).
	Notices []string `json:"notices,omitempty"`
	// LastSeq is the stream sequence of the last record stored (0: none).
	LastSeq uint64 `json:"-"`
}

// Published reports whether the import stored anything.
func (r FileResult) Published() bool {
	for _, s := range r.Sessions {
		if s.Stored > 0 {
			return true
		}
	}
	return false
}

// Continued reports whether the import completed a stored prefix.
func (r FileResult) Continued() bool {
	for _, s := range r.Sessions {
		if s.Continued {
			return true
		}
	}
	return false
}

// Import converts a complete Claude Code or Codex file (its content data,
// read from path) and stores its sessions with store.Import: idempotent (a
// file stored already is present), continuing a file that grew since (its
// stored lines are re-derived as stored, the rest appended), refusing a
// file that no longer begins with what its session holds (*ChangedError).
// The file is taken as complete as far as its lines go: a last line
// without a newline is stored when it is a whole JSON value, else held as a
// write in progress (FileResult.Held; capture.Lines.Complete, the rule
// dshq watch follows too), and a header still waiting for its facts is
// decided.
func Import(ctx context.Context, store *bus.Store, f capture.Format, path string, data []byte) (FileResult, error) {
	return ImportOn(ctx, store, f, path, data, "")
}

// ImportOn is Import for a file captured on machine: the headers of the
// sessions it creates name it ("" names none).
func ImportOn(ctx context.Context, store *bus.Store, f capture.Format, path string, data []byte, machine string) (FileResult, error) {
	res := FileResult{Format: f}
	r, err := ResumeOn(ctx, store, f, path, data, machine)
	if err != nil {
		return res, err
	}
	ups := append([]capture.Update(nil), r.Prefix...)
	feed := func(l capture.Line) error {
		u, err := r.Conv.Feed(l)
		ups = append(ups, u...)
		return err
	}
	for _, l := range r.Lines.Write(data[r.Lines.Offset():]) {
		if err := feed(l); err != nil {
			return res, err
		}
	}
	if l, ok := r.Lines.Complete(); ok {
		if err := feed(l); err != nil {
			return res, err
		}
	}
	res.Held = int64(r.Lines.Held())
	ups = append(ups, r.Conv.Finish()...)
	logs, err := capture.Collect(ups)
	if err != nil {
		return res, err
	}
	st := r.Conv.Stats()
	res.Lines, res.Bytes, res.Events, res.LogOnly, res.InvalidLines = st.Lines, st.Bytes, 0, st.LogOnly, st.InvalidLines
	for _, l := range logs {
		res.Events += int64(len(l.Events))
		res.Notices = append(res.Notices, l.Notices...)
		sr := SessionResult{ID: l.Header.Header.ID, Events: len(l.Events)}
		if p := l.Header.Header.ParentSession; p != nil {
			sr.Parent = *p
			res.Children++
		}
		out, err := store.Import(ctx, l.Header, l.Events)
		sr.Stored, sr.Continued = out.Stored, out.Continued
		res.LastSeq = max(res.LastSeq, out.LastSeq)
		res.Sessions = append(res.Sessions, sr)
		if err != nil {
			if errors.Is(err, bus.ErrLogConflict) {
				err = &ChangedError{Path: path, SessionID: sr.ID, Why: "stored with different content " + strings.TrimPrefix(err.Error(), fmt.Sprintf("session %q is already stored with different content ", sr.ID))}
			}
			return res, err
		}
	}
	return res, nil
}

// IsLogOnly reports whether an event type is one a converter keeps with no
// dshq meaning (<harness>/<type>, capture/line-part).
func IsLogOnly(typ string) bool {
	return strings.HasPrefix(typ, dshq.HarnessClaudeCode+"/") || strings.HasPrefix(typ, dshq.HarnessCodex+"/") || typ == capture.TypeLinePart
}
