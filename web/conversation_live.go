package web

import (
	"encoding/json"
	"strings"
)

// convLive says where a live event goes in the conversation view, so it
// joins the page's structure instead of being appended as a raw row: a
// turn/start opens a turn section, a turn/end closes the open turn, a
// result goes under its call and the duplicate tool/call into it,
// bookkeeping into the quiet fold at the end of the turn, the rest into the
// open turn's items. The page's script places it (web/static/app.js);
// where the place is not on the page (a call on an earlier page) it falls
// back to the item.
type convLive struct {
	// Place is turn, end, result, call, fold or item.
	Place  string `json:"place"`
	CallID string `json:"callId,omitempty"`
	// Kind is a bookkeeping event's kind in its fold's summary.
	Kind string `json:"kind,omitempty"`
	// HTML is what is inserted: the turn's section, the turn's footer, the
	// call's result, a fold of the one event, or the item.
	HTML string `json:"html"`
}

// liveConv places v, rendered as row (its event-row), in the conversation.
func (s *Server) liveConv(v eventView, row string) (convLive, error) {
	var err error
	c := convLive{Place: "item", HTML: row, CallID: v.CallID}
	switch {
	case v.Type == "turn/start":
		c.Place = "turn"
		c.HTML, err = s.fragment("conv-turn", &convTurn{Number: v.turnNumber, StartSeq: v.Seq, HasStart: true, StartTime: v.Time, LastTime: v.Time})
	case v.Type == "turn/end":
		c.Place = "end"
		c.HTML, err = s.fragment("turn-end", &v)
	case v.Type == "tool/call" && v.CallID != "":
		c.Place = "call"
	case v.Type == "tool/result" && v.CallID != "":
		c.Place = "result"
		c.HTML, err = s.fragment("call-result", &v)
	case isBookkeeping(&v):
		c.Place, c.Kind = "fold", shortType(v.Type)
		c.HTML, err = s.fragment("conv-item", &convItem{Kind: "fold", Fold: []*eventView{&v}})
	case v.IsReplace:
		c.HTML, err = s.fragment("conv-item", &convItem{Kind: "boundary", Event: &v, Boundary: boundaryKind(&v)})
	}
	return c, err
}

// FoldKinds is the fold's kinds and counts as JSON ([["progress",8],…], in
// the order they first appear), for the live script to extend the summary.
func (it *convItem) FoldKinds() string {
	order, n := it.foldCounts()
	out := make([][2]any, 0, len(order))
	for _, k := range order {
		out = append(out, [2]any{k, n[k]})
	}
	b, _ := json.Marshal(out)
	return strings.TrimSpace(string(b))
}
