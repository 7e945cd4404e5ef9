// Package fold is the pure core of dshq: header and event validation,
// foldSurface (docs/events-and-surfaces.md#the-fold), classification,
// replacement and provenance edges, semantic text (docs/search.md#semantic-text),
// titles (docs/events-and-surfaces.md#titles), crash closers
// (docs/events-and-surfaces.md#crash-closers-and-the-balanced-view) and the one
// reading of event data (Data: a message, its content blocks) that the fold,
// the CLI and the web UI present events with. It does no I/O and starts no
// goroutines.
//
// The fold is incremental: a State holds what a session's fold needs to take
// the next event (compact and serializable, so a projector can keep millions of
// them), and Apply returns the Effects of one event so a store writes deltas.
// Folding a log event by event gives exactly what Fold gives in one pass:
// Fold is a loop over Apply.
//
// Rules and decisions, beyond the upstream text:
//
//   - A log is folded under the rules of its header's FormatVersion: 0 is G0
//     (an assistant/message may cite sources, even an empty list; -0 reads as
//     0), anything else G2 (an assistant/message may not carry
//     sourceEventSeqs, so it can never replace; -0 is refused as a replace
//     bound).
//   - Both levels check the envelope (key set when Raw is known, a type,
//     seq = next index, a safe-integer time, data present, ignorable absent
//     or true) and every surface and provenance rule, in upstream's order and
//     with upstream's messages. Strict adds upstream's seed checks: lossless
//     JSON (no -0, no non-finite number), the refused legacy vocabulary
//     (request/header-delta, reason "fallback"), the request header's
//     provider/model, reasoningEffort and adapterDefaults, the identified
//     message shapes, and a well-formed session/title. Lenient reads older
//     shapes: a message without id/role, blocks in data.content without
//     data.message (same text; a tool/result rewrite then compares data with
//     data.content nulled).
//   - Any event type is accepted at both levels; one the fold does not know
//     is log-only with no text. KnownType gives the original vocabulary for
//     the harness SDK's read path.
//   - A tool/result node keeps a 16-byte digest (SHA-256 of the canonical
//     JSON, keys sorted, numbers as JavaScript reads them) of its data with
//     message.content replaced by [first block with content null], as
//     upstream's rewrite check compares; the state never holds event data.
//   - Not checked: G2's re-assembly of an assistant message's embedded
//     stream.
package fold

import "github.com/dshq/dshq"

// Level selects how strictly events are validated.
type Level int

const (
	// Strict applies every original check: what a harness appends through
	// the SDK (docs/events-and-surfaces.md#strict-and-lenient-validation).
	Strict Level = iota
	// Lenient checks what correctness needs (envelope, contiguous seqs,
	// surface and provenance rules) and accepts older message shapes found
	// in real logs: what the projector reads.
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
