// Package fold is the pure core of dshq: header and event validation,
// foldSurface (UPSTREAM §3), classification, replacement and provenance edges,
// semantic text (§4), titles (§2.3) and crash closers (§1.7). It does no I/O.
//
// The fold is incremental: a State holds what a session's fold needs to take
// the next event (compact and serializable, so a projector can keep millions of
// them), and Apply returns the Effects of one event so a store writes deltas.
// Folding a log event by event gives exactly what Fold gives in one pass.
package fold

import "github.com/dshq/dshq"

// Level selects how strictly events are validated.
type Level int

const (
	// Strict applies every original check (UPSTREAM §1.4): what a harness
	// appends through the SDK.
	Strict Level = iota
	// Lenient checks what correctness needs (envelope, contiguous seqs,
	// surface and provenance rules) and accepts older message shapes found
	// in real logs: what the projector reads (DESIGN.md).
	Lenient
)

// Effects is what applying one event changed.
type Effects struct {
	// Record is the new event's record; its surface is "current" for an
	// applied surface event and "log-only" otherwise.
	Record dshq.EventRecord
	// Text is the event's semantic text ("" = no search document).
	Text string
	// Shadowed lists the earlier seqs this event replaced (its
	// replacedEventSeqs), in surface order; each is now "shadowed" and
	// replaced by Record.Seq. Empty for an append.
	Shadowed []int64
	// Sources is the event's envelope sourceEventSeqs in recorded order:
	// each is a provenance edge source → Record.Seq.
	Sources []int64
	// Title is set when the event is a session/title: the new latest title.
	Title *dshq.Title
	// StepStart is true when the event is a step/start (the new last
	// step/start seq is Record.Seq).
	StepStart bool
}
