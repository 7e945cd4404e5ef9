package authz

import (
	"github.com/dshq/dshq"
)

// Dedupe returns ids without repeats, in first-occurrence order.
func Dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// ParentPreflight returns the filters of the one pre-authorization read of
// requested parent ids: those ids (de-duplicated) within the caller's
// workspace (its cwd and tenant). It fails with
// SESSION_QUERY_TOOL_UNAUTHORIZED (no workspace) when the caller has no cwd.
func (c Caller) ParentPreflight(requested []string) ([]dshq.Filter, error) {
	scope, err := c.SearchScope()
	if err != nil {
		return nil, err
	}
	ids := Dedupe(requested)
	values := make([]*string, len(ids))
	for i, id := range ids {
		values[i] = dshq.Str(id)
	}
	return append([]dshq.Filter{{Kind: dshq.FilterID, Values: values}}, scope...), nil
}

// ParentClause builds the parent clause of a search from the requested parent
// ids, the records their pre-authorization returned, and whether root
// sessions are included: the authorized requested ids in request order
// (records that were not requested are ignored), then null for roots. ok is
// false when the clause is empty: the tool then answers "no matches" without
// searching, so that hidden and nonexistent parents are indistinguishable.
func (c Caller) ParentClause(requested []string, found []dshq.SessionRecord, includeRoot bool) (clause dshq.Filter, ok bool) {
	visible := make(map[string]bool, len(found))
	for _, r := range found {
		if c.Authorized(r) {
			visible[r.Header.ID] = true
		}
	}
	var values []*string
	for _, id := range Dedupe(requested) {
		if visible[id] {
			values = append(values, dshq.Str(id))
		}
	}
	if includeRoot {
		values = append(values, nil)
	}
	if len(values) == 0 {
		return dshq.Filter{}, false
	}
	return dshq.Filter{Kind: dshq.FilterParent, Values: values}, true
}

// ParentLabel renders a shown session's parent: "root" when it has none, the
// parent id when visible reports it authorized, else "[outside workspace]".
func ParentLabel(h dshq.Header, visible map[string]bool) string {
	switch {
	case h.ParentSession == nil:
		return "root"
	case visible[*h.ParentSession]:
		return *h.ParentSession
	default:
		return MsgOutsideParent
	}
}

// Lineage is a lineage trace pruned at the caller's workspace boundary (its
// tenant's, then its cwd's): no hidden id appears in it.
type Lineage struct {
	// Target is the traced session.
	Target dshq.SessionRecord
	// Ancestors are the visible ancestors, nearest first, up to the first
	// hidden one.
	Ancestors []dshq.SessionRecord
	// Boundary is true when the chain stops at a hidden ancestor or is
	// incomplete (an unresolved parent).
	Boundary bool
	// Descendants are the target's children in the trace's order.
	Descendants []Node
}

// Node is one descendant. Session is nil for a hidden descendant, whose whole
// subtree is pruned (Children is then empty).
type Node struct {
	Session  *dshq.SessionRecord
	Children []Node
}

// PruneLineage prunes a lineage trace read for targetID. The target itself is
// re-checked against the record observed in the same read
// (SESSION_QUERY_TOOL_UNAUTHORIZED on a mismatch). Ancestors stop at the first
// hidden one (of another cwd or another tenant); a hidden descendant becomes a
// marker and its subtree is dropped, authorized grandchildren included. The
// unresolved parent id is never kept.
func (c Caller) PruneLineage(targetID string, t dshq.LineageTrace) (Lineage, error) {
	if t.Target.Header.ID != targetID || !c.Authorized(t.Target) {
		return Lineage{}, ErrUnauthorized()
	}
	out := Lineage{Target: t.Target, Boundary: !t.Complete}
	for _, a := range t.Ancestors {
		if !c.Authorized(a) {
			out.Boundary = true
			break
		}
		out.Ancestors = append(out.Ancestors, a)
	}
	out.Descendants = c.pruneNodes(t.Descendants)
	return out, nil
}

// pruneNodes prunes a forest iteratively (lineages may be thousands deep).
func (c Caller) pruneNodes(in []dshq.LineageNode) []Node {
	type frame struct {
		src []dshq.LineageNode
		dst *[]Node
	}
	var root []Node
	stack := []frame{{in, &root}}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		*f.dst = make([]Node, len(f.src))
		for i := range f.src {
			n := &f.src[i]
			if !c.Authorized(n.Session) {
				continue // zero Node: the hidden marker
			}
			rec := n.Session
			(*f.dst)[i].Session = &rec
			if len(n.Descendants) > 0 {
				stack = append(stack, frame{n.Descendants, &(*f.dst)[i].Children})
			}
		}
	}
	return root
}

// Walk visits a pruned forest in preorder with each node's depth (0 for the
// target's children), iteratively.
func Walk(nodes []Node, visit func(n Node, depth int)) {
	type item struct {
		n     Node
		depth int
	}
	stack := make([]item, 0, len(nodes))
	for i := len(nodes) - 1; i >= 0; i-- {
		stack = append(stack, item{nodes[i], 0})
	}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visit(it.n, it.depth)
		for i := len(it.n.Children) - 1; i >= 0; i-- {
			stack = append(stack, item{it.n.Children[i], it.depth + 1})
		}
	}
}
