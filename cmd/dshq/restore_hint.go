package main

import (
	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture/restore"
)

// hintedHit is a sessions.search hit as dshq search --json prints it: the
// hit, and what restores and continues its session (restore.HintFor).
type hintedHit struct {
	dshq.SessionSearchHit
	Restore restore.Hint `json:"restore"`
}

// hintedPage is a sessions.search page whose hits carry their hints.
type hintedPage struct {
	Items      []hintedHit `json:"items"`
	NextCursor string      `json:"nextCursor,omitempty"`
	Generation uint64      `json:"generation"`
}

// withRestoreHints adds to every hit of page how to restore its session.
func withRestoreHints(page *dshq.SessionSearchPage) *hintedPage {
	if page == nil {
		return nil
	}
	out := &hintedPage{Items: make([]hintedHit, 0, len(page.Items)), NextCursor: page.NextCursor, Generation: page.Generation}
	for _, h := range page.Items {
		cwd, _ := h.Header.CwdOrEmpty()
		out.Items = append(out.Items, hintedHit{SessionSearchHit: h, Restore: restore.HintFor(h.Header.Harness, h.Header.ID, cwd)})
	}
	return out
}
