package query

import (
	"github.com/dshq/dshq"
)

// PageFunc fetches and handles one page of a paged endpoint: the page at
// cursor ("" for the first), asked with opts. It returns the page's
// nextCursor ("" to stop: the last page, or enough) and its generation.
type PageFunc func(cursor string, opts []CallOption) (next string, generation uint64, err error)

// Follow follows the pages of a paged endpoint (sessions.list, the
// searches, sessions.read, …) through page, the first asked with opts and
// every later one also with WithMinGeneration of the page before it, so
// that a replica behind the one that answered it waits rather than
// failing the cursor. It stops at the first failure, which it returns as
// page returned it, or when page returns no nextCursor. A nextCursor
// repeated is SESSION_QUERY_INVALID_CURSOR.
func Follow(opts []CallOption, page PageFunc) error {
	seen := map[string]bool{}
	cursor, pageOpts := "", opts
	for {
		next, gen, err := page(cursor, pageOpts)
		if err != nil || next == "" {
			return err
		}
		if seen[next] {
			return dshq.Errorf(dshq.CodeInvalidCursor, "the service repeated a continuation cursor")
		}
		seen[next] = true
		cursor = next
		pageOpts = append(opts[:len(opts):len(opts)], WithMinGeneration(gen))
	}
}
