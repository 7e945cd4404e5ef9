package index

import "github.com/dshq/dshq"

// MaxLimit bounds one search's Limit. It is above the API's
// dshq.MaxSearchLimit so that a trusted caller collecting many results (the
// query service materializing a paged search) can do it in one call; the
// API's own limit is validated by the query service.
const MaxLimit = 10000

// EventQuery searches the docs of one session (events.search).
type EventQuery struct {
	// SessionID is the session searched.
	SessionID string
	// Query is one literal phrase
	// (docs/search.md#the-query-is-a-literal-phrase): never syntax. A query
	// whose analysis yields no token (`*`, punctuation) matches nothing.
	Query string
	// Filters are event filters (seq, time, type, surface), ANDed, applied
	// before ranking. Any other kind is CodeInvalidFilter.
	Filters []dshq.Filter
	// Offset and Limit page the ranked hits; Limit 0 means
	// dshq.DefaultSearchLimit, at most MaxLimit.
	Offset, Limit int
	// AsOf, when non-zero, hides docs first indexed after that generation,
	// so that later pages of a paged search never see later appends.
	AsOf uint64
	// SnippetChars bounds snippets in code points; 0 means the index's
	// Options.SnippetChars.
	SnippetChars int
	// Stats, when set, are the corpus's statistics the phrase ranks with
	// (a partitioned projection's sums, CorpusStats) instead of this
	// index's own.
	Stats *CorpusStats
}

// SessionQuery searches across sessions and groups hits by session
// (sessions.search).
type SessionQuery struct {
	// Query is one literal phrase, as in EventQuery.
	Query string
	// SessionFilters are session filters (id, cwd, created-at, parent,
	// availability), ANDed, applied before ranking.
	SessionFilters []dshq.Filter
	// EventFilters are event filters (seq, time, type, surface).
	EventFilters []dshq.Filter
	// LiveSessionIDs resolves availability filters: a session is live when
	// its id is in this set; every indexed session is persisted.
	LiveSessionIDs []string
	// Offset and Limit page the grouped sessions; Limit 0 means
	// dshq.DefaultSearchLimit, at most MaxLimit.
	Offset, Limit int
	// AsOf is as in EventQuery.
	AsOf uint64
	// SnippetChars is as in EventQuery.
	SnippetChars int
	// Stats is as in EventQuery.
	Stats *CorpusStats
}

// Hit is one ranked doc with its BM25 score and snippet.
type Hit struct {
	Doc
	// Score is the BM25 relevance (higher is better); ties are broken by
	// time desc, session id asc, seq desc.
	Score float64
	// Snippet is the doc text around the first match (docs/search.md#snippets).
	Snippet string
}

// EventHit returns the hit in its wire shape.
func (h Hit) EventHit() dshq.EventSearchHit {
	return dshq.EventSearchHit{EventRecord: h.Record(), Snippet: h.Snippet}
}

// Page is one page of hits. For SearchSessions each hit is one session's
// strongest doc, sessions in the order of their best hit.
type Page struct {
	Hits []Hit
	// More is true when at least one hit (or session) follows this page.
	More bool
	// Generation is the index generation read before searching: the page
	// reflects at least every batch through it.
	Generation uint64
}

// Key is one ranked doc: its identity and BM25 score, what RankEvents and
// RankSessions return and Hits loads.
type Key struct {
	// SessionID and Seq identify the event; Gen is its doc's creation
	// generation, part of the doc's identity in the index (see docID).
	SessionID string
	Seq       int64
	Gen       uint64
	// Score is the BM25 relevance, as in Hit.
	Score float64
	// Time is the event's time (RankSessions only): a session ranking
	// sorts by score desc, then time desc, then session id asc (its rank
	// key's order among distinct sessions), so the rankings of indexes of
	// disjoint sessions merge by these into the order one index of them
	// all gives.
	Time int64
}

// Ranking is a run of ranked keys without docs or snippets. For
// RankSessions each key is one session's strongest doc.
type Ranking struct {
	Keys []Key
	// More is true when at least one key (or session) follows these.
	More bool
	// Generation is as in Page.
	Generation uint64
	// Total is how many docs matched (RankEvents; 0 from RankSessions).
	Total uint64
	// Searched is the generation of the index state the ranking read:
	// exactly the batches through it and none after (Generation is only a
	// lower bound, since a batch can land between reading it and
	// searching). 0 when the ranking read no index state (nothing could
	// match).
	Searched uint64
}
