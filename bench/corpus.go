package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// CorpusConfig sizes a generated corpus.
type CorpusConfig struct {
	// Sessions is the number of sessions (forks and subagents included).
	Sessions int
	// Turns is the number of turns each session writes itself.
	Turns int
	// Seed makes the corpus reproducible.
	Seed uint64
}

// Default corpus size: about 50 000 events (about 70 000 stream records
// with the bench's own probes), two to four minutes through the whole bench
// on two shared cores.
const (
	DefaultSessions = 800
	DefaultTurns    = 5
)

// Session is one generated session: its header, the inherited-prefix length
// and its events grouped as a harness appends them (one batch per turn or
// compaction).
type Session struct {
	Header    dshq.Header
	Inherited int64
	Batches   [][]dshq.Event
}

// Events returns the number of events of the session.
func (s Session) Events() int {
	n := 0
	for _, b := range s.Batches {
		n += len(b)
	}
	return n
}

// Corpus is a generated corpus and the search phrases that match it.
type Corpus struct {
	Sessions []Session
	// Rare holds one phrase per session that only that session contains.
	Rare []string
	// Common holds phrases that occur in many sessions (English and Chinese).
	Common []string
}

// Events returns the number of events in the corpus.
func (c *Corpus) Events() int {
	n := 0
	for _, s := range c.Sessions {
		n += s.Events()
	}
	return n
}

// Records returns the number of stream records (headers and events).
func (c *Corpus) Records() int { return c.Events() + len(c.Sessions) }

var englishWords = strings.Fields(`the retry budget config parser index cursor lineage surface
compaction summary tool result grep search session projector stream generation snapshot
window trace filter replacement provenance header workspace lease deploy build test module
function handler request response timeout error latency cache memory disk network server
client schema migration database query table column row commit branch merge review patch
release version upgrade dependency vendor lint format vet race goroutine channel mutex
context deadline signal shutdown restart health metric histogram counter gauge log level`)

var chineseWords = strings.Fields(`配置 重试 预算 索引 会话 搜索 压缩 摘要 工具 结果 错误 超时 数据库
迁移 版本 发布 测试 构建 部署 缓存 内存 网络 服务器 客户端 日志 指标 分支 合并 审查 补丁`)

// commonPhrases occur in many sessions; each is found by both Bleve and the
// FTS5 baseline (the Chinese one is a space-delimited run for unicode61).
var commonPhrases = []string{"retry budget", "config parser", "重试 预算", "timeout"}

type gen struct {
	r    *rand.Rand
	time int64
}

func (g *gen) words(n int, zh bool) string {
	w := make([]string, n)
	for i := range w {
		if zh {
			w[i] = chineseWords[g.r.IntN(len(chineseWords))]
		} else {
			w[i] = englishWords[g.r.IntN(len(englishWords))]
		}
	}
	return strings.Join(w, " ")
}

func (g *gen) sentence(zh bool) string {
	s := g.words(6+g.r.IntN(20), zh)
	if g.r.IntN(3) == 0 {
		s += " " + commonPhrases[g.r.IntN(len(commonPhrases))]
	}
	return s
}

// GenerateCorpus builds a deterministic corpus: sessions of turns with tool
// calls and results, titles, periodic compactions that replace the whole
// surface, English and Chinese text, forks (seeded with a copy of their
// parent's first turn) and subagents.
func GenerateCorpus(cfg CorpusConfig) (*Corpus, error) {
	if cfg.Sessions < 1 || cfg.Turns < 1 {
		return nil, fmt.Errorf("generate corpus: sessions and turns must be positive, got %d and %d", cfg.Sessions, cfg.Turns)
	}
	g := &gen{r: rand.New(rand.NewPCG(cfg.Seed, 0x64736871)), time: 1_790_000_000_000}
	c := &Corpus{Common: commonPhrases}
	for i := range cfg.Sessions {
		s, err := g.session(c, i, cfg.Turns)
		if err != nil {
			return nil, err
		}
		c.Sessions = append(c.Sessions, s)
		c.Rare = append(c.Rare, rarePhrase(i))
	}
	return c, nil
}

// SessionID is the id of the i-th generated session.
func SessionID(i int) string { return fmt.Sprintf("bench-%05d", i) }

func rarePhrase(i int) string { return fmt.Sprintf("incident zeta%05d", i) }

// sessionWriter accumulates one session's events with contiguous seqs.
type sessionWriter struct {
	g       *gen
	seq     int64
	batch   []dshq.Event
	out     [][]dshq.Event
	surface []int64 // surface node seqs, in surface order (= seq order here)
	err     error
	zh      bool
	turn    int
}

func (w *sessionWriter) add(typ string, data any, extra string) int64 {
	d, err := json.Marshal(data)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.g.time += 1 + int64(w.g.r.IntN(2000))
	seq := w.seq
	raw := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s%s}`, typ, seq, w.g.time, d, extra)
	e, err := record.ParseEvent([]byte(raw))
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("generated event %s: %w", raw, err)
	}
	w.batch = append(w.batch, e)
	w.seq++
	return seq
}

func (w *sessionWriter) flush() {
	if len(w.batch) > 0 {
		w.out = append(w.out, w.batch)
		w.batch = nil
	}
}

func text(s string) []map[string]any { return []map[string]any{{"type": "text", "text": s}} }

func (w *sessionWriter) userMessage(s string) {
	seq := w.add(dshq.TypeUserMessage, map[string]any{"id": fmt.Sprintf("m-u%d", w.seq), "role": "user",
		"source": map[string]any{"kind": "user"}, "content": text(s)}, `,"surfaceOp":"append"`)
	w.surface = append(w.surface, seq)
}

func (w *sessionWriter) assistant(content []map[string]any, step int) {
	seq := w.add(dshq.TypeAssistantMessage, map[string]any{"turn": w.turn, "step": step, "message": map[string]any{
		"id": fmt.Sprintf("m-a%d", w.seq), "role": "assistant",
		"source":  map[string]any{"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"},
		"content": content},
		// What the model call used, as deepseek-harness records it (the
		// usage report sums it).
		"usage": map[string]any{"inputTokens": 800 + 40*w.seq, "outputTokens": 20 + w.seq%50, "cacheReadTokens": 4000 + 10*w.seq}}, `,"surfaceOp":"append"`)
	w.surface = append(w.surface, seq)
}

// writeTurn appends one turn: a user message, a tool step and an answer.
func (w *sessionWriter) writeTurn(first string) {
	w.turn++
	w.add("turn/start", map[string]any{"turn": w.turn}, "")
	user := w.g.sentence(w.zh)
	if first != "" {
		user = first + " " + user
	}
	w.userMessage(user)
	if w.turn == 1 {
		w.add("session/title", map[string]any{"title": w.g.words(4, w.zh), "messageSeqs": []int64{w.seq - 1},
			"source": map[string]any{"kind": "fallback"}}, "")
	}
	w.add("step/start", map[string]any{"turn": w.turn, "step": 1}, "")
	call := fmt.Sprintf("call_%d", w.seq)
	args := fmt.Sprintf(`{"pattern":%q}`, w.g.words(2, false))
	w.assistant([]map[string]any{{"type": "reasoning", "text": w.g.sentence(w.zh)},
		{"type": "tool-call", "id": call, "name": "grep", "arguments": args}}, 1)
	callSeq := w.add("tool/call", map[string]any{"turn": w.turn, "step": 1, "callId": call, "name": "grep", "arguments": args}, "")
	res := w.add(dshq.TypeToolResult, map[string]any{"turn": w.turn, "step": 1, "message": map[string]any{
		"id": fmt.Sprintf("m-t%d", w.seq), "role": "user", "source": map[string]any{"kind": "tool", "callId": call},
		"content": []map[string]any{{"type": "tool-result", "toolCallId": call, "isError": false,
			"content": text("src/" + w.g.words(1, false) + ".go: " + w.g.sentence(false))}}}},
		fmt.Sprintf(`,"surfaceOp":"append","sourceEventSeqs":[%d]`, callSeq))
	w.surface = append(w.surface, res)
	w.add("step/end", map[string]any{"turn": w.turn, "step": 1}, "")
	w.add("step/start", map[string]any{"turn": w.turn, "step": 2}, "")
	w.assistant(text(w.g.sentence(w.zh)), 2)
	w.add("step/end", map[string]any{"turn": w.turn, "step": 2}, "")
	w.add("turn/end", map[string]any{"turn": w.turn, "reason": map[string]any{"kind": "completed"}}, "")
	w.flush()
}

// compact replaces the whole surface with one checkpoint message, as a
// summarising compaction between turns does.
func (w *sessionWriter) compact() {
	shadowed := append([]int64(nil), w.surface...)
	id := fmt.Sprintf("cmp-%d", w.seq)
	start := w.add("compaction/start", map[string]any{"compactionId": id, "turn": nil}, "")
	summary := w.g.sentence(w.zh)
	sum := w.add("compaction/summary", map[string]any{"compactionId": id, "summary": text(summary),
		"shadowedRange": map[string]any{"start": shadowed[0], "end": shadowed[len(shadowed)-1]},
		"shadowedSeqs":  shadowed, "shadowedTokenCount": 100 * len(shadowed)}, "")
	sources, _ := json.Marshal(append([]int64{start, sum}, shadowed...))
	seq := w.add(dshq.TypeUserMessage, map[string]any{"id": fmt.Sprintf("m-c%d", w.seq), "role": "user",
		"source":  map[string]any{"kind": "plugin", "plugin": "compact", "compactionId": id},
		"content": text("<summary> " + summary + " </summary>")},
		fmt.Sprintf(`,"surfaceOp":{"op":"replace","start":%d,"end":%d},"sourceEventSeqs":%s`, shadowed[0], shadowed[len(shadowed)-1], sources))
	w.add("compaction/end", map[string]any{"compactionId": id, "turn": nil}, "")
	w.surface = []int64{seq}
	w.flush()
}

// session generates session i. Every 7th session is a fork of the session
// before it (inheriting that session's first turn); every 11th is a
// subagent of the session before it; a third of the sessions write Chinese.
func (g *gen) session(c *Corpus, i, turns int) (Session, error) {
	h := dshq.Header{Version: dshq.FormatVersion2, ID: SessionID(i), CreatedAt: g.time,
		Cwd: dshq.Str(fmt.Sprintf("/home/dev/proj%d", i%8))}
	w := &sessionWriter{g: g, zh: i%3 == 2}
	var s Session
	switch {
	case i > 0 && i%7 == 0:
		parent := c.Sessions[i-1]
		h.ParentSession, h.IsSeeded, h.Cwd = dshq.Str(parent.Header.ID), true, parent.Header.Cwd
		prefix := parent.Batches[0]
		w.batch = append(w.batch, prefix...)
		w.seq, w.turn = int64(len(prefix)), 1
		for _, e := range prefix {
			if dshq.IsSurfaceType(e.Type) {
				w.surface = append(w.surface, e.Seq)
			}
		}
		s.Inherited = int64(len(prefix))
	case i > 0 && i%11 == 0:
		depth := int64(1)
		h.ParentSession, h.Origin, h.DelegationDepth, h.Cwd = dshq.Str(c.Sessions[i-1].Header.ID), dshq.OriginSubagent, &depth, c.Sessions[i-1].Header.Cwd
	}
	for t := range turns {
		first := ""
		if t == 0 {
			first = rarePhrase(i)
		}
		w.writeTurn(first)
		if t%3 == 2 {
			w.compact()
		}
	}
	s.Header, s.Batches = h, w.out
	return s, w.err
}
