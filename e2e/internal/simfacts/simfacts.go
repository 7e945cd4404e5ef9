// Package simfacts is what the end-to-end harness simulator
// (e2e/internal/harnesssim) reports about the sessions it wrote: every
// record as published, and the facts a query must reproduce (phrases and the
// seqs that hold them, compactions, tool calls, titles, lineage). The e2e
// tests read it and check the running services against it.
package simfacts

import "encoding/json"

// Facts is one simulator run: the sessions it wrote, in creation order.
type Facts struct {
	// Sim names the simulator process.
	Sim string `json:"sim"`
	// Cwd is the workspace every session of this run belongs to.
	Cwd string `json:"cwd"`
	// Sessions are the sessions written, in creation order.
	Sessions []Session `json:"sessions"`
}

// Role says what part a session plays in a run.
type Role string

// The roles of a run's sessions.
const (
	// RoleRoot is a root session with a turn, a tool call and a compaction.
	RoleRoot Role = "root"
	// RoleFork is a fork of the root (isSeeded, inheritedEventCount).
	RoleFork Role = "fork"
	// RoleSubagent is a subagent spawned by the root (origin subagent).
	RoleSubagent Role = "subagent"
	// RoleBulk is a plain root session of several turns (corpus volume).
	RoleBulk Role = "bulk"
	// RoleCrash is a session left with its turn open on an unanswered tool
	// call by a harness that is then killed.
	RoleCrash Role = "crash"
)

// Session is one session as written.
type Session struct {
	// ID is the session id.
	ID string `json:"id"`
	// Role is the session's part in the run.
	Role Role `json:"role"`
	// Header is the header record as published.
	Header json.RawMessage `json:"header"`
	// Parent is the parent session id, "" for a root.
	Parent string `json:"parent,omitempty"`
	// InheritedEventCount is the inherited prefix length (forks).
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// Events are the event records as published, in seq order.
	Events []json.RawMessage `json:"events"`
	// Title is the latest session/title, "" when none.
	Title string `json:"title,omitempty"`
	// Phrases maps a phrase written in this session to the seqs whose
	// semantic text holds it (inherited events included).
	Phrases map[string][]int64 `json:"phrases"`
	// Compaction is the compaction written in this session, if any.
	Compaction *Compaction `json:"compaction,omitempty"`
	// ToolCall is the tool call written in this session, if any.
	ToolCall *ToolCall `json:"toolCall,omitempty"`
}

// Compaction is a summarising compaction: a user/message checkpoint that
// replaced a range of the surface.
type Compaction struct {
	// StartSeq is the compaction/start event.
	StartSeq int64 `json:"startSeq"`
	// SummarySeq is the compaction/summary event.
	SummarySeq int64 `json:"summarySeq"`
	// CheckpointSeq is the replacing user/message.
	CheckpointSeq int64 `json:"checkpointSeq"`
	// ShadowedSeqs are the surface nodes the checkpoint replaced.
	ShadowedSeqs []int64 `json:"shadowedSeqs"`
	// SourceEventSeqs is the checkpoint's sourceEventSeqs as written.
	SourceEventSeqs []int64 `json:"sourceEventSeqs"`
}

// ToolCall is one tool call with its result.
type ToolCall struct {
	// AssistantSeq is the assistant/message carrying the tool-call block.
	AssistantSeq int64 `json:"assistantSeq"`
	// CallSeq is the tool/call event.
	CallSeq int64 `json:"callSeq"`
	// ResultSeq is the tool/result event (it cites CallSeq); -1 when the
	// call was never answered.
	ResultSeq int64 `json:"resultSeq"`
}
