package fold

// knownTypes is the event vocabulary of the original harness
// (docs/events-and-surfaces.md#event-types): the core types and the
// plugin-merged ones. assistant/chunk (G0) and assistant/attempt (G2) are both
// listed; the removed historical types (context/message, steering/message,
// prompt/blocked, request/header-delta) are not.
var knownTypes = map[string]bool{
	"turn/start": true, "turn/end": true, "step/start": true, "step/end": true,
	"user/message": true, "assistant/message": true, "assistant/chunk": true,
	"assistant/attempt": true, "tool/call": true, "tool/result": true,
	"request/header": true, "request/context": true, "session/end-seed": true,
	"todo/write": true,

	"agent/inbox/spliced": true, "agent-preset/selected": true,
	"approval/asked": true, "approval/decided": true, "approval/policy": true,
	"command/run": true, "command/done": true,
	"compaction/start": true, "compaction/summary": true, "compaction/prune": true,
	"compaction/end": true, "feedback/record": true, "goal/change": true,
	"hook/invoked": true, "hook/result": true, "llm/retry": true,
	"llm/retry-started": true, "model/selection": true, "permission/preset": true,
	"plan/mode": true, "sandbox/mode": true, "schedule/change": true,
	"session/title": true, "session/title-llm-request": true,
	"subagent/descriptor": true, "team/member": true, "team/message/queued": true,
	"team/message/delivered": true, "team/task": true,
	"tool/code-dispatch-start": true, "tool/code-dispatch": true,
	"tool-workflow/run-start": true, "tool-workflow/run-end": true,
	"tool-workflow/agent-start": true, "tool-workflow/agent-end": true,
	"web/deepseek-search-llm-request": true,
}

// KnownType reports whether t is an event type of the original vocabulary.
// Apply accepts unknown types at both levels (log-only, no text); the
// harness SDK's read path uses KnownType to keep the original refusal of an
// unknown type that is not marked ignorable.
func KnownType(t string) bool { return knownTypes[t] }
