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

// planSurface applies foldSurface's eligibility, provenance and replace rules
// (docs/events-and-surfaces.md#the-fold) in upstream's order — surfaceOp, then
// for an append the sources, for a replace the range, the sources, the cited
// shadowed nodes and the tool-result rewrite rule — with upstream's messages,
// and fills the plan's surface part.
func (s *State) planSurface(p *plan, data any) *ValidationError {
	e := p.e
	t := surfaceNodeType(e.Type)
	if t == 0 {
		if e.SurfaceOp != nil {
			return invalid(e.Seq, RuleSurfaceOp, "session event %q is not surface-eligible and cannot carry surfaceOp", e.Type)
		}
		if e.SourceEventSeqs != nil {
			return invalid(e.Seq, RuleSources, "session event %q is not surface-eligible and cannot carry sourceEventSeqs", e.Type)
		}
		return nil
	}
	op, err := s.parseSurfaceOp(e)
	if err != nil {
		return err
	}
	p.surface, p.replace = true, op.replace
	p.node = node{seq: e.Seq, typ: t, yields: yieldsMessage(t, obj(data))}
	if t == nodeToolResult {
		p.node.digest = toolResultDigest(data)
	}
	if !op.replace {
		p.sources, err = s.parseSources(e)
		return err
	}
	return s.planReplace(p, op)
}

// planReplace finds the replaced range, checks the sources, that they cite
// every node the range shadows and, for a tool/result, the rewrite rule.
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
		return invalid(seq, RuleReplaceRange, "surface replace: start seq %d (index %d) is after end seq %d (index %d)", op.start, startIdx, op.end, endIdx)
	}
	sources, err := s.parseSources(p.e)
	if err != nil {
		return err
	}
	cited := make(map[int64]bool, len(sources))
	for _, src := range sources {
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
			return invalid(seq, RuleToolRewrite, "tool/result surface replacement must rewrite exactly one current node")
		case target.typ != nodeToolResult:
			return invalid(seq, RuleToolRewrite, "tool/result surface replacement must target a current tool/result")
		case target.digest != p.node.digest:
			return invalid(seq, RuleToolRewrite, "tool/result surface replacement may change only content")
		}
	}
	p.sources, p.startIdx, p.endIdx = sources, startIdx, endIdx
	return nil
}

// parseSurfaceOp decodes a surface event's required surfaceOp: "append" or
// exactly {op:"replace", start, end} with non-negative safe integer bounds
// (G2 also refuses -0).
func (s *State) parseSurfaceOp(e dshq.Event) (surfaceOp, *ValidationError) {
	bad := func(format string) (surfaceOp, *ValidationError) {
		return surfaceOp{}, invalid(e.Seq, RuleSurfaceOp, format, e.Type)
	}
	if e.SurfaceOp == nil {
		return bad("session event %q is surface-eligible and requires a surfaceOp marker")
	}
	switch jsonKind(e.SurfaceOp) {
	case '"':
		var v string
		if json.Unmarshal(e.SurfaceOp, &v) == nil && v == "append" {
			return surfaceOp{}, nil
		}
		return bad("session event %q carries an invalid surfaceOp")
	case '{':
	default:
		return bad("session event %q carries an invalid surfaceOp")
	}
	const badReplace = "session event %q carries an invalid replace surfaceOp"
	var m map[string]json.RawMessage
	if json.Unmarshal(e.SurfaceOp, &m) != nil || len(m) != 3 || m["op"] == nil || m["start"] == nil || m["end"] == nil {
		return bad(badReplace)
	}
	var op string
	if json.Unmarshal(m["op"], &op) != nil || op != "replace" {
		return bad(badReplace)
	}
	start, okStart := s.bound(m["start"])
	end, okEnd := s.bound(m["end"])
	if !okStart || !okEnd {
		return bad(badReplace)
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

// parseSources decodes envelope sourceEventSeqs
// (docs/events-and-surfaces.md#provenance): absent, or a non-empty array (G0
// allows an empty one on assistant/message; G2 forbids the key there
// altogether) of non-negative safe integers, then no duplicates, then each
// below the event's own seq — upstream's order of checks. The result keeps the
// recorded order.
func (s *State) parseSources(e dshq.Event) ([]int64, *ValidationError) {
	if e.SourceEventSeqs == nil {
		return nil, nil
	}
	bad := func(format string, args ...any) ([]int64, *ValidationError) {
		return nil, invalid(e.Seq, RuleSources, format, args...)
	}
	assistant := e.Type == dshq.TypeAssistantMessage
	if assistant && !s.g0() {
		return bad("assistant/message embeds its source stream and cannot carry sourceEventSeqs")
	}
	var elems []json.RawMessage
	if jsonKind(e.SourceEventSeqs) != '[' || json.Unmarshal(e.SourceEventSeqs, &elems) != nil {
		return bad("sourceEventSeqs on event at seq %d must be an array when present", e.Seq)
	}
	if len(elems) == 0 {
		if assistant {
			return []int64{}, nil
		}
		return bad("sourceEventSeqs must not be empty except on assistant/message")
	}
	out := make([]int64, 0, len(elems))
	for _, raw := range elems {
		v, _, ok := safeIntLiteral(raw)
		if !ok || v < 0 {
			return bad("session event %q sourceEventSeqs must densely contain non-negative safe integers", e.Type)
		}
		out = append(out, v)
	}
	seen := make(map[int64]bool, len(out))
	for _, v := range out {
		if seen[v] {
			return bad("sourceEventSeqs must not contain duplicates")
		}
		seen[v] = true
	}
	for _, v := range out {
		if v >= e.Seq {
			return bad("sourceEventSeqs must reference earlier events: %d >= current seq %d", v, e.Seq)
		}
	}
	return out, nil
}

// yieldsMessage reports whether a surface node yields a model-history
// message (docs/events-and-surfaces.md#model-history): an assistant/message
// with empty content does not.
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
// compares. As upstream's assertToolResultRewrite, message.content is
// replaced by a one-element list holding its first block with content set
// to null (so blocks after the first are not compared); in the older shape
// without data.message, data.content is the result content itself and is
// nulled. The value is encoded with sorted keys and JavaScript number
// semantics, so two datas are deep-JSON-equal under that rule exactly when
// their digests match.
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
	var first map[string]any
	if content, _ := arr(msg["content"]); len(content) > 0 {
		first = obj(content[0])
	}
	nb := cloneMap(first)
	nb["content"] = nil
	nm := cloneMap(msg)
	nm["content"] = []any{nb}
	out["message"] = nm
	return out
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
