package tools

import (
	"context"
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
	f := &dshq.Filter{Kind: kind, Values: make([]*string, len(vals))}
	for i, v := range vals {
		f.Values[i] = dshq.Str(v)
	}
	return f, nil
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

func (t *Tools) sessionSearch(ctx context.Context, callerID string, a args) (string, error) {
	c, err := t.caller(ctx, callerID)
	if err != nil {
		return "", err
	}
	scope, err := c.SearchScope()
	if err != nil {
		return "", err
	}
	query, err := normalizeQuery(a)
	if err != nil {
		return "", err
	}
	sessionFilters := []dshq.Filter{scope}
	ids, err := listFilter(a, "session_ids", "session_ids", dshq.FilterID)
	if err != nil {
		return "", err
	}
	created, createdEmpty, err := a.timeRange(dshq.FilterCreatedAt, "created_at_from", "created_at_to", "session creation time")
	if err != nil {
		return "", err
	}
	avail, err := listFilter(a, "availability", "availability", dshq.FilterAvailability)
	if err != nil {
		return "", err
	}
	seqFrom, seqTo, err := seqRange(a, "event_seq_from", "event_seq_to")
	if err != nil {
		return "", err
	}
	evTime, timeEmpty, err := a.timeRange(dshq.FilterTime, "event_time_from", "event_time_to", "event time")
	if err != nil {
		return "", err
	}
	types, err := listFilter(a, "event_types", "event_types", dshq.FilterType)
	if err != nil {
		return "", err
	}
	surfaces, err := listFilter(a, "event_surfaces", "surfaces", dshq.FilterSurface)
	if err != nil {
		return "", err
	}
	parents, hasParents := a.strs("parent_session_ids")
	if hasParents && len(parents) == 0 {
		return "", dshq.Errorf(dshq.CodeInvalidFilter, "parent_session_ids must contain at least one value when supplied")
	}
	includeRoot := a.boolean("include_root_sessions")
	if hasParents || includeRoot {
		var found []dshq.SessionRecord
		if hasParents {
			pre, err := c.ParentPreflight(parents)
			if err != nil {
				return "", err
			}
			if found, err = t.svc.FilterSessions(ctx, pre); err != nil {
				return "", sanitize(ctx, t.log, "authorize parents", err)
			}
		}
		clause, ok := c.ParentClause(parents, found, includeRoot)
		if !ok {
			return noSessionMatches, nil
		}
		sessionFilters = append(sessionFilters, clause)
	}
	if createdEmpty || timeEmpty {
		return noSessionMatches, nil
	}
	sessionFilters = appendFilters(sessionFilters, ids, created, avail)
	eventFilters := appendFilters(nil, seqFilter(seqFrom, seqTo), evTime, types, surfaces)

	hits, capped, err := collect(ctx, t.maxResults, func(cursor string) ([]dshq.SessionSearchHit, string, error) {
		page, err := t.svc.SearchSessions(ctx, dshq.SessionSearchRequest{
			Query: query, SessionFilters: sessionFilters, EventFilters: eventFilters, Cursor: cursor})
		if err != nil {
			return nil, "", sanitize(ctx, t.log, "search sessions", err)
		}
		return page.Items, page.NextCursor, nil
	}, func(h dshq.SessionSearchHit) bool { return c.AcceptHit(h.Header) })
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
		if c.Authorized(r.Header) {
			visible[r.Header.ID] = true
		}
	}
	return visible, nil
}

func (t *Tools) sessionEventSearch(ctx context.Context, callerID string, a args) (string, error) {
	c, err := t.caller(ctx, callerID)
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
