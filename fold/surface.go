package fold

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/dshq/dshq"
)

// digestSize is the size of a tool/result node's canonical digest.
const digestSize = 16

// surfaceOp is a decoded surfaceOp: append, or replace start..end.
type surfaceOp struct {
	replace    bool
	start, end int64
}

// planSurface applies foldSurface's eligibility, provenance and replace
// rules (UPSTREAM §3.1 steps 2–5) and fills the plan's surface part.
func (s *State) planSurface(p *plan, data any) *ValidationError {
	e := p.e
	t := surfaceNodeType(e.Type)
	if t == 0 {
		if e.SurfaceOp != nil {
			return invalid(e.Seq, RuleSurfaceOp, "session event %d: surfaceOp is only allowed on surface events, not %s", e.Seq, e.Type)
		}
		if e.SourceEventSeqs != nil {
			return invalid(e.Seq, RuleSources, "session event %d: sourceEventSeqs is only allowed on surface events, not %s", e.Seq, e.Type)
		}
		return nil
	}
	op, err := s.parseSurfaceOp(e)
	if err != nil {
		return err
	}
	sources, err := s.parseSources(e)
	if err != nil {
		return err
	}
	d := obj(data)
	p.surface, p.replace, p.sources = true, op.replace, sources
	p.node = node{seq: e.Seq, typ: t, yields: yieldsMessage(t, d)}
	if t == nodeToolResult {
		p.node.digest = toolResultDigest(data)
	}
	if !op.replace {
		return nil
	}
	return s.planReplace(p, op)
}

// planReplace finds the replaced range, checks that the sources cite every
// node it shadows and, for a tool/result, the rewrite rule.
func (s *State) planReplace(p *plan, op surfaceOp) *ValidationError {
	seq := p.e.Seq
	startIdx, endIdx := -1, -1
	for i, n := range s.nodes {
		if n.seq == op.start {
			startIdx = i
		}
		if n.seq == op.end {
			endIdx = i
		}
	}
	switch {
	case startIdx < 0:
		return invalid(seq, RuleReplaceRange, "surface replace: start seq %d not found in surface", op.start)
	case endIdx < 0:
		return invalid(seq, RuleReplaceRange, "surface replace: end seq %d not found in surface", op.end)
	case startIdx > endIdx:
		return invalid(seq, RuleReplaceRange, "surface replace: start seq %d comes after end seq %d in surface", op.start, op.end)
	}
	cited := make(map[int64]bool, len(p.sources))
	for _, src := range p.sources {
		cited[src] = true
	}
	var missing []string
	for _, n := range s.nodes[startIdx : endIdx+1] {
		if !cited[n.seq] {
			missing = append(missing, strconv.FormatInt(n.seq, 10))
		}
	}
	if len(missing) > 0 {
		return invalid(seq, RuleReplaceSource, "surface replace: sourceEventSeqs must include every shadowed surface node; missing %s", strings.Join(missing, ", "))
	}
	if p.node.typ == nodeToolResult {
		target := s.nodes[startIdx]
		switch {
		case startIdx != endIdx:
			return invalid(seq, RuleToolRewrite, "surface replace: a tool/result replacement must replace exactly one surface node, not %d", endIdx-startIdx+1)
		case target.typ != nodeToolResult:
			return invalid(seq, RuleToolRewrite, "surface replace: a tool/result replacement must replace a tool/result, not %s %d", target.typ, target.seq)
		case target.digest != p.node.digest:
			return invalid(seq, RuleToolRewrite, "surface replace: tool/result %d may only change the inner content of tool/result %d", seq, target.seq)
		}
	}
	p.startIdx, p.endIdx = startIdx, endIdx
	return nil
}

// parseSurfaceOp decodes a surface event's required surfaceOp: "append" or
// exactly {op:"replace", start, end} with non-negative safe integer bounds
// (G2 also refuses -0).
func (s *State) parseSurfaceOp(e dshq.Event) (surfaceOp, *ValidationError) {
	bad := func(detail string) (surfaceOp, *ValidationError) {
		return surfaceOp{}, invalid(e.Seq, RuleSurfaceOp, "session event %d (%s): %s", e.Seq, e.Type, detail)
	}
	if e.SurfaceOp == nil {
		return bad("surface events require surfaceOp")
	}
	const shape = `surfaceOp must be "append" or {"op":"replace","start":…,"end":…}`
	switch jsonKind(e.SurfaceOp) {
	case '"':
		var v string
		if json.Unmarshal(e.SurfaceOp, &v) != nil || v != "append" {
			return bad(shape)
		}
		return surfaceOp{}, nil
	case '{':
	default:
		return bad(shape)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(e.SurfaceOp, &m) != nil || len(m) != 3 || m["op"] == nil || m["start"] == nil || m["end"] == nil {
		return bad(shape)
	}
	var op string
	if json.Unmarshal(m["op"], &op) != nil || op != "replace" {
		return bad(shape)
	}
	start, ok := s.bound(m["start"])
	if !ok {
		return bad("surface replace start must be a non-negative safe integer")
	}
	end, ok := s.bound(m["end"])
	if !ok {
		return bad("surface replace end must be a non-negative safe integer")
	}
	return surfaceOp{replace: true, start: start, end: end}, nil
}

// bound parses a replace bound: a non-negative safe integer; -0 only in G0.
func (s *State) bound(raw json.RawMessage) (int64, bool) {
	v, negZero, ok := safeIntLiteral(raw)
	if !ok || v < 0 || (negZero && !s.g0()) {
		return 0, false
	}
	return v, true
}

// parseSources decodes envelope sourceEventSeqs (§3.1 step 3): absent, or a
// non-empty array (G0 allows an empty one on assistant/message; G2 forbids
// the key there altogether) of distinct non-negative safe integers each
// below the event's own seq. The result keeps the recorded order.
func (s *State) parseSources(e dshq.Event) ([]int64, *ValidationError) {
	if e.SourceEventSeqs == nil {
		return nil, nil
	}
	bad := func(format string, args ...any) ([]int64, *ValidationError) {
		return nil, invalid(e.Seq, RuleSources, "session event %d (%s): "+format, append([]any{e.Seq, e.Type}, args...)...)
	}
	assistant := e.Type == dshq.TypeAssistantMessage
	if assistant && !s.g0() {
		return bad("assistant/message must not carry sourceEventSeqs")
	}
	var elems []json.RawMessage
	if jsonKind(e.SourceEventSeqs) != '[' || json.Unmarshal(e.SourceEventSeqs, &elems) != nil {
		return bad("sourceEventSeqs must be an array")
	}
	if len(elems) == 0 {
		if assistant && s.g0() {
			return []int64{}, nil
		}
		return bad("sourceEventSeqs must not be empty")
	}
	out := make([]int64, 0, len(elems))
	seen := make(map[int64]bool, len(elems))
	for i, raw := range elems {
		v, _, ok := safeIntLiteral(raw)
		switch {
		case !ok || v < 0:
			return bad("sourceEventSeqs[%d] must be a non-negative safe integer", i)
		case seen[v]:
			return bad("sourceEventSeqs contains seq %d twice", v)
		case v >= e.Seq:
			return bad("sourceEventSeqs[%d] = %d must cite an earlier event", i, v)
		}
		seen[v] = true
		out = append(out, v)
	}
	return out, nil
}

// yieldsMessage reports whether a surface node yields a model-history
// message (§3.4): an assistant/message with empty content does not.
func yieldsMessage(t nodeType, d map[string]any) bool {
	if t != nodeAssistant {
		return true
	}
	switch c := messageContent(d).(type) {
	case []any:
		return len(c) > 0
	case string:
		return c != ""
	case nil:
		return false
	}
	return true
}

// toolResultDigest is the canonical digest the tool-result rewrite rule
// compares: the data with the inner content of the first tool-result block
// of message.content set to null (in the older shape without data.message,
// data.content itself is the result content and is nulled), encoded with
// sorted keys and JavaScript number semantics, so two datas are
// deep-JSON-equal after nulling exactly when their digests match.
func toolResultDigest(data any) [digestSize]byte {
	nulled := data
	if d := obj(data); d != nil {
		nulled = nullResultContent(d)
	}
	b, err := json.Marshal(nulled)
	if err != nil {
		// decodeAny produced data, so it always re-encodes; keep a stable
		// value anyway rather than fail.
		b = nil
	}
	sum := sha256.Sum256(b)
	var out [digestSize]byte
	copy(out[:], sum[:])
	return out
}

// nullResultContent returns a copy of d (sharing untouched parts) with the
// result content nulled.
func nullResultContent(d map[string]any) map[string]any {
	out := cloneMap(d)
	msg := obj(d["message"])
	if msg == nil {
		out["content"] = nil
		return out
	}
	content, ok := arr(msg["content"])
	if !ok {
		return out
	}
	for i, b := range content {
		block := obj(b)
		if block["type"] != "tool-result" {
			continue
		}
		nb := cloneMap(block)
		nb["content"] = nil
		nc := append([]any(nil), content...)
		nc[i] = nb
		nm := cloneMap(msg)
		nm["content"] = nc
		out["message"] = nm
		break
	}
	return out
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
