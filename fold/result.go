package fold

import (
	"encoding/json"
	"slices"

	"github.com/dshq/dshq"
)

// Message is one model-history message
// (docs/events-and-surfaces.md#model-history) and the surface node it comes
// from.
type Message struct {
	Seq  int64  `json:"seq"`
	Type string `json:"type"`
	// Message is the message JSON: a user/message's data, the data.message
	// of an assistant/message or tool/result (their data itself in the older
	// shape without data.message).
	Message json.RawMessage `json:"message"`
}

// Result is the fold of a whole log (Fold): every event's record with its
// final surface, the replacement and provenance edges, the search
// documents, the current surface and the model history.
type Result struct {
	// Records holds one record per event, index = seq, with the final
	// surface classification (docs/events-and-surfaces.md#classification).
	Records []dshq.EventRecord `json:"records"`
	// Texts holds each event's semantic text, index = seq ("" = none).
	Texts []string `json:"-"`
	// ReplacedBy maps each shadowed seq to the seq of the replacement that
	// removed it (docs/events-and-surfaces.md#event-traces).
	ReplacedBy map[int64]int64 `json:"replacedBy"`
	// ReplacedEventSeqs maps each replacing seq to the seqs it removed, in
	// surface order (direct removals only).
	ReplacedEventSeqs map[int64][]int64 `json:"replacedEventSeqs"`
	// Sources maps each event that carries sourceEventSeqs to that list, in
	// recorded order.
	Sources map[int64][]int64 `json:"sources"`
	// Derived maps each cited seq to the later events citing it, ascending.
	Derived map[int64][]int64 `json:"derived"`
	// Surface is the current surface: node seqs in model order.
	Surface []int64 `json:"surface"`
	// CapturedThroughSeq is the last seq, nil for an empty log.
	CapturedThroughSeq *int64 `json:"capturedThroughSeq"`
	// Title is the latest session/title, nil when there is none.
	Title *dshq.Title `json:"title"`
	// LastStepStart is the seq of the last step/start, nil when none.
	LastStepStart *int64 `json:"lastStepStart"`
	// Messages is the model history (docs/events-and-surfaces.md#model-history)
	// in surface order.
	Messages []Message `json:"messages"`
	// State is the fold state after the last applied event.
	State *State `json:"-"`

	events []dshq.Event
}

// Fold folds a whole log in one pass by applying each event in turn, so it
// is exactly what an incremental Apply gives. On a refused event it returns
// the fold of the events before it together with the *ValidationError.
func Fold(h dshq.HeaderRecord, events []dshq.Event, level Level) (*Result, error) {
	s := New(h, level)
	r := newResult(s)
	for _, e := range events {
		eff, err := s.Apply(e)
		if err != nil {
			r.finish()
			return r, err
		}
		r.add(e, eff)
	}
	r.finish()
	return r, nil
}

func newResult(s *State) *Result {
	return &Result{
		ReplacedBy:        map[int64]int64{},
		ReplacedEventSeqs: map[int64][]int64{},
		Sources:           map[int64][]int64{},
		Derived:           map[int64][]int64{},
		State:             s,
	}
}

// add records one applied event's effects.
func (r *Result) add(e dshq.Event, eff Effects) {
	r.Records = append(r.Records, eff.Record)
	r.Texts = append(r.Texts, eff.Text)
	r.events = append(r.events, e)
	seq := eff.Record.Seq
	for _, x := range eff.Shadowed {
		r.ReplacedBy[x] = seq
		r.Records[x].Surface = dshq.SurfaceShadowed
	}
	if len(eff.Shadowed) > 0 {
		r.ReplacedEventSeqs[seq] = slices.Clone(eff.Shadowed)
	}
	if eff.Sources != nil {
		r.Sources[seq] = slices.Clone(eff.Sources)
		for _, src := range eff.Sources {
			r.Derived[src] = append(r.Derived[src], seq)
		}
	}
}

// finish derives the summary fields from the state.
func (r *Result) finish() {
	s := r.State
	r.Surface = s.Surface()
	if last, ok := s.CapturedThroughSeq(); ok {
		r.CapturedThroughSeq = &last
	}
	r.Title = s.Title()
	if last, ok := s.LastStepStart(); ok {
		r.LastStepStart = &last
	}
	r.Messages = []Message{}
	for _, seq := range s.MessageSeqs() {
		e := r.events[seq]
		r.Messages = append(r.Messages, Message{Seq: seq, Type: e.Type, Message: messageJSON(e)})
	}
}

// Documents returns the search documents (docs/search.md#search-documents):
// one per event with semantic text, ascending seq, with its final surface.
func (r *Result) Documents() []dshq.SearchDocument {
	docs := []dshq.SearchDocument{}
	for i, rec := range r.Records {
		if r.Texts[i] != "" {
			docs = append(docs, dshq.SearchDocument{EventRecord: rec, Text: r.Texts[i]})
		}
	}
	return docs
}

// Trace is the fold's part of an event trace
// (docs/events-and-surfaces.md#event-traces).
type Trace struct {
	Target dshq.EventRecord `json:"target"`
	// ReplacedBy is the replacement that removed the target, nil when the
	// target is not shadowed.
	ReplacedBy *int64 `json:"replacedBy,omitempty"`
	// ReplacementChain follows ReplacedBy until a node that is not replaced.
	ReplacementChain []int64 `json:"replacementChain"`
	// ReplacedEventSeqs is what the target removed, if it replaced.
	ReplacedEventSeqs []int64 `json:"replacedEventSeqs"`
	// SourceEventSeqs is the target's own envelope list, recorded order.
	SourceEventSeqs []int64 `json:"sourceEventSeqs"`
	// DerivedEventSeqs lists the later events citing the target, ascending
	// (direct citations only).
	DerivedEventSeqs []int64 `json:"derivedEventSeqs"`
}

// Trace returns the trace of seq, and false when the log has no such event.
func (r *Result) Trace(seq int64) (Trace, bool) {
	if seq < 0 || seq >= int64(len(r.Records)) {
		return Trace{}, false
	}
	t := Trace{
		Target:            r.Records[seq],
		ReplacementChain:  []int64{},
		ReplacedEventSeqs: orEmpty(r.ReplacedEventSeqs[seq]),
		SourceEventSeqs:   orEmpty(r.Sources[seq]),
		DerivedEventSeqs:  orEmpty(r.Derived[seq]),
	}
	if by, ok := r.ReplacedBy[seq]; ok {
		t.ReplacedBy = &by
	}
	// Removal is permanent and a replacement's seq is always later than what
	// it removes, so the chain is finite.
	for x, ok := r.ReplacedBy[seq]; ok; x, ok = r.ReplacedBy[x] {
		t.ReplacementChain = append(t.ReplacementChain, x)
	}
	return t, true
}

func orEmpty(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return slices.Clone(s)
}
