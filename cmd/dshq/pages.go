package main

import "github.com/dshq/dshq/query"

// followPages follows a listing's pages through query.Follow (every page
// when all is set, else the first): in text mode show prints each page as
// it comes; with --json the pages are merged into the first (merge appends
// a later page's items and takes its cursor and generation), which is
// returned as merged for one reply. last is the final page read.
func followPages[P any](g *globals, opts []query.CallOption, all bool,
	fetch func(cursor string, opts []query.CallOption) (*P, error),
	next func(*P) (cursor string, gen uint64),
	merge func(into, page *P),
	show func(*P),
) (merged, last *P, err error) {
	err = query.Follow(opts, func(cursor string, opts []query.CallOption) (string, uint64, error) {
		page, err := fetch(cursor, opts)
		if err != nil {
			return "", 0, err
		}
		last = page
		switch {
		case !g.json:
			show(page)
		case merged == nil:
			merged = page
		default:
			merge(merged, page)
		}
		cur, gen := next(page)
		return nextIf(all, cur), gen, nil
	})
	return merged, last, err
}
