package main

import (
	"encoding/json"
	"fmt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/e2e/internal/simfacts"
)

// zhPrefix gives each simulator its own Chinese characters, so that its
// Chinese phrases are found in its sessions only.
var zhPrefix = []string{"甲组", "乙组", "丙组", "丁组", "戊组", "己组", "庚组", "辛组"}

const (
	provider = "deepseek-official"
	model    = "deepseek-v4-flash"
	// baseTime keeps every run's times and ids deterministic.
	baseTime = int64(1_790_000_000_000)
)

// sim builds the sessions of one simulator.
type sim struct {
	index int
	name  string
	cwd   string
	zh    string
	clock int64
	facts simfacts.Facts
	// rootEvents are the root's events, the fork's inherited prefix.
	rootEvents []json.RawMessage
}

func newSim(index int, idPrefix string) *sim {
	name := fmt.Sprintf("%ssim%d", idPrefix, index)
	cwd := fmt.Sprintf("/work/e2e/workspace-%d", index)
	return &sim{index: index, name: name, cwd: cwd, zh: zhPrefix[index],
		clock: baseTime + int64(index)*10_000_000, facts: simfacts.Facts{Sim: name, Cwd: cwd}}
}

// plan is one session to write: its header, its events in append batches,
// and its facts (header and events are filled in once written).
type plan struct {
	header    dshq.Header
	inherited int64
	batches   [][]json.RawMessage
	facts     simfacts.Session
	next      int64
}

func (s *sim) newPlan(id string, role simfacts.Role) *plan {
	s.clock += 1000
	p := &plan{header: dshq.Header{Version: dshq.FormatVersion2, ID: id, CreatedAt: s.clock, Cwd: dshq.Str(s.cwd)}}
	p.facts = simfacts.Session{ID: id, Role: role, Phrases: map[string][]int64{}}
	return p
}

// batch starts a new append batch.
func (p *plan) batch() { p.batches = append(p.batches, nil) }

// add appends an event to the current batch and returns its seq. surfaceOp
// and sources are omitted when nil.
func (s *sim) add(p *plan, typ string, data any, surfaceOp any, sources []int64) int64 {
	s.clock++
	seq := p.next
	p.next++
	d, err := json.Marshal(data)
	if err != nil {
		panic(err) // the simulator's own literals always marshal
	}
	raw := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s`, typ, seq, s.clock, d)
	if surfaceOp != nil {
		op, _ := json.Marshal(surfaceOp)
		raw += `,"surfaceOp":` + string(op)
	}
	if sources != nil {
		src, _ := json.Marshal(sources)
		raw += `,"sourceEventSeqs":` + string(src)
	}
	raw += "}"
	last := len(p.batches) - 1
	p.batches[last] = append(p.batches[last], json.RawMessage(raw))
	return seq
}

// phrase records that the semantic text of seq holds each phrase.
func (p *plan) phrase(seq int64, phrases ...string) {
	for _, ph := range phrases {
		p.facts.Phrases[ph] = append(p.facts.Phrases[ph], seq)
	}
}

func text(t string) map[string]any { return map[string]any{"type": "text", "text": t} }

func (s *sim) userMessage(p *plan, id string, texts ...string) int64 {
	content := make([]any, len(texts))
	for i, t := range texts {
		content[i] = text(t)
	}
	msg := map[string]any{"id": id, "role": "user", "source": map[string]any{"kind": "user"}, "content": content}
	return s.add(p, dshq.TypeUserMessage, msg, "append", nil)
}

func (s *sim) assistant(p *plan, turn, step int, id string, content ...any) int64 {
	msg := map[string]any{"id": id, "role": "assistant",
		"source": map[string]any{"kind": "model", "provider": provider, "model": model}, "content": content}
	return s.add(p, dshq.TypeAssistantMessage, map[string]any{"turn": turn, "step": step, "message": msg}, "append", nil)
}

// Phrases of the root, the fork and the subagent of a simulator.
func (s *sim) rootPhrase() string   { return s.name + " amber lighthouse protocol" }
func (s *sim) rootZh() string       { return s.zh + "检索重试预算" }
func (s *sim) answerPhrase() string { return s.name + " retry budget lives in config" }
func (s *sim) toolPhrase() string   { return s.name + " grep found tangerine" }
func (s *sim) summaryPhrase() string {
	return s.name + " checkpoint summary of the lighthouse"
}
func (s *sim) forkPhrase() string { return s.name + " cobalt orchard ledger" }
func (s *sim) forkZh() string     { return s.zh + "分叉会话继承" }
func (s *sim) subPhrase() string  { return s.name + " violet quarry signal" }
func (s *sim) subZh() string      { return s.zh + "子代理分派任务" }

// root is a session with one turn (a user message in English and Chinese,
// a title, a tool call and its result, an answer), then a summarising
// compaction between turns whose checkpoint replaces the first three
// surface nodes, then a todo list.
func (s *sim) root() *plan {
	p := s.newPlan(s.name+"-root", simfacts.RoleRoot)
	p.batch()
	s.add(p, "turn/start", map[string]any{"turn": 1}, nil, nil)
	u := s.userMessage(p, s.name+"-m-u1", s.rootPhrase()+".", s.rootZh()+"在哪里配置？")
	p.phrase(u, s.rootPhrase(), s.rootZh())
	title := s.name + " lighthouse retry budget"
	s.add(p, "session/title", map[string]any{"title": title, "messageSeqs": []int64{u}, "source": map[string]any{"kind": "fallback"}}, nil, nil)
	p.facts.Title = title
	s.add(p, "step/start", map[string]any{"turn": 1, "step": 1}, nil, nil)
	args := fmt.Sprintf(`{"pattern":"%sRetryBudget"}`, s.name)
	a1 := s.assistant(p, 1, 1, s.name+"-m-a1", map[string]any{"type": "reasoning", "text": "search the config"},
		map[string]any{"type": "tool-call", "id": "call_1", "name": "grep", "arguments": args})
	call := s.add(p, "tool/call", map[string]any{"turn": 1, "step": 1, "callId": "call_1", "name": "grep", "arguments": args}, nil, nil)
	resultMsg := map[string]any{"id": s.name + "-m-t1", "role": "user", "source": map[string]any{"kind": "tool", "callId": "call_1"},
		"content": []any{map[string]any{"type": "tool-result", "toolCallId": "call_1", "isError": false,
			"content": []any{text("src/config.ts:42: " + s.toolPhrase())}}}}
	res := s.add(p, dshq.TypeToolResult, map[string]any{"turn": 1, "step": 1, "message": resultMsg}, "append", []int64{call})
	p.phrase(res, s.toolPhrase())
	p.facts.ToolCall = &simfacts.ToolCall{AssistantSeq: a1, CallSeq: call, ResultSeq: res}
	s.add(p, "step/end", map[string]any{"turn": 1, "step": 1}, nil, nil)
	s.add(p, "step/start", map[string]any{"turn": 1, "step": 2}, nil, nil)
	a2 := s.assistant(p, 1, 2, s.name+"-m-a2", text("The "+s.answerPhrase()+" line 42. 预算默认为三次。"))
	p.phrase(a2, s.answerPhrase())
	s.add(p, "step/end", map[string]any{"turn": 1, "step": 2}, nil, nil)
	s.add(p, "turn/end", map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}}, nil, nil)

	p.batch()
	shadowed := []int64{u, a1, res}
	start := s.add(p, "compaction/start", map[string]any{"compactionId": "cmp-1", "turn": nil}, nil, nil)
	summary := "User asked where the retry budget lives; " + s.summaryPhrase() + "."
	sum := s.add(p, "compaction/summary", map[string]any{"compactionId": "cmp-1", "summary": []any{text(summary)},
		"shadowedRange": map[string]any{"start": u, "end": res}, "shadowedSeqs": shadowed, "shadowedTokenCount": 905,
		"provider": provider, "model": model}, nil, nil)
	sources := append([]int64{start, sum}, shadowed...)
	checkpoint := map[string]any{"id": s.name + "-m-c1", "role": "user",
		"source":  map[string]any{"kind": "plugin", "plugin": "compact", "compactionId": "cmp-1"},
		"content": []any{text("<checkpoint>"), text(summary), text("</checkpoint>")}}
	cp := s.add(p, dshq.TypeUserMessage, checkpoint, map[string]any{"op": "replace", "start": u, "end": res}, sources)
	p.phrase(cp, s.summaryPhrase())
	s.add(p, "compaction/end", map[string]any{"compactionId": "cmp-1", "turn": nil}, nil, nil)
	p.facts.Compaction = &simfacts.Compaction{StartSeq: start, SummarySeq: sum, CheckpointSeq: cp,
		ShadowedSeqs: shadowed, SourceEventSeqs: sources}
	s.add(p, "todo/write", map[string]any{"todos": []any{map[string]any{"content": "document the budget", "status": "pending"}}}, nil, nil)
	s.rootEvents = p.batches[0]
	return p
}

// fork is a fork of the root at the end of its first turn: the root's first
// turn inherited (isSeeded, inheritedEventCount), the end-seed marker, then
// a turn of its own.
func (s *sim) fork() *plan {
	p := s.newPlan(s.name+"-fork", simfacts.RoleFork)
	root := s.name + "-root"
	p.header.ParentSession = dshq.Str(root)
	p.header.IsSeeded = true
	p.facts.Parent = root
	p.inherited = int64(len(s.rootEvents))
	p.facts.InheritedEventCount = p.inherited
	p.batch()
	p.batches[0] = append(p.batches[0], s.rootEvents...)
	p.next = p.inherited
	// The inherited prefix holds the root's first-turn phrases.
	for ph, seqs := range s.facts.Sessions[0].Phrases {
		for _, seq := range seqs {
			if seq < p.inherited {
				p.phrase(seq, ph)
			}
		}
	}
	p.facts.Title = s.facts.Sessions[0].Title
	s.add(p, "session/end-seed", map[string]any{"inherited": true}, nil, nil)
	p.batch()
	s.add(p, "turn/start", map[string]any{"turn": 2}, nil, nil)
	u := s.userMessage(p, s.name+"-m-fu1", s.forkPhrase()+"; "+s.forkZh()+"。")
	p.phrase(u, s.forkPhrase(), s.forkZh())
	s.add(p, "step/start", map[string]any{"turn": 2, "step": 1}, nil, nil)
	s.assistant(p, 2, 1, s.name+"-m-fa1", text("Forked and continuing."))
	s.add(p, "step/end", map[string]any{"turn": 2, "step": 1}, nil, nil)
	s.add(p, "turn/end", map[string]any{"turn": 2, "reason": map[string]any{"kind": "completed"}}, nil, nil)
	return p
}

// subagent is a subagent spawned by the root: origin subagent, depth 1.
func (s *sim) subagent() *plan {
	p := s.newPlan(s.name+"-sub", simfacts.RoleSubagent)
	root := s.name + "-root"
	p.header.ParentSession = dshq.Str(root)
	p.header.Origin = dshq.OriginSubagent
	depth := int64(1)
	p.header.DelegationDepth = &depth
	p.header.AgentPreset = dshq.Str("explorer")
	p.facts.Parent = root
	p.batch()
	s.add(p, "turn/start", map[string]any{"turn": 1}, nil, nil)
	s.add(p, "subagent/descriptor", map[string]any{"parentSession": root, "task": "survey"}, nil, nil)
	u := s.userMessage(p, s.name+"-m-su1", "Task: "+s.subPhrase()+".")
	p.phrase(u, s.subPhrase())
	s.add(p, "step/start", map[string]any{"turn": 1, "step": 1}, nil, nil)
	a := s.assistant(p, 1, 1, s.name+"-m-sa1", text("完成："+s.subZh()+"。"))
	p.phrase(a, s.subZh())
	s.add(p, "step/end", map[string]any{"turn": 1, "step": 1}, nil, nil)
	s.add(p, "turn/end", map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}}, nil, nil)
	return p
}

// bulkSession is a root session of several turns, one Append per turn.
func (s *sim) bulkSession(k, turns int) *plan {
	p := s.newPlan(fmt.Sprintf("%s-bulk-%d", s.name, k), simfacts.RoleBulk)
	marker := fmt.Sprintf("%s bulk %d marker", s.name, k)
	for t := 1; t <= turns; t++ {
		p.batch()
		s.add(p, "turn/start", map[string]any{"turn": t}, nil, nil)
		u := s.userMessage(p, fmt.Sprintf("%s-b%d-u%d", s.name, k, t),
			fmt.Sprintf("Turn %d: %s. Review the migration plan for the billing tables.", t, marker), "请检查数据库迁移计划。")
		p.phrase(u, marker)
		s.add(p, "step/start", map[string]any{"turn": t, "step": 1}, nil, nil)
		s.assistant(p, t, 1, fmt.Sprintf("%s-b%d-a%d", s.name, k, t),
			text("The migration plan adds an index on invoices and backfills the totals. 迁移计划已审核。"))
		s.add(p, "step/end", map[string]any{"turn": t, "step": 1}, nil, nil)
		s.add(p, "turn/end", map[string]any{"turn": t, "reason": map[string]any{"kind": "completed"}}, nil, nil)
	}
	return p
}

// openTurn is a session whose turn is left open on a tool call that never
// got its result: the log a harness leaves when it crashes mid-turn.
func (s *sim) openTurn() *plan {
	p := s.newPlan(s.name+"-crash", simfacts.RoleCrash)
	p.batch()
	s.add(p, "turn/start", map[string]any{"turn": 1}, nil, nil)
	s.userMessage(p, s.name+"-m-cu1", "Run the slow migration.")
	s.add(p, "step/start", map[string]any{"turn": 1, "step": 1}, nil, nil)
	args := `{"command":"make migrate"}`
	a := s.assistant(p, 1, 1, s.name+"-m-ca1", map[string]any{"type": "tool-call", "id": "call_9", "name": "bash", "arguments": args})
	call := s.add(p, "tool/call", map[string]any{"turn": 1, "step": 1, "callId": "call_9", "name": "bash", "arguments": args}, nil, nil)
	p.facts.ToolCall = &simfacts.ToolCall{AssistantSeq: a, CallSeq: call, ResultSeq: -1}
	return p
}
