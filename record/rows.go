package record

import (
	"bytes"
	"strconv"

	"github.com/dshq/dshq"
)

// The packed chunk row tags (docs/file-format.md#packed-chunk-rows).
const (
	RowTextChunks      = "text-chunks"
	RowReasoningChunks = "reasoning-chunks"
	RowToolCallChunks  = "tool-call-chunks"
)

// MinRun is the fewest assistant/chunk deltas the writer packs into one row
// (the original's MIN_RUN, a format constant:
// docs/file-format.md#when-the-writer-packs).
const MinRun = 3

// deltaKind is the chunk type a row expands to.
func deltaKind(tag string) string {
	switch tag {
	case RowTextChunks:
		return "text-delta"
	case RowReasoningChunks:
		return "reasoning-delta"
	case RowToolCallChunks:
		return "tool-call-delta"
	}
	return ""
}

// rowTag is the row tag a chunk type packs into.
func rowTag(kind string) string {
	switch kind {
	case "text-delta":
		return RowTextChunks
	case "reasoning-delta":
		return RowReasoningChunks
	case "tool-call-delta":
		return RowToolCallChunks
	}
	return ""
}

// isRowType reports whether a raw type value is one of the row tags.
func isRowType(v []byte) (string, bool) {
	switch string(v) {
	case `"` + RowTextChunks + `"`:
		return RowTextChunks, true
	case `"` + RowReasoningChunks + `"`:
		return RowReasoningChunks, true
	case `"` + RowToolCallChunks + `"`:
		return RowToolCallChunks, true
	}
	return "", false
}

// delta is one assistant/chunk delta: the raw JSON tokens a row holds for it.
type delta struct {
	kind              string // text-delta, reasoning-delta, tool-call-delta
	seq, time         int64
	turn, step, index []byte
	id, name          []byte // tool calls; name nil when absent
	text              []byte // text, or argumentsDelta
}

// raw returns the delta's event record in the writer's key order.
func (d *delta) raw() []byte {
	var b bytes.Buffer
	b.Grow(96 + len(d.text))
	b.WriteString(`{"type":"assistant/chunk","seq":`)
	b.WriteString(strconv.FormatInt(d.seq, 10))
	b.WriteString(`,"time":`)
	b.WriteString(strconv.FormatInt(d.time, 10))
	b.WriteString(`,"data":{"turn":`)
	b.Write(d.turn)
	b.WriteString(`,"step":`)
	b.Write(d.step)
	b.WriteString(`,"chunk":{"type":"` + d.kind + `","index":`)
	b.Write(d.index)
	if d.kind == "tool-call-delta" {
		b.WriteString(`,"id":`)
		b.Write(d.id)
		if d.name != nil {
			b.WriteString(`,"name":`)
			b.Write(d.name)
		}
		b.WriteString(`,"argumentsDelta":`)
	} else {
		b.WriteString(`,"text":`)
	}
	b.Write(d.text)
	b.WriteString(`}}}`)
	return b.Bytes()
}

// event returns the delta as a decoded event. Its tokens were validated in
// the row, so the record is valid without parsing it again.
func (d *delta) event() (dshq.Event, error) {
	raw := d.raw()
	const dataKey = `,"data":`
	i := bytes.Index(raw, []byte(dataKey))
	return dshq.Event{Type: "assistant/chunk", Seq: d.seq, Time: d.time, Data: raw[i+len(dataKey) : len(raw)-1], Raw: raw}, nil
}

func rowErr(tag, format string, args ...any) *RecordError {
	return recErr(RuleMalformedRow, "malformed "+tag+" storage row: "+format, args...)
}

// expandRow validates a packed chunk row (docs/file-format.md#row-validation)
// given its compacted bytes and top-level members, and returns its deltas.
func expandRow(tag string, out []byte, top []member) ([]delta, error) {
	env := map[string][]byte{}
	for _, m := range top {
		env[m.key] = out[m.start:m.end]
	}
	if len(env) != 4 || env["seq0"] == nil || env["time0"] == nil || env["data"] == nil {
		return nil, rowErr(tag, "envelope keys must be exactly type, seq0, time0, data")
	}
	seq0, ok := exactInt(env["seq0"])
	if !ok || seq0 < 0 {
		return nil, rowErr(tag, "seq0 %s is not a non-negative safe integer", show(env["seq0"]))
	}
	time0, ok := exactInt(env["time0"])
	if !ok {
		return nil, rowErr(tag, "time0 %s is not a safe integer", show(env["time0"]))
	}
	dm, dout, ok := splitObject(env["data"])
	if !ok {
		return nil, rowErr(tag, "data is not an object")
	}
	data := map[string][]byte{}
	for _, m := range dm {
		data[m.key] = dout[m.start:m.end]
	}
	tmpl, items, err := rowData(tag, data)
	if err != nil {
		return nil, err
	}
	dts, ok := splitArray(data["dt"])
	if !ok || len(dts) != len(items)-1 {
		return nil, rowErr(tag, "dt must be an array of %d safe integers", len(items)-1)
	}
	if seq0 > MaxSafeInteger-int64(len(items)-1) {
		return nil, rowErr(tag, "seq0+%d is beyond 2^53-1", len(items)-1)
	}
	out2 := make([]delta, len(items))
	t := time0
	for k, item := range items {
		if k > 0 {
			dt, ok := exactInt(dts[k-1])
			if !ok {
				return nil, rowErr(tag, "dt[%d] %s is not a safe integer", k-1, abbreviate(dts[k-1]))
			}
			t += dt // |t|, |dt| ≤ 2^53-1: no int64 overflow
			if t > MaxSafeInteger || t < -MaxSafeInteger {
				return nil, rowErr(tag, "time of member %d is beyond ±(2^53-1)", k)
			}
		}
		d := tmpl
		d.seq, d.time, d.text = seq0+int64(k), t, item
		out2[k] = d
	}
	return out2, nil
}

// rowData checks a row's data keys and returns the delta template and the
// texts or args.
func rowData(tag string, data map[string][]byte) (delta, [][]byte, error) {
	d := delta{kind: deltaKind(tag), turn: data["turn"], step: data["step"], index: data["index"]}
	list, want := "texts", 5
	if tag == RowToolCallChunks {
		list, want = "args", 6
		if data["name"] != nil {
			want = 7
		}
		d.id, d.name = data["id"], data["name"]
		if !isString(d.id) || (d.name != nil && !isString(d.name)) {
			return delta{}, nil, rowErr(tag, "id and name must be strings")
		}
	}
	if len(data) != want || data["dt"] == nil || data[list] == nil {
		return delta{}, nil, rowErr(tag, "data keys are not exactly the %s set", tag)
	}
	for _, k := range []string{"turn", "step", "index"} {
		if !isNumber(data[k]) {
			return delta{}, nil, rowErr(tag, "%s is %s, not a number", k, show(data[k]))
		}
	}
	items, ok := splitArray(data[list])
	if !ok || len(items) == 0 {
		return delta{}, nil, rowErr(tag, "%s must be a non-empty array of strings", list)
	}
	for _, it := range items {
		if !isString(it) {
			return delta{}, nil, rowErr(tag, "%s must be a non-empty array of strings", list)
		}
	}
	return d, items, nil
}

func isString(v []byte) bool { return len(v) > 0 && v[0] == '"' }

func isNumber(v []byte) bool { return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9') }

// packable returns the delta an event is, when the event is exactly the
// expansion of one (the original's whitelist,
// docs/file-format.md#when-the-writer-packs, tightened to byte equality so that
// packing never changes a record). It reads Raw positionally in the expansion's
// layout; the final comparison with the delta's own expansion is what decides.
func packable(ev dshq.Event) (delta, bool) {
	if ev.Type != "assistant/chunk" || ev.Seq < 0 {
		return delta{}, false
	}
	p := cursor{b: ev.Raw}
	d := delta{seq: ev.Seq, time: ev.Time}
	ok := p.lit(`{"type":"assistant/chunk","seq":`) && p.num() != nil && p.lit(`,"time":`) && p.num() != nil &&
		p.lit(`,"data":{"turn":`)
	if !ok {
		return delta{}, false
	}
	if d.turn = p.num(); d.turn == nil || !p.lit(`,"step":`) {
		return delta{}, false
	}
	if d.step = p.num(); d.step == nil || !p.lit(`,"chunk":{"type":"`) {
		return delta{}, false
	}
	switch {
	case p.lit(`text-delta"`):
		d.kind = "text-delta"
	case p.lit(`reasoning-delta"`):
		d.kind = "reasoning-delta"
	case p.lit(`tool-call-delta"`):
		d.kind = "tool-call-delta"
	default:
		return delta{}, false
	}
	if !p.lit(`,"index":`) {
		return delta{}, false
	}
	if d.index = p.num(); d.index == nil {
		return delta{}, false
	}
	if d.kind == "tool-call-delta" {
		if !p.lit(`,"id":`) {
			return delta{}, false
		}
		if d.id = p.str(); d.id == nil {
			return delta{}, false
		}
		if p.lit(`,"name":`) {
			if d.name = p.str(); d.name == nil {
				return delta{}, false
			}
		}
		ok = p.lit(`,"argumentsDelta":`)
	} else {
		ok = p.lit(`,"text":`)
	}
	if !ok {
		return delta{}, false
	}
	if d.text = p.str(); d.text == nil || !p.lit(`}}}`) || p.i != len(p.b) || !bytes.Equal(d.raw(), ev.Raw) {
		return delta{}, false
	}
	return d, true
}

// cursor reads tokens of a compact JSON record positionally.
type cursor struct {
	b []byte
	i int
}

// lit consumes s if it comes next.
func (c *cursor) lit(s string) bool {
	if len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		return false
	}
	c.i += len(s)
	return true
}

// num consumes a number token.
func (c *cursor) num() []byte {
	j := c.i
	for j < len(c.b) && (c.b[j] >= '0' && c.b[j] <= '9' || c.b[j] == '-' || c.b[j] == '+' || c.b[j] == '.' || c.b[j] == 'e' || c.b[j] == 'E') {
		j++
	}
	if j == c.i {
		return nil
	}
	tok := c.b[c.i:j]
	c.i = j
	return tok
}

// str consumes a string token.
func (c *cursor) str() []byte {
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return nil
	}
	for j := c.i + 1; j < len(c.b); j++ {
		switch c.b[j] {
		case '\\':
			j++
		case '"':
			tok := c.b[c.i : j+1]
			c.i = j + 1
			return tok
		}
	}
	return nil
}

// continues reports whether d can extend a run that ends with prev.
func (d *delta) continues(prev *delta) bool {
	if d.kind != prev.kind || d.seq != prev.seq+1 {
		return false
	}
	if dt := d.time - prev.time; dt > MaxSafeInteger || dt < -MaxSafeInteger {
		return false
	}
	if !bytes.Equal(d.turn, prev.turn) || !bytes.Equal(d.step, prev.step) || !bytes.Equal(d.index, prev.index) {
		return false
	}
	if d.kind == "tool-call-delta" {
		return bytes.Equal(d.id, prev.id) && (d.name == nil) == (prev.name == nil) && bytes.Equal(d.name, prev.name)
	}
	return true
}

// packRow writes a run of at least one delta as one row, in the writer's
// key order.
func packRow(b *bytes.Buffer, run []delta) {
	first := &run[0]
	b.WriteString(`{"type":"` + rowTag(first.kind) + `","seq0":`)
	b.WriteString(strconv.FormatInt(first.seq, 10))
	b.WriteString(`,"time0":`)
	b.WriteString(strconv.FormatInt(first.time, 10))
	b.WriteString(`,"data":{"turn":`)
	b.Write(first.turn)
	b.WriteString(`,"step":`)
	b.Write(first.step)
	b.WriteString(`,"index":`)
	b.Write(first.index)
	b.WriteString(`,"dt":[`)
	for k := 1; k < len(run); k++ {
		if k > 1 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(run[k].time-run[k-1].time, 10))
	}
	b.WriteString(`],`)
	if first.kind == "tool-call-delta" {
		b.WriteString(`"id":`)
		b.Write(first.id)
		if first.name != nil {
			b.WriteString(`,"name":`)
			b.Write(first.name)
		}
		b.WriteString(`,"args":[`)
	} else {
		b.WriteString(`"texts":[`)
	}
	for k := range run {
		if k > 0 {
			b.WriteByte(',')
		}
		b.Write(run[k].text)
	}
	b.WriteString(`]}}`)
}
