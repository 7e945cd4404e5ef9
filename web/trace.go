package web

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/query/wire"
)

// Bounds of what the event and lineage pages read beyond their own reply.
const (
	// maxLinked bounds the events the event page previews.
	maxLinked = 60
	// maxLineageStats bounds the sessions of a lineage whose titles and
	// counts are read.
	maxLineageStats = 500
)

// eventData is the event page.
type eventData struct {
	Row     sessionRow
	Event   eventView
	Trace   *dshq.EventTrace
	NoTrace string // why there is no trace (an invalid session)
	// Chain, Replaced, Sources, Derived are the linked events, previewed.
	Chain, Replaced, Sources, Derived []linked
	More                              int
	BackURL                           string
}

// linked is a preview of a linked event.
type linked struct {
	Seq     int64
	Type    string
	Preview string
	Time    int64
	URL     string
	Missing bool
}

func (s *Server) eventPage(r *http.Request) (*view, error) {
	id := r.PathValue("id")
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq < 0 {
		return nil, &httpError{status: http.StatusNotFound, title: "No such event", msg: "The event number " + r.PathValue("seq") + " is not a seq."}
	}
	ctx := r.Context()
	var (
		st    *stat
		win   *dshq.EventWindow
		trace *dshq.EventTrace
		terr  error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { st, err = s.statSession(gctx, id); return err })
	g.Go(func() (err error) {
		win, err = s.qc.ReadEvent(gctx, dshq.EventReadRequest{SessionID: id, Seq: seq})
		return err
	})
	g.Go(func() error {
		trace, terr = s.qc.TraceEvent(gctx, dshq.EventTraceRequest{SessionID: id, Seq: seq})
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d := &eventData{Row: newRow(sessionRecord{SessionRecord: st.Session, Harness: st.Harness}, st), BackURL: eventURL(id, seq, s.pageSize)}
	d.Event = renderEvent(id, win.Target, true)
	d.Event.Inherited = seq < st.InheritedEventCount
	switch {
	case terr == nil:
		d.Trace = trace
		d.Event.Surface = string(trace.Target.Surface)
		d.Event.ReplacedBy = trace.ReplacedBy
		d.Event.Replaced = trace.ReplacedEventSeqs
		s.previewLinks(ctx, id, d)
	case dshq.ErrorCode(terr) == dshq.CodeInvalidSurface:
		d.NoTrace = clean(terr.Error())
	default:
		return nil, terr
	}
	return &view{Page: "event", Title: "#" + strconv.FormatInt(seq, 10) + " " + d.Event.Type + " · " + d.Row.Label, Data: d}, nil
}

// previewLinks reads the events the trace links to (at most maxLinked).
func (s *Server) previewLinks(ctx context.Context, id string, d *eventData) {
	t := d.Trace
	want := map[int64]bool{}
	for _, l := range [][]int64{t.ReplacementChain, t.ReplacedEventSeqs, t.SourceEventSeqs, t.DerivedEventSeqs} {
		for _, seq := range l {
			want[seq] = true
		}
	}
	seqs := make([]int64, 0, len(want))
	for seq := range want {
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	if len(seqs) > maxLinked {
		d.More = len(seqs) - maxLinked
		seqs = seqs[:maxLinked]
	}
	var mu sync.Mutex // guards got
	got := map[int64]dshq.Event{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(fanout)
	for _, seq := range seqs {
		g.Go(func() error {
			w, err := s.qc.ReadEvent(gctx, dshq.EventReadRequest{SessionID: id, Seq: seq})
			if err == nil {
				mu.Lock()
				got[seq] = w.Target
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	mk := func(l []int64) []linked {
		out := make([]linked, 0, len(l))
		for _, seq := range l {
			e, ok := got[seq]
			if !ok && !want[seq] {
				continue
			}
			lk := linked{Seq: seq, URL: eventURL(id, seq, s.pageSize), Missing: !ok}
			if ok {
				lk.Type, lk.Time = clean(e.Type), e.Time
				lk.Preview = clean(firstLine(fold.Text(e), 160))
			}
			out = append(out, lk)
		}
		return out
	}
	d.Chain, d.Replaced, d.Sources, d.Derived = mk(t.ReplacementChain), mk(t.ReplacedEventSeqs), mk(t.SourceEventSeqs), mk(t.DerivedEventSeqs)
}

// lineageData is the lineage page.
type lineageData struct {
	Target     sessionRow
	Ancestors  []sessionRow // root first
	Tree       []lineageNode
	Complete   bool
	Unresolved string
	Count      int
}

// lineageNode is one descendant with its own.
type lineageNode struct {
	Row      sessionRow
	Children []lineageNode
}

func (s *Server) lineagePage(r *http.Request) (*view, error) {
	id := r.PathValue("id")
	ctx := r.Context()
	var lt struct {
		Target      sessionRecord   `json:"target"`
		Ancestors   []sessionRecord `json:"ancestors"`
		Descendants []wireLineage   `json:"descendants"`
		Complete    bool            `json:"complete"`
		Unresolved  *string         `json:"unresolvedParentId"`
	}
	if err := s.call(ctx, wire.EndpointSessionsTrace, dshq.SessionTraceRequest{SessionID: id}, &lt); err != nil {
		return nil, err
	}
	ids := []string{lt.Target.Header.ID}
	for _, a := range lt.Ancestors {
		ids = append(ids, a.Header.ID)
	}
	var walk func([]wireLineage)
	walk = func(ns []wireLineage) {
		for _, n := range ns {
			ids = append(ids, n.Session.Header.ID)
			walk(n.Descendants)
		}
	}
	walk(lt.Descendants)
	stats := s.statAll(ctx, ids[:min(len(ids), maxLineageStats)])
	d := &lineageData{Target: newRow(lt.Target, stats[lt.Target.Header.ID]), Complete: lt.Complete, Count: len(ids)}
	if lt.Unresolved != nil {
		d.Unresolved = *lt.Unresolved
	}
	for i := len(lt.Ancestors) - 1; i >= 0; i-- {
		d.Ancestors = append(d.Ancestors, newRow(lt.Ancestors[i], stats[lt.Ancestors[i].Header.ID]))
	}
	var build func([]wireLineage) []lineageNode
	build = func(ns []wireLineage) []lineageNode {
		out := make([]lineageNode, 0, len(ns))
		for _, n := range ns {
			out = append(out, lineageNode{Row: newRow(n.Session, stats[n.Session.Header.ID]), Children: build(n.Descendants)})
		}
		return out
	}
	d.Tree = build(lt.Descendants)
	title := d.Target.Title
	if title == "" {
		title = d.Target.Label
	}
	return &view{Page: "lineage", Title: "Lineage · " + title, Data: d}, nil
}

// wireLineage is a SessionLineageNode with the harness-aware record.
type wireLineage struct {
	Session     sessionRecord `json:"session"`
	Descendants []wireLineage `json:"descendants"`
}

// UnresolvedLabel is the cleaned id of a parent that is not in the corpus.
func (d *lineageData) UnresolvedLabel() string { return clean(d.Unresolved) }
