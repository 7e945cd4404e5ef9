package usage

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/dshq/dshq"
)

// State is what extraction keeps of one session between its events: a
// Codex rollout's latest model and cumulative totals, and a source line
// split over several events while its pieces arrive. The projection
// stores it with the session (JSON); the zero State is a new session's.
type State struct {
	// Model is a Codex rollout's latest turn_context model.
	Model string `json:"m,omitempty"`
	// Branch is a Codex rollout's session_meta git branch; Meta is set
	// once a session_meta was read (a child's second one is its parent's).
	Branch string `json:"b,omitempty"`
	Meta   bool   `json:"s,omitempty"`
	// Prev is the last cumulative total_token_usage of a Codex rollout.
	Prev *codexTotals `json:"p,omitempty"`
	// Pending is a line whose pieces are still arriving.
	Pending *pendingLine `json:"l,omitempty"`
}

// IsZero reports whether s holds nothing (a session that need not store it).
func (s *State) IsZero() bool {
	return s.Model == "" && s.Branch == "" && !s.Meta && s.Prev == nil && s.Pending == nil
}

type pendingLine struct {
	Parts    int    `json:"n"`
	Got      int    `json:"g"`
	Text     []byte `json:"t"`
	Base64   bool   `json:"b,omitempty"`
	RoutedTo string `json:"r,omitempty"`
	Time     int64  `json:"e"`
}

// captureMember is the part of a converted event's capture member that
// holds its source line (docs/harnesses.md#source-lines).
type captureMember struct {
	Line   int64   `json:"line"`
	Text   *string `json:"text"`
	Base64 *string `json:"base64"`
	Parts  int     `json:"parts"`
	Part   int     `json:"part"`
}

// Event reads one stored event of a session written by harness (a
// header's harness; "" for a session written through the SDK) and returns
// the usage it states. raw is the event record as stored, evTime its time.
// A record that does not parse states no usage: extraction never fails.
func (s *State) Event(harness string, raw []byte, evTime int64) []Entry {
	switch harness {
	case dshq.HarnessClaudeCode, dshq.HarnessCodex:
		line, routed, t, ok := s.line(raw, evTime)
		if !ok {
			return nil
		}
		if harness == dshq.HarnessCodex {
			e, ok := s.codexLine(line)
			if !ok {
				return nil
			}
			if e.Time == 0 {
				e.Time = t
			}
			return []Entry{e}
		}
		return claudeLine(line, routed, t)
	case "":
		return nativeEvent(raw)
	}
	return nil
}

// line returns the source line an event holds, assembling a line split
// over several events (the holder, then capture/line-part events).
func (s *State) line(raw []byte, evTime int64) (line []byte, routedTo string, t int64, ok bool) {
	isPart := s.Pending != nil && bytes.Contains(raw, []byte(`"capture/line-part"`))
	if !isPart && !mayHoldUsage(raw) {
		return nil, "", 0, false
	}
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Capture  *captureMember `json:"capture"`
			RoutedTo string         `json:"routedTo"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &ev) != nil || ev.Data.Capture == nil {
		return nil, "", 0, false
	}
	c := ev.Data.Capture
	var piece []byte
	isB64 := false
	switch {
	case c.Text != nil:
		piece = []byte(*c.Text)
	case c.Base64 != nil:
		piece, isB64 = []byte(*c.Base64), true
	default:
		return nil, "", 0, false // not the line's holder
	}
	if ev.Type == "capture/line-part" {
		p := s.Pending
		if p == nil || c.Part != p.Got+1 || isB64 != p.Base64 {
			s.Pending = nil // out of order: the line is lost to usage
			return nil, "", 0, false
		}
		p.Text = append(p.Text, piece...)
		p.Got++
		if p.Got < p.Parts {
			return nil, "", 0, false
		}
		s.Pending = nil
		return decodePiece(p.Text, p.Base64, p.RoutedTo, p.Time)
	}
	s.Pending = nil
	if c.Parts > 1 {
		s.Pending = &pendingLine{Parts: c.Parts, Got: 1, Text: append([]byte(nil), piece...), Base64: isB64, RoutedTo: ev.Data.RoutedTo, Time: evTime}
		return nil, "", 0, false
	}
	return decodePiece(piece, isB64, ev.Data.RoutedTo, evTime)
}

func decodePiece(b []byte, isB64 bool, routed string, t int64) ([]byte, string, int64, bool) {
	if !isB64 {
		return b, routed, t, true
	}
	out, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		return nil, "", 0, false
	}
	return out, routed, t, true
}

// mayHoldUsage is a cheap test that skips the events whose line cannot
// state usage (most of them) before any decoding.
func mayHoldUsage(raw []byte) bool {
	if bytes.Contains(raw, []byte(`"base64":`)) || bytes.Contains(raw, []byte(`"parts":`)) {
		return true
	}
	for _, w := range [][]byte{[]byte(`\"usage\"`), []byte(`token_count`), []byte(`turn_context`), []byte(`session_meta`)} {
		if bytes.Contains(raw, w) {
			return true
		}
	}
	return false
}

// ---- Claude Code ----

type claudeUsage struct {
	Input         int64 `json:"input_tokens"`
	Output        int64 `json:"output_tokens"`
	CacheCreation int64 `json:"cache_creation_input_tokens"`
	CacheRead     int64 `json:"cache_read_input_tokens"`
	Split         *struct {
		OneHour int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

type claudeRecord struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	RequestID string `json:"requestId"`
	GitBranch string `json:"gitBranch"`
	Message   *struct {
		ID    string       `json:"id"`
		Model string       `json:"model"`
		Usage *claudeUsage `json:"usage"`
	} `json:"message"`
}

// claudeLine reads a Claude Code line: an assistant record's
// message.usage, or the same of the subagent message an agent_progress
// record mirrors (data.message), as ccusage counts both.
func claudeLine(line []byte, routed string, evTime int64) []Entry {
	var r struct {
		claudeRecord
		Data *struct {
			Message *claudeRecord `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(line, &r) != nil {
		return nil
	}
	rec := &r.claudeRecord
	mirror := false
	switch {
	case r.Type == "assistant":
	case r.Type == "progress" && r.Data != nil && r.Data.Message != nil && r.Data.Message.Type == "assistant":
		inner := r.Data.Message
		if inner.GitBranch == "" {
			inner.GitBranch = r.GitBranch
		}
		rec, mirror = inner, true
	default:
		return nil
	}
	if rec.Message == nil || rec.Message.Usage == nil || rec.Message.Model == "<synthetic>" {
		return nil
	}
	u := rec.Message.Usage
	e := Entry{Time: parseTime(rec.Timestamp, evTime), Model: modelOr(rec.Message.Model), Branch: rec.GitBranch,
		Session: routed, Replace: true, Mirror: mirror,
		Tokens: Tokens{Input: u.Input, Output: u.Output, CacheCreation: u.CacheCreation, CacheRead: u.CacheRead, Calls: 1}}
	if u.Split != nil {
		e.CacheCreation1h = u.Split.OneHour
	}
	e.Tokens = nonNegative(e.Tokens)
	if rec.Message.ID != "" && rec.RequestID != "" {
		e.Key = "cc:" + rec.Message.ID + ":" + rec.RequestID
	}
	return []Entry{e}
}

// ---- Codex ----

type codexTotals struct {
	Input     int64 `json:"input_tokens"`
	Cached    int64 `json:"cached_input_tokens"`
	Output    int64 `json:"output_tokens"`
	Reasoning int64 `json:"reasoning_output_tokens"`
	Total     int64 `json:"total_tokens"`
}

func (a codexTotals) minus(b codexTotals) (codexTotals, bool) {
	d := codexTotals{a.Input - b.Input, a.Cached - b.Cached, a.Output - b.Output, a.Reasoning - b.Reasoning, a.Total - b.Total}
	return d, d.Input >= 0 && d.Cached >= 0 && d.Output >= 0 && d.Reasoning >= 0
}

// codexLine reads a Codex rollout line: session_meta (the branch),
// turn_context (the model) and token_count events. A token count is
// counted as the growth of its cumulative total_token_usage since the
// rollout's previous one (a repeated total counts nothing), or as its
// last_token_usage when it states no total or the total went down.
func (s *State) codexLine(line []byte) (Entry, bool) {
	var l struct {
		Timestamp string `json:"timestamp"`
		Type      string `json:"type"`
		Payload   struct {
			Type  string `json:"type"`
			Model string `json:"model"`
			Git   *struct {
				Branch string `json:"branch"`
			} `json:"git"`
			Info *struct {
				Total *codexTotals `json:"total_token_usage"`
				Last  *codexTotals `json:"last_token_usage"`
			} `json:"info"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &l) != nil {
		return Entry{}, false
	}
	p := l.Payload
	switch {
	case l.Type == "session_meta":
		if !s.Meta {
			s.Meta = true
			if p.Git != nil {
				s.Branch = p.Git.Branch
			}
		}
		return Entry{}, false
	case l.Type == "turn_context":
		if p.Model != "" {
			s.Model = p.Model
		}
		return Entry{}, false
	case l.Type != "event_msg" || p.Type != "token_count" || p.Info == nil:
		return Entry{}, false
	}
	var d codexTotals
	var key string
	switch total := p.Info.Total; {
	case total != nil:
		prev := codexTotals{}
		if s.Prev != nil {
			prev = *s.Prev
		}
		t := *total
		s.Prev = &t
		var ok bool
		if d, ok = t.minus(prev); !ok {
			if p.Info.Last == nil {
				return Entry{}, false
			}
			d = *p.Info.Last
		}
		key = fmt.Sprintf("cx:%s:%d:%d:%d:%d:%d", l.Timestamp, t.Input, t.Cached, t.Output, t.Reasoning, t.Total)
	case p.Info.Last != nil:
		d = *p.Info.Last
		key = fmt.Sprintf("cx:%s:last:%d:%d:%d:%d:%d", l.Timestamp, d.Input, d.Cached, d.Output, d.Reasoning, d.Total)
	default:
		return Entry{}, false
	}
	if d.Input == 0 && d.Cached == 0 && d.Output == 0 {
		return Entry{}, false
	}
	cached := min(d.Cached, d.Input)
	return Entry{Time: parseTime(l.Timestamp, 0), Model: modelOr(s.Model), Branch: s.Branch, Key: key,
		Tokens: nonNegative(Tokens{Input: d.Input - cached, CacheRead: cached, Output: d.Output, Calls: 1})}, true
}

// ---- deepseek-harness ----

// nativeEvent reads an event of the original vocabulary: the usage an
// assistant/message or a compaction/summary states in data.usage
// ({inputTokens, outputTokens, cacheReadTokens?, cacheWriteTokens?,
// reasoningTokens?}: inputTokens excludes the cache reads, outputTokens
// includes the reasoning), with the model of data.message.source.model
// (assistant/message) or data.model (compaction/summary).
func nativeEvent(raw []byte) []Entry {
	if !bytes.Contains(raw, []byte(`"usage":`)) {
		return nil
	}
	var ev struct {
		Type string `json:"type"`
		Time int64  `json:"time"`
		Data struct {
			Model   string `json:"model"`
			Message *struct {
				Source struct {
					Model string `json:"model"`
				} `json:"source"`
			} `json:"message"`
			Usage *struct {
				Input      int64 `json:"inputTokens"`
				Output     int64 `json:"outputTokens"`
				CacheRead  int64 `json:"cacheReadTokens"`
				CacheWrite int64 `json:"cacheWriteTokens"`
			} `json:"usage"`
		} `json:"data"`
	}
	if json.Unmarshal(raw, &ev) != nil || ev.Data.Usage == nil {
		return nil
	}
	model := ev.Data.Model
	switch ev.Type {
	case "assistant/message":
		if ev.Data.Message != nil {
			model = ev.Data.Message.Source.Model
		}
	case "compaction/summary":
	default:
		return nil
	}
	u := ev.Data.Usage
	return []Entry{{Time: ev.Time, Model: modelOr(model),
		Tokens: nonNegative(Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheCreation: u.CacheWrite, Calls: 1})}}
}

// nonNegative clamps counts a bad record states below zero: a call never
// takes tokens back.
func nonNegative(t Tokens) Tokens {
	for _, p := range []*int64{&t.Input, &t.Output, &t.CacheCreation, &t.CacheRead, &t.CacheCreation1h} {
		*p = max(*p, 0)
	}
	t.CacheCreation1h = min(t.CacheCreation1h, t.CacheCreation)
	return t
}

func modelOr(m string) string {
	if m == "" {
		return UnknownModel
	}
	return m
}

// parseTime reads an ISO-8601 timestamp as Unix ms, else def.
func parseTime(s string, def int64) int64 {
	if s == "" {
		return def
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			return ms
		}
		return def
	}
	return t.UnixMilli()
}

// MayStateUsage is a cheap test of an event record: false only when it
// cannot state usage (a live view skips it without decoding).
func MayStateUsage(raw []byte) bool {
	return mayHoldUsage(raw) || bytes.Contains(raw, []byte(`"usage":`))
}
