package fold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/dshq/dshq"
)

// program turns fuzz bytes into a plausible event stream: mostly valid
// events of every kind (replaces of real surface ranges, rewrites of real
// tool results, calls and results that pair up), with wrong seqs, wrong
// sources, bad shapes and raw garbage mixed in.
type program struct {
	b   []byte
	pos int
	// toolData remembers the data of accepted tool/result events, so a
	// rewrite can keep everything but the inner content.
	toolData map[int64]map[string]any
	calls    []string
}

func (p *program) next() byte {
	if p.pos >= len(p.b) {
		return 0
	}
	c := p.b[p.pos]
	p.pos++
	return c
}

func (p *program) done() bool { return p.pos >= len(p.b) }

func (p *program) word() string {
	words := []string{"alpha", "beta", " spaced ", "", "中文", "reasoning", "\ufeff", "x\ny"}
	c := p.next()
	if c >= 0xf0 && !p.done() {
		n := int(p.next()) % 8
		end := min(p.pos+n, len(p.b))
		s := string(p.b[p.pos:end])
		p.pos = end
		return s
	}
	return words[int(c)%len(words)]
}

func (p *program) call() string {
	c := p.next()
	if int(c)%4 == 0 || len(p.calls) == 0 {
		id := fmt.Sprintf("c%d", len(p.calls))
		p.calls = append(p.calls, id)
		return id
	}
	return p.calls[int(c)%len(p.calls)]
}

func (p *program) content() []any {
	var blocks []any
	for range int(p.next()) % 4 {
		switch p.next() % 5 {
		case 0:
			blocks = append(blocks, map[string]any{"type": "text", "text": p.word()})
		case 1:
			blocks = append(blocks, map[string]any{"type": "reasoning", "text": p.word()})
		case 2:
			blocks = append(blocks, map[string]any{"type": "tool-call", "id": p.call(), "name": p.word(), "arguments": "{}"})
		case 3:
			blocks = append(blocks, map[string]any{"type": "tool-result", "toolCallId": p.call(), "content": []any{map[string]any{"type": "text", "text": p.word()}}, "isError": false})
		default:
			blocks = append(blocks, map[string]any{"type": p.word()})
		}
	}
	return blocks
}

// pick returns a seq of the current surface, or an arbitrary one.
func (p *program) pick(s *State) int64 {
	c := p.next()
	if len(s.nodes) == 0 || c%8 == 0 {
		return int64(c) % (s.next + 2)
	}
	return s.nodes[int(c)%len(s.nodes)].seq
}

// event builds the next candidate event for s.
func (p *program) event(s *State) dshq.Event {
	seq := s.next
	if c := p.next(); c%16 == 0 {
		seq += int64(int8(p.next()))
	}
	var (
		typ       string
		data      any
		surfaceOp any
		sources   any
	)
	turnStep := func(m map[string]any) map[string]any {
		m["turn"], m["step"] = int(p.next()%3), int(p.next()%3)
		return m
	}
	kind := p.next() % 17
	switch kind {
	case 0:
		typ, data = "turn/start", map[string]any{"turn": int(p.next() % 3)}
	case 1:
		kinds := []string{"completed", "error", "aborted", "max-tokens", "interrupted", "blocked", "weird"}
		reason := map[string]any{"kind": kinds[int(p.next())%len(kinds)], "error": map[string]any{"message": p.word()}}
		typ, data = "turn/end", map[string]any{"turn": 1, "reason": reason}
	case 2:
		typ, data = "step/start", turnStep(map[string]any{})
	case 3:
		typ, data = "step/end", turnStep(map[string]any{})
	case 4, 5:
		typ = dshq.TypeUserMessage
		data = map[string]any{"id": "m" + p.word(), "role": "user", "source": map[string]any{"kind": "user"}, "content": p.content()}
	case 6, 7:
		typ = dshq.TypeAssistantMessage
		msg := map[string]any{"id": "m", "role": "assistant", "source": map[string]any{"kind": "model", "provider": "p", "model": "m"}, "content": p.content()}
		data = turnStep(map[string]any{"message": msg})
	case 8:
		typ, data = "tool/call", turnStep(map[string]any{"callId": p.call(), "name": p.word(), "arguments": p.word()})
	case 9, 10:
		typ = dshq.TypeToolResult
		id := p.call()
		block := map[string]any{"type": "tool-result", "toolCallId": id, "content": p.content(), "isError": p.next()%2 == 0}
		msg := map[string]any{"id": "t" + id, "role": "user", "source": map[string]any{"kind": "tool", "callId": id}, "content": []any{block}}
		d := turnStep(map[string]any{"message": msg})
		if p.next()%3 == 0 {
			d["error"] = map[string]any{"name": p.word(), "code": p.word()}
		}
		data = d
	case 11:
		typ, data = "session/title", map[string]any{"title": p.word(), "messageSeqs": []any{0}, "source": map[string]any{"kind": "user"}}
	case 12:
		typ, data = "todo/write", map[string]any{"todos": []any{map[string]any{"status": p.word(), "content": p.word()}}}
	case 13:
		typ, data = "request/header", map[string]any{"header": map[string]any{"config": map[string]any{"provider": "p", "model": p.word()}}, "reason": []string{"initial", "fallback", "series"}[int(p.next())%3]}
	case 14:
		typ, data = p.word()+"/"+p.word(), map[string]any{"x": p.word()}
	case 15:
		// A rewrite of a remembered tool result: same data, new inner
		// content (sometimes another isError as well).
		typ = dshq.TypeToolResult
		target := p.pick(s)
		d, ok := p.toolData[target]
		if !ok {
			data = map[string]any{"message": map[string]any{}}
			break
		}
		d = cloneJSON(d)
		if blocks, _ := arr(obj(d["message"])["content"]); len(blocks) > 0 {
			b := obj(blocks[0])
			b["content"] = []any{map[string]any{"type": "text", "text": "[pruned]"}}
			if p.next()%8 == 0 {
				b["isError"] = true
			}
		}
		data = d
		surfaceOp = map[string]any{"op": "replace", "start": target, "end": target}
		sources = []any{target}
	default:
		// Raw garbage in every field.
		n := int(p.next()) % 12
		end := min(p.pos+n, len(p.b))
		raw := append([]byte(nil), p.b[p.pos:end]...)
		p.pos = end
		return dshq.Event{Type: dshq.TypeUserMessage, Seq: seq, Data: raw, SurfaceOp: raw, SourceEventSeqs: raw}
	}
	if dshq.IsSurfaceType(typ) && surfaceOp == nil {
		surfaceOp, sources = p.surface(s, seq, typ)
	} else if c := p.next(); c%32 == 0 {
		surfaceOp = "append"
	}
	return buildEvent(typ, seq, data, surfaceOp, sources)
}

// surface picks an append or a replace (of a real surface range, citing
// what it shadows, sometimes not quite) and the sources.
func (p *program) surface(s *State, seq int64, typ string) (any, any) {
	var op any = "append"
	var cites []any
	switch c := p.next(); {
	case c%4 == 0:
		start, end := p.pick(s), p.pick(s)
		op = map[string]any{"op": "replace", "start": start, "end": end}
		inRange := false
		for _, n := range s.nodes {
			if n.seq == start {
				inRange = true
			}
			if inRange && p.next()%16 != 0 {
				cites = append(cites, n.seq)
			}
			if n.seq == end {
				break
			}
		}
	case c%4 == 1:
		op = []string{"append ", "replace", ""}[int(c)%3]
	}
	for range int(p.next()) % 3 {
		cites = append(cites, int64(p.next())%(s.next+2))
	}
	if len(cites) == 0 && p.next()%2 == 0 {
		return op, nil
	}
	if cites == nil {
		cites = []any{}
	}
	return op, cites
}

func cloneJSON(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func buildEvent(typ string, seq int64, data, surfaceOp, sources any) dshq.Event {
	enc := func(v any) json.RawMessage {
		if v == nil {
			return nil
		}
		b, _ := json.Marshal(v)
		return b
	}
	e := dshq.Event{Type: typ, Seq: seq, Time: seq * 10, Data: enc(data), SurfaceOp: enc(surfaceOp), SourceEventSeqs: enc(sources)}
	e.Raw = jsonObject("type", jsonString(typ), "seq", enc(seq), "time", enc(e.Time), "data", e.Data,
		"surfaceOp", e.SurfaceOp, "sourceEventSeqs", e.SourceEventSeqs)
	return e
}

// FuzzApply feeds random event streams to Apply: no input panics; a state
// round-tripped through MarshalBinary before every event applies exactly
// like one that never was; a refused event changes nothing; and the
// accepted events fold in one pass exactly as they did incrementally, with
// closers that apply under Strict.
func FuzzApply(f *testing.F) {
	f.Add([]byte{0, 0})
	f.Add([]byte("\x01\x00\x00\x04\x00\x04\x01\x00\x00\x06\x02\x02\x01\x00\x01\x00\x09\x01\x01\x02"))
	f.Add(bytes.Repeat([]byte{1, 4, 0, 5, 2, 1, 7, 3, 9, 0, 15, 4}, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := &program{b: b, toolData: map[int64]map[string]any{}}
		h := g2Header()
		if p.next()%2 == 0 {
			h = g0Header()
		}
		level := Level(p.next() % 2)
		plain, s := New(h, level), New(h, level)
		got := newResult(s)
		var accepted []dshq.Event
		for i := 0; i < 200 && !p.done(); i++ {
			e := p.event(s)
			s = roundTrip(t, s)
			got.State = s
			before := mustMarshal(t, s)
			eff, err := s.Apply(e)
			plainEff, plainErr := plain.Apply(e)
			if !reflect.DeepEqual(eff, plainEff) || !reflect.DeepEqual(err, plainErr) {
				t.Fatalf("seq %d: a round-tripped state applied differently:\n%+v %v\n%+v %v", e.Seq, eff, err, plainEff, plainErr)
			}
			if err != nil {
				if _, ok := err.(*ValidationError); !ok {
					t.Fatalf("error is not a *ValidationError: %T", err)
				}
				if !bytes.Equal(before, mustMarshal(t, s)) {
					t.Fatalf("seq %d: a refused event changed the state", e.Seq)
				}
				continue
			}
			if e.Type == dshq.TypeToolResult {
				var d map[string]any
				if json.Unmarshal(e.Data, &d) == nil {
					p.toolData[e.Seq] = d
				}
			}
			accepted = append(accepted, e)
			got.add(e, eff)
		}
		got.finish()
		want, err := Fold(h, accepted, level)
		if err != nil {
			t.Fatalf("one pass refused what Apply accepted: %v", err)
		}
		if a, b := toJSON(t, got), toJSON(t, want); a != b {
			t.Fatalf("incremental fold differs from one pass:\n%s", firstDiff(b, a))
		}
		if !bytes.Equal(mustMarshal(t, got.State), mustMarshal(t, want.State)) {
			t.Fatal("incremental state differs from one pass")
		}
		for seq := range want.Records {
			if _, ok := want.Trace(int64(seq)); !ok {
				t.Fatalf("no trace for seq %d", seq)
			}
		}
		checkClosers(t, want.State)
	})
}

// FuzzUnmarshalBinary feeds arbitrary bytes to UnmarshalBinary: no panic;
// whatever decodes re-encodes to the same bytes, and the decoded state
// still takes events and yields closers without panicking.
func FuzzUnmarshalBinary(f *testing.F) {
	for _, path := range []string{
		"testdata/golden/crash-closers-balance-an-interrupted-step.jsonl",
		"testdata/golden/upstream-2.5-example-compacts-to-surface-15-10.jsonl",
	} {
		h, events := readLog(f, path)
		r, _ := Fold(h, events, Lenient)
		f.Add(mustMarshal(f, r.State))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s State
		if err := s.UnmarshalBinary(b); err != nil {
			return
		}
		if again := mustMarshal(t, &s); !bytes.Equal(again, b) {
			t.Fatalf("decoded state re-encodes differently:\n%x\n%x", b, again)
		}
		p := &program{b: b, toolData: map[int64]map[string]any{}}
		for range 8 {
			_, _ = s.Apply(p.event(&s))
		}
		for _, c := range s.Closers() {
			_, _ = s.Apply(c)
		}
		_ = s.Surface()
		_ = s.MessageSeqs()
	})
}

// FuzzScanObject checks the envelope key scanner against encoding/json: on
// every valid JSON object it finds exactly the member keys, and no input
// panics it.
func FuzzScanObject(f *testing.F) {
	f.Add([]byte(`{"type":"x","seq":0,"time":1,"data":{"a":[1,"}"]},"ignorable":true}`))
	f.Add([]byte(`{"\u0074ype":"x" , "k\"":[{}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys := map[string]bool{}
		ok := scanObject(b, func(key string, val []byte) { keys[key] = true })
		var m map[string]json.RawMessage
		if jsonKind(b) != '{' || json.Unmarshal(b, &m) != nil {
			return
		}
		if !ok {
			t.Fatalf("scanObject refused a valid object %q", b)
		}
		if len(keys) != len(m) {
			t.Fatalf("scanObject found keys %v, encoding/json %d keys", keys, len(m))
		}
		for k := range m {
			if !keys[k] {
				t.Fatalf("scanObject missed key %q", k)
			}
		}
	})
}
