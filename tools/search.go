package tools

import (
	"context"
	"slices"
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/authz"
)

// normalizeQuery trims the query and collapses whitespace runs; blank or
// NUL-bearing queries fail with SESSION_QUERY_INVALID_QUERY.
func normalizeQuery(a args) (string, error) {
	q, _ := a.str("query")
	if strings.ContainsRune(q, 0) {
		return "", dshq.Errorf(dshq.CodeInvalidQuery, "query must not contain NUL characters")
	}
	q = strings.Join(strings.Fields(q), " ")
	if q == "" {
		return "", dshq.Errorf(dshq.CodeInvalidQuery, "query must contain non-whitespace text")
	}
	return q, nil
}

// listFilter returns a list filter from an optional array argument, which
// must be non-empty when supplied (reported under label).
func listFilter(a args, name, label, kind string) (*dshq.Filter, error) {
	vals, ok := a.strs(name)
	if !ok {
		return nil, nil
	}
	if len(vals) == 0 {
		return nil, dshq.Errorf(dshq.CodeInvalidFilter, "%s must contain at least one value when supplied", label)
	}
	if kind == dshq.FilterID {
		vals = sessionIDs(vals)
	}
	f := &dshq.Filter{Kind: kind, Values: make([]*string, len(vals))}
	for i, v := range vals {
		f.Values[i] = dshq.Str(v)
	}
	return f, nil
}

// sessionIDs returns the ids that are session ids (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys):
// the others name no session, so a clause without them matches the same
// sessions, and the request the service gets stays small whatever the
// model sent.
func sessionIDs(ids []string) []string {
	out := ids[:0:0]
	for _, id := range ids {
		if dshq.SessionIDProblem(id) == "" {
			out = append(out, id)
		}
	}
	return out
}

// seqRange validates an optional seq range (stage 2).
func seqRange(a args, fromName, toName string) (from, to *int64, err error) {
	f, fok, err := a.seqArg(fromName)
	if err != nil {
		return nil, nil, err
	}
	t, tok, err := a.seqArg(toName)
	if err != nil {
		return nil, nil, err
	}
	if fok && tok && f > t {
		return nil, nil, dshq.Errorf(dshq.CodeInvalidFilter, "session sequence range from must be less than or equal to to")
	}
	if fok {
		from = &f
	}
	if tok {
		to = &t
	}
	return from, to, nil
}

func seqFilter(from, to *int64) *dshq.Filter {
	if from == nil && to == nil {
		return nil
	}
	f := &dshq.Filter{Kind: dshq.FilterSeq}
	if from != nil {
		v := float64(*from)
		f.From = &v
	}
	if to != nil {
		v := float64(*to)
		f.To = &v
	}
	return f
}

func appendFilters(dst []dshq.Filter, fs ...*dshq.Filter) []dshq.Filter {
	for _, f := range fs {
		if f != nil {
			dst = append(dst, *f)
		}
	}
	return dst
}

// collect follows a provider's pages without a limit until they are
// exhausted, keeping accepted items. When max items are kept and another
// accepted item appears it stops with capped = true. A repeated cursor is
// SESSION_QUERY_INVALID_CURSOR; a page failure (a stale cursor included) is
// returned as is, never retried.
func collect[T any](ctx context.Context, max int, fetch func(cursor string) ([]T, string, error), accept func(T) bool) (out []T, capped bool, err error) {
	seen := map[string]bool{}
	cursor := ""
	for {
		if ctx.Err() != nil {
			return nil, false, errCancelled{context.Cause(ctx)}
		}
		items, next, err := fetch(cursor)
		if err != nil {
			return nil, false, err
		}
		if ctx.Err() != nil {
			return nil, false, errCancelled{context.Cause(ctx)}
		}
		for _, it := range items {
			if !accept(it) {
				continue
			}
			if len(out) == max {
				return out, true, nil
			}
			out = append(out, it)
		}
		if next == "" {
			return out, false, nil
		}
		if seen[next] {
			return nil, false, dshq.Errorf(dshq.CodeInvalidCursor, msgRepeatedCursor)
		}
		seen[next] = true
		cursor = next
	}
}

// searchArgs are session_search's validated arguments.
type searchArgs struct {
	req         dshq.SessionSearchRequest
	parents     []string
	hasParents  bool
	includeRoot bool
	// empty is true when a time range admits no integer millisecond.
	empty bool
}

// checker keeps the first validation failure, so that the checks read in
// the original's order without an error test after each.
type checker struct {
	a   args
	err error
}

func (k *checker) list(name, label, kind string) *dshq.Filter {
	if k.err != nil {
		return nil
	}
	f, err := listFilter(k.a, name, label, kind)
	k.err = err
	return f
}

func (k *checker) times(kind, from, to, what string) (*dshq.Filter, bool) {
	if k.err != nil {
		return nil, false
	}
	f, empty, err := k.a.timeRange(kind, from, to, what)
	k.err = err
	return f, empty
}

func (k *checker) seqs(from, to string) *dshq.Filter {
	if k.err != nil {
		return nil
	}
	lo, hi, err := seqRange(k.a, from, to)
	k.err = err
	return seqFilter(lo, hi)
}

// checkSearchArgs is session_search's stage 2, in the original's order:
// query, session_ids, created_at, availability, event seq, event time,
// event_types, event_surfaces, parent_session_ids.
func checkSearchArgs(a args, scope []dshq.Filter) (searchArgs, error) {
	query, err := normalizeQuery(a)
	if err != nil {
		return searchArgs{}, err
	}
	k := &checker{a: a}
	ids := k.list("session_ids", "session_ids", dshq.FilterID)
	created, createdEmpty := k.times(dshq.FilterCreatedAt, "created_at_from", "created_at_to", "session creation time")
	avail := k.list("availability", "availability", dshq.FilterAvailability)
	seqs := k.seqs("event_seq_from", "event_seq_to")
	evTime, timeEmpty := k.times(dshq.FilterTime, "event_time_from", "event_time_to", "event time")
	types := k.list("event_types", "event_types", dshq.FilterType)
	surfaces := k.list("event_surfaces", "surfaces", dshq.FilterSurface)
	if k.err != nil {
		return searchArgs{}, k.err
	}
	parents, hasParents := a.strs("parent_session_ids")
	if hasParents && len(parents) == 0 {
		return searchArgs{}, dshq.Errorf(dshq.CodeInvalidFilter, "parent_session_ids must contain at least one value when supplied")
	}
	parents = sessionIDs(parents)
	return searchArgs{
		req: dshq.SessionSearchRequest{
			Query:          query,
			SessionFilters: appendFilters(slices.Clone(scope), ids, created, avail),
			EventFilters:   appendFilters(nil, seqs, evTime, types, surfaces),
		},
		parents: parents, hasParents: hasParents, includeRoot: a.boolean("include_root_sessions"),
		empty: createdEmpty || timeEmpty,
	}, nil
}

// parentClause pre-authorizes the requested parents (one filter read) and
// returns the parent clause; ok is false when it admits nothing.
func (t *Tools) parentClause(ctx context.Context, c authz.Caller, s searchArgs) (clause dshq.Filter, ok bool, err error) {
	var found []dshq.SessionRecord
	if s.hasParents {
		pre, err := c.ParentPreflight(s.parents)
		if err != nil {
			return dshq.Filter{}, false, err
		}
		if found, err = t.svc.FilterSessions(ctx, pre); err != nil {
			return dshq.Filter{}, false, sanitize(ctx, t.log, "authorize parents", err)
		}
	}
	clause, ok = c.ParentClause(s.parents, found, s.includeRoot)
	return clause, ok, nil
}

func (t *Tools) sessionSearch(ctx context.Context, by Caller, a args) (string, error) {
	c, err := t.caller(ctx, by)
	if err != nil {
		return "", err
	}
	scope, err := c.SearchScope()
	if err != nil {
		return "", err
	}
	s, err := checkSearchArgs(a, scope)
	if err != nil {
		return "", err
	}
	if s.hasParents || s.includeRoot {
		clause, ok, err := t.parentClause(ctx, c, s)
		if err != nil {
			return "", err
		}
		if !ok {
			return noSessionMatches, nil
		}
		s.req.SessionFilters = append(s.req.SessionFilters, clause)
	}
	if s.empty {
		return noSessionMatches, nil
	}
	return t.collectSessions(ctx, c, s.req)
}

func (t *Tools) collectSessions(ctx context.Context, c authz.Caller, req dshq.SessionSearchRequest) (string, error) {
	hits, capped, err := collect(ctx, t.maxResults, func(cursor string) ([]dshq.SessionSearchHit, string, error) {
		req.Cursor = cursor
		page, err := t.svc.SearchSessions(ctx, req)
		if err != nil {
			return nil, "", sanitize(ctx, t.log, "search sessions", err)
		}
		return page.Items, page.NextCursor, nil
	}, func(h dshq.SessionSearchHit) bool { return c.AcceptHit(h.SessionRecord) })
	if err != nil {
		return "", err
	}
	if len(hits) == 0 {
		return noSessionMatches, nil
	}
	visibleParents, err := t.visibleParents(ctx, c, hits)
	if err != nil {
		return "", err
	}
	hitIDs := make([]string, len(hits))
	for i, h := range hits {
		hitIDs[i] = h.Header.ID
	}
	titles, err := t.titles(ctx, c, hitIDs)
	if err != nil {
		return "", err
	}
	return renderSessionSearch(hits, titles, visibleParents, capped), nil
}

// visibleParents reads which of the hits' parents the caller may see, in one
// filter read within the caller's workspace.
func (t *Tools) visibleParents(ctx context.Context, c authz.Caller, hits []dshq.SessionSearchHit) (map[string]bool, error) {
	var ids []string
	for _, h := range hits {
		if h.Header.ParentSession != nil {
			ids = append(ids, *h.Header.ParentSession)
		}
	}
	visible := map[string]bool{}
	if len(ids) == 0 {
		return visible, nil
	}
	pre, err := c.ParentPreflight(ids)
	if err != nil {
		return nil, err
	}
	recs, err := t.svc.FilterSessions(ctx, pre)
	if err != nil {
		return nil, sanitize(ctx, t.log, "authorize parents", err)
	}
	for _, r := range recs {
		if c.Authorized(r) {
			visible[r.Header.ID] = true
		}
	}
	return visible, nil
}

func (t *Tools) sessionEventSearch(ctx context.Context, by Caller, a args) (string, error) {
	c, err := t.caller(ctx, by)
	if err != nil {
		return "", err
	}
	target, err := t.target(ctx, c, a)
	if err != nil {
		return "", err
	}
	query, err := normalizeQuery(a)
	if err != nil {
		return "", err
	}
	from, to, err := seqRange(a, "seq_from", "seq_to")
	if err != nil {
		return "", err
	}
	empty := false
	if target == c.ID() {
		step, ok, err := t.svc.LastStepStart(ctx, target)
		if err != nil {
			return "", sanitize(ctx, t.log, "read current step", err)
		}
		if !ok {
			return "", dshq.Errorf(dshq.CodeToolNoCurrentStep, authz.MsgNoCurrentStep)
		}
		limit := step - 1
		if to == nil || *to > limit {
			to = &limit
		}
		lo := int64(0)
		if from != nil {
			lo = *from
		}
		empty = lo > *to
	}
	titles, err := t.titles(ctx, c, []string{target})
	if err != nil {
		return "", err
	}
	head := sessionLine(target, titles[target])
	if empty {
		return head + "\n\n" + noEventMatches, nil
	}
	evTime, timeEmpty, err := a.timeRange(dshq.FilterTime, "time_from", "time_to", "event time")
	if err != nil {
		return "", err
	}
	types, err := listFilter(a, "event_types", "event_types", dshq.FilterType)
	if err != nil {
		return "", err
	}
	surfaces, err := listFilter(a, "surfaces", "surfaces", dshq.FilterSurface)
	if err != nil {
		return "", err
	}
	if timeEmpty {
		return head + "\n\n" + noEventMatches, nil
	}
	filters := appendFilters(nil, seqFilter(from, to), evTime, types, surfaces)
	hits, capped, err := collect(ctx, t.maxResults, func(cursor string) ([]dshq.EventSearchHit, string, error) {
		page, err := t.svc.SearchEvents(ctx, dshq.EventSearchRequest{
			SessionID: target, Query: query, Filters: filters, Cursor: cursor})
		if err != nil {
			return nil, "", sanitize(ctx, t.log, "search events", err)
		}
		if err := c.Recheck(target, page.Session); err != nil {
			return nil, "", err
		}
		return page.Items, page.NextCursor, nil
	}, func(h dshq.EventSearchHit) bool { return h.SessionID == "" || h.SessionID == target })
	if err != nil {
		return "", err
	}
	return renderEventSearch(head, hits, capped), nil
}
