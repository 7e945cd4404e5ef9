package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/authz"
	"github.com/dshq/dshq/query/wire"
)

// listSessions answers sessions.list and sessions.filter: records newest
// first, keyset-paged; later pages count only sessions that existed at the
// first page's generation.
func (e *Engine) listSessions(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	c, first, err := e.continueCursor(snap, req)
	if err != nil {
		return nil, err
	}
	match := wire.SessionMatcher(req.Filters)
	page := dshq.SessionPage{Items: []dshq.SessionRecord{}, Generation: snap.Generation()}
	sz := e.sizer(page)
	var lastKey []byte
	more, tooBig := false, false
	var after []byte
	if !first {
		after = c.Key
	}
	for info, err := range snap.Sessions(Scan{After: after, AsOf: c.Generation, Filters: req.Filters, Limit: req.Limit}) {
		if errors.Is(err, ErrMore) && len(page.Items) == req.Limit {
			more = true
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		if info.HeaderSeq > c.Generation {
			continue
		}
		rec := sessionRecord(snap, info)
		if !match.Match(rec) {
			continue
		}
		if len(page.Items) == req.Limit {
			more = true
			break
		}
		if !sz.add(rec) {
			more, tooBig = true, len(page.Items) == 0
			break
		}
		page.Items = append(page.Items, rec)
		lastKey = info.OrderKey
	}
	if tooBig {
		return nil, tooLargeItem(req.Endpoint)
	}
	if more {
		n := *c
		n.Key = lastKey
		page.NextCursor = n.At(0)
	}
	return page, nil
}

// readTitles answers sessions.titles: one result per unique id in
// first-occurrence order, failures isolated per id.
func (e *Engine) readTitles(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	out := dshq.SessionTitles{Items: []dshq.TitleResult{}, Generation: snap.Generation()}
	ids := authz.Dedupe(req.SessionIDs)
	found, err := snap.Lookup(ids)
	if err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}
	for _, id := range ids {
		info, ok := found[id]
		if !ok {
			out.Items = append(out.Items, rejected(id, notFound(id)))
			continue
		}
		out.Items = append(out.Items, dshq.TitleResult{SessionID: id, Status: "fulfilled",
			Value: &dshq.TitleValue{Session: info.Header.Header, Title: info.Title}})
	}
	return out, nil
}

// readChildren answers sessions.children (a projection shard's endpoint,
// for a partitioned projection's query service): the children of each
// unique id this projection holds, siblings by createdAt asc, id asc.
func (e *Engine) readChildren(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	out := wire.SessionChildren{Items: []wire.ChildrenOf{}, Generation: snap.Generation()}
	ids := authz.Dedupe(req.SessionIDs)
	kids, err := snap.Children(ids)
	if err != nil {
		return nil, fmt.Errorf("read children: %w", err)
	}
	for _, id := range ids {
		sorted := sortSiblings(kids[id])
		item := wire.ChildrenOf{SessionID: id, Children: make([]dshq.SessionRecord, len(sorted))}
		for i, k := range sorted {
			item.Children[i] = sessionRecord(snap, k)
		}
		out.Items = append(out.Items, item)
	}
	return out, nil
}

// sortSiblings sorts sessions as siblings show: createdAt asc, id asc.
func sortSiblings(kids []dshq.SessionInfo) []dshq.SessionInfo {
	slices.SortFunc(kids, func(a, b dshq.SessionInfo) int {
		return cmp.Or(cmp.Compare(a.Header.Header.CreatedAt, b.Header.Header.CreatedAt), cmp.Compare(a.Header.Header.ID, b.Header.Header.ID))
	})
	return kids
}

func rejected(id string, err error) dshq.TitleResult {
	reason := &dshq.ErrorBody{Code: dshq.ErrorCode(err), Message: err.Error()}
	if reason.Code == "" {
		reason.Code = dshq.CodePersistenceFailed
	}
	return dshq.TitleResult{SessionID: id, Status: "rejected", Reason: reason}
}

// traceSession answers sessions.trace (docs/lineage.md#tracing-a-lineage)
// without recursion, so chains of any depth work; a trace over the reply budget
// is SESSION_QUERY_REPLY_TOO_LARGE (from Run).
func (e *Engine) traceSession(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	target, err := lookup(snap, req.SessionID)
	if err != nil {
		return nil, err
	}
	tr := dshq.LineageTrace{Target: sessionRecord(snap, target), Ancestors: []dshq.SessionRecord{}, Generation: snap.Generation()}
	seen := map[string]bool{target.Header.Header.ID: true}
	for p := target.Header.Header.ParentSession; ; {
		if p == nil {
			root := tr.Target
			if n := len(tr.Ancestors); n > 0 {
				root = tr.Ancestors[n-1]
			}
			tr.Complete, tr.Root = true, &root
			break
		}
		if seen[*p] {
			return nil, dshq.Errorf(dshq.CodeInvalidLineage, "session lineage contains a cycle at %q", *p)
		}
		seen[*p] = true
		parent, ok, err := snap.Session(*p)
		if err != nil {
			return nil, fmt.Errorf("read session %q: %w", *p, err)
		}
		if !ok {
			tr.UnresolvedParentID = dshq.Str(*p)
			break
		}
		tr.Ancestors = append(tr.Ancestors, sessionRecord(snap, parent))
		p = parent.Header.Header.ParentSession
	}
	tr.Descendants, err = e.descendants(snap, target.Header.Header.ID, e.maxReply)
	if err != nil {
		return nil, err
	}
	return tr, nil
}

// descendants builds the forest under root: siblings by createdAt asc, id
// asc. It walks iteratively, a level at a time, and assembles nodes
// bottom-up. A forest whose
// records alone exceed budget bytes is refused early.
func (e *Engine) descendants(snap Snapshot, root string, budget int) ([]dshq.LineageNode, error) {
	children := map[string][]dshq.SessionInfo{}
	order := []string{root}
	seen := map[string]bool{root: true}
	size := 0
	// A level of the forest at a time: a source whose sessions are in
	// several places asks for the children of a whole level at once.
	for level := []string{root}; len(level) > 0; {
		kids, err := snap.Children(level)
		if err != nil {
			return nil, fmt.Errorf("read children: %w", err)
		}
		var next []string
		for _, id := range level {
			kept := []dshq.SessionInfo{}
			for _, k := range sortSiblings(kids[id]) {
				if seen[k.Header.Header.ID] {
					continue
				}
				seen[k.Header.Header.ID] = true
				kept = append(kept, k)
				order = append(order, k.Header.Header.ID)
				next = append(next, k.Header.Header.ID)
				size += 150 + len(k.Header.Header.ID) + len(deref(k.Header.Header.Cwd)) + len(deref(k.Header.Header.ParentSession)) + len(deref(k.Header.Header.AgentPreset))
			}
			children[id] = kept
			if size > 4*budget {
				return nil, dshq.Errorf(dshq.CodeReplyTooLarge, "lineage of session %q has more than %d descendants; its trace would exceed the reply limit of %d bytes", root, len(order)-1, budget)
			}
		}
		level = next
	}
	nodes := map[string]dshq.LineageNode{}
	for i := len(order) - 1; i >= 0; i-- {
		id := order[i]
		kids := children[id]
		list := make([]dshq.LineageNode, 0, len(kids))
		for _, k := range kids {
			n := nodes[k.Header.Header.ID]
			n.Session = sessionRecord(snap, k)
			list = append(list, n)
			delete(nodes, k.Header.Header.ID)
		}
		nodes[id] = dshq.LineageNode{Descendants: list}
	}
	return nodes[root].Descendants, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// statSession answers sessions.stat from the session's projected record
// alone: its cost does not grow with the log. It answers for an invalid
// session too, saying from which seq it is invalid.
func (e *Engine) statSession(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	info, err := lookup(snap, req.SessionID)
	if err != nil {
		return nil, err
	}
	st := dshq.SessionStat{
		Session:             sessionRecord(snap, info),
		InheritedEventCount: info.Header.InheritedEventCount,
		EventCount:          info.EventCount,
		Title:               info.Title,
		Generation:          snap.Generation(),
	}
	if info.LastStepStart >= 0 {
		st.LastStepStartSeq = &info.LastStepStart
	}
	if info.InvalidFrom >= 0 {
		st.InvalidFromSeq, st.InvalidReason = &info.InvalidFrom, info.InvalidReason
	}
	return st, nil
}
