// Package usage is what the agents spent: the tokens each model call used,
// read from the stored events of every harness (Claude Code, Codex,
// deepseek-harness), their price, and their sums by period, session,
// workspace, branch, model, harness, tenant and machine
// (docs/usage.md). It does no I/O: the projection feeds it events and keeps
// its rows; the engine asks it to sum them.
package usage

// Tokens are the token counts of one or more model calls, in ccusage's
// four columns. Input excludes cached input (Codex's input_tokens
// includes it; Input is input_tokens − cached_input_tokens), so the four
// are disjoint and Total is their sum. CacheCreation1h is the part of
// CacheCreation written to the one-hour cache (Claude's
// cache_creation.ephemeral_1h_input_tokens), priced apart.
type Tokens struct {
	Input           int64 `json:"inputTokens"`
	Output          int64 `json:"outputTokens"`
	CacheCreation   int64 `json:"cacheCreationTokens"`
	CacheRead       int64 `json:"cacheReadTokens"`
	CacheCreation1h int64 `json:"-"`
	// Calls is the number of model calls counted.
	Calls int64 `json:"-"`
}

// Total is the sum of the four columns.
func (t Tokens) Total() int64 { return t.Input + t.Output + t.CacheCreation + t.CacheRead }

// Add adds u to t.
func (t *Tokens) Add(u Tokens) {
	t.Input += u.Input
	t.Output += u.Output
	t.CacheCreation += u.CacheCreation
	t.CacheRead += u.CacheRead
	t.CacheCreation1h += u.CacheCreation1h
	t.Calls += u.Calls
}

// Sub subtracts u from t.
func (t *Tokens) Sub(u Tokens) {
	t.Input -= u.Input
	t.Output -= u.Output
	t.CacheCreation -= u.CacheCreation
	t.CacheRead -= u.CacheRead
	t.CacheCreation1h -= u.CacheCreation1h
	t.Calls -= u.Calls
}

// IsZero reports whether t counts nothing.
func (t Tokens) IsZero() bool { return t == Tokens{} }

// Entry is one model call's usage, as an event states it.
type Entry struct {
	// Time is when the call was made (Unix ms): the source record's
	// timestamp, else the event's time.
	Time int64
	// Model is the model that answered ("unknown" when no record says).
	Model string
	// Branch is the git branch the harness recorded ("" when none).
	Branch string
	// Session is the session that spent it when it is not the one whose
	// event states it: the child an inline sidechain record is routed to.
	Session string
	// Key identifies the call across every session of a tenant ("" when
	// the records give no identity): Claude Code's message id and request
	// id, a Codex token count's time and totals.
	Key string
	// Replace says that a later entry with the same Key replaces this one
	// (Claude Code writes a streamed message several times, the last with
	// the final counts); otherwise a later one is dropped (a Codex child
	// replaying its parent's lines).
	Replace bool
	// Mirror says that the entry is another session's copy of the call (a
	// Claude Code agent_progress record mirrors its subagent's message):
	// it counts the call until the session that made it states it, and
	// never takes the call from that session, whichever is read first.
	Mirror bool
	Tokens
}

// UnknownModel is the model of a call whose records name none.
const UnknownModel = "unknown"

// NativeHarness is the harness dimension of a session written through the
// harness SDK (a header without harness): deepseek-harness.
const NativeHarness = "deepseek-harness"
