package record

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

const hdr = `{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}` + "\n"

func ev(seq int, typ string) string {
	return `{"type":"` + typ + `","seq":` + itoa(seq) + `,"time":` + itoa(seq) + `,"data":{}}` + "\n"
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i < 0 {
		return appendInt(append(b, '-'), -i)
	}
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

func TestReaderRefusals(t *testing.T) {
	tests := []struct {
		name string
		in   string
		rule Rule
		line int
		msg  string
	}{
		{"an empty file", "", RuleMissingHeader, 0, "empty or header-less"},
		{"a header without a newline", strings.TrimSuffix(hdr, "\n"), RuleMissingHeader, 1, "no newline"},
		{"a version-less header", `{"type":"session","id":"s","createdAt":1}` + "\n", RuleHeader, 1, "version is missing"},
		{"a newer version", `{"type":"session","version":3,"id":"s","createdAt":1}` + "\n", RuleFormatUnsupported, 1, "newer harness"},
		{"a first seq that is not 0", hdr + ev(1, "turn/end"), RuleSeqGap, 2, "seq gap (expected 0, got 1)"},
		{"a gap", hdr + ev(0, "a") + ev(1, "a") + ev(3, "a"), RuleSeqGap, 4, "seq gap (expected 2, got 3)"},
		{"a repeated seq", hdr + ev(0, "a") + ev(0, "a"), RuleSeqGap, 3, "expected 1, got 0"},
		{"a blank line", hdr + ev(0, "a") + "\n" + ev(1, "a"), RuleInvalidJSON, 3, "empty record"},
		{"a stray session line", hdr + ev(0, "a") + hdr, RuleEnvelope, 3, "no seq"},
		{"an unparsable line", hdr + "{oops\n", RuleInvalidJSON, 2, "byte"},
		{"a torn tail", hdr + ev(0, "a") + `{"type":"a","se`, RuleTornTail, 3, "no newline (15 bytes)"},
		{"a row with a seq gap", hdr + ev(0, "a") + `{"type":"text-chunks","seq0":2,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}` + "\n", RuleSeqGap, 3, "expected 1, got 2"},
		{"a malformed row", hdr + `{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}` + "\n", RuleMalformedRow, 2, "malformed text-chunks storage row"},
		{"an unsubstituted cwd", `{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"{{cwd}}"}` + "\n", RulePlaceholder, 1, "{{cwd}}"},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			_, _, err := ReadAll(strings.NewReader(tt.in), WithName("f.jsonl"))
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RecordError", err)
			}
			if re.Rule != tt.rule || re.Line != tt.line || re.File != "f.jsonl" || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v (rule %s, line %d), want rule %s, line %d, %q", err, re.Rule, re.Line, tt.rule, tt.line, tt.msg)
			}
		})
	}
}

func TestReaderUpstreamTail(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		events int
		rule   Rule // of the error, or of Tail when events >= 0
		err    bool
	}{
		{"a torn tail is dropped", hdr + ev(0, "a") + `{"type"`, 1, RuleTornTail, false},
		{"a gap after the last turn/end is a crash tail", hdr + ev(0, "turn/end") + ev(5, "a") + ev(6, "b"), 1, RuleSeqGap, false},
		{"a gap before a later turn/end is an error", hdr + ev(0, "a") + ev(5, "a") + ev(6, "turn/end"), 0, RuleSeqGap, true},
		{"a gapped turn/end is an error itself", hdr + ev(1, "turn/end"), 0, RuleSeqGap, true},
		{"an unparsable line before a turn/end is an error", hdr + "x\n" + ev(1, "turn/end"), 0, RuleInvalidJSON, true},
		{"an unparsable line with no turn/end after it is a crash tail", hdr + ev(0, "a") + "x\n" + ev(2, "b") + "y", 1, RuleInvalidJSON, false},
		{"the blocked-log fixture reads as 0 events", hdr + ev(1, "hook/result"), 0, RuleSeqGap, false},
		{"a clean log has no tail", hdr + ev(0, "a"), 1, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in), WithUpstreamTail())
			n := 0
			var err error
			for {
				if _, err = r.Next(); err != nil {
					break
				}
				n++
			}
			if tt.err {
				if err == io.EOF || RuleOf(err) != tt.rule {
					t.Fatalf("err = %v, want rule %s", err, tt.rule)
				}
				return
			}
			if err != io.EOF {
				t.Fatalf("err = %v, want io.EOF", err)
			}
			if n != tt.events {
				t.Errorf("read %d events, want %d", n, tt.events)
			}
			got := Rule("")
			if r.Tail() != nil {
				got = r.Tail().Rule
			}
			if got != tt.rule {
				t.Errorf("Tail rule = %q, want %q", got, tt.rule)
			}
		})
	}
}

func TestReaderExpandsRows(t *testing.T) {
	in := hdr +
		`{"type":"reasoning-chunks","seq0":0,"time0":100,"data":{"turn":1,"step":2,"index":0,"dt":[5,-960582509],"texts":["a","\"b\"","c"]}}` + "\n" +
		`{"type":"tool-call-chunks","seq0":3,"time0":-7,"data":{"turn":1,"step":2,"index":1,"dt":[1],"id":"call_1","name":"bash","args":["{\"a","\":1}"]}}` + "\n" +
		`{"type":"tool-call-chunks","seq0":5,"time0":0,"data":{"turn":1,"step":2,"index":2,"dt":[],"id":"c2","args":["x"]}}` + "\n"
	want := []string{
		`{"type":"assistant/chunk","seq":0,"time":100,"data":{"turn":1,"step":2,"chunk":{"type":"reasoning-delta","index":0,"text":"a"}}}`,
		`{"type":"assistant/chunk","seq":1,"time":105,"data":{"turn":1,"step":2,"chunk":{"type":"reasoning-delta","index":0,"text":"\"b\""}}}`,
		`{"type":"assistant/chunk","seq":2,"time":-960582404,"data":{"turn":1,"step":2,"chunk":{"type":"reasoning-delta","index":0,"text":"c"}}}`,
		`{"type":"assistant/chunk","seq":3,"time":-7,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":1,"id":"call_1","name":"bash","argumentsDelta":"{\"a"}}}`,
		`{"type":"assistant/chunk","seq":4,"time":-6,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":1,"id":"call_1","name":"bash","argumentsDelta":"\":1}"}}}`,
		`{"type":"assistant/chunk","seq":5,"time":0,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":2,"id":"c2","argumentsDelta":"x"}}}`,
	}
	_, evs, err := ReadAll(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events, want %d", len(evs), len(want))
	}
	for i, e := range evs {
		if string(e.Raw) != want[i] {
			t.Errorf("event %d =\n%s\nwant\n%s", i, e.Raw, want[i])
		}
	}
	if evs[2].Time != -960582404 || evs[4].Seq != 4 {
		t.Errorf("decoded fields wrong: %+v", evs[2])
	}
}

func TestReaderRefusesMalformedRows(t *testing.T) {
	row := func(env, data string) string {
		return hdr + `{"type":"text-chunks",` + env + `"data":{` + data + `}}` + "\n"
	}
	okEnv := `"seq0":0,"time0":0,`
	okData := `"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]`
	tests := []struct{ name, in, msg string }{
		{"an extra envelope key", row(okEnv+`"x":1,`, okData), "envelope keys"},
		{"a missing seq0", row(`"time0":0,`, okData), "envelope keys"},
		{"a negative seq0", row(`"seq0":-1,"time0":0,`, okData), "seq0"},
		{"a fractional time0", row(`"seq0":0,"time0":0.5,`, okData), "time0"},
		{"a data array", hdr + `{"type":"text-chunks","seq0":0,"time0":0,"data":[]}` + "\n", "not an object"},
		{"an extra data key", row(okEnv, okData+`,"x":1`), "data keys"},
		{"a missing turn", row(okEnv, `"step":1,"index":0,"dt":[0],"texts":["a","b"],"x":1`), "turn is missing"},
		{"a string step", row(okEnv, `"turn":1,"step":"1","index":0,"dt":[0],"texts":["a","b"]`), "step"},
		{"empty texts", row(okEnv, `"turn":1,"step":1,"index":0,"dt":[],"texts":[]`), "non-empty array"},
		{"a non-string text", row(okEnv, `"turn":1,"step":1,"index":0,"dt":[0],"texts":["a",1]`), "array of strings"},
		{"a short dt", row(okEnv, `"turn":1,"step":1,"index":0,"dt":[],"texts":["a","b"]`), "dt must be"},
		{"a fractional dt", row(okEnv, `"turn":1,"step":1,"index":0,"dt":[0.5],"texts":["a","b"]`), "dt[0]"},
		{"a time sum beyond 2^53-1", row(`"seq0":0,"time0":9007199254740991,`, `"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"]`), "beyond"},
		{"a seq beyond 2^53-1", row(`"seq0":9007199254740991,"time0":0,`, okData), "seq0+1"},
		{"a tool row without id", hdr + `{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}}` + "\n", "id and name"},
		{"a tool row with a numeric name", hdr + `{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"id":"i","name":1,"args":["a"]}}` + "\n", "id and name"},
		{"a tool row with texts", hdr + `{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[],"id":"i","texts":["a"]}}` + "\n", "data keys"},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			_, _, err := ReadAll(strings.NewReader(tt.in))
			if RuleOf(err) != RuleMalformedRow || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %s mentioning %q", err, RuleMalformedRow, tt.msg)
			}
		})
	}
}

// endless yields a header, then the start of one line of n bytes of 'x' in
// a JSON string, without holding it; it counts what was read.
type endless struct {
	head []byte
	n    int64
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	if len(e.head) > 0 {
		k := copy(p, e.head)
		e.head = e.head[k:]
		e.read += int64(k)
		return k, nil
	}
	if e.n == 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), e.n)
	for i := 0; i < int(k); i += len(xs) {
		copy(p[i:k], xs)
	}
	e.n -= k
	e.read += k
	return int(k), nil
}

var xs = bytes.Repeat([]byte("x"), 64<<10)

func TestReaderRefusesAHugeLineWithoutReadingIt(t *testing.T) {
	tests := []struct {
		name  string
		limit int
	}{
		{"a 100 MB line over a 1 MiB limit", 1 << 20},
		{"a 100 MB line over the default limit", 0},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			src := &endless{head: []byte(hdr + `{"type":"a","seq":0,"time":0,"data":"`), n: 100 << 20}
			opts := []Option{}
			limit := DefaultMaxRecordBytes
			if tt.limit > 0 {
				limit = tt.limit
				opts = append(opts, WithMaxRecordBytes(limit))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _, err := ReadAll(src, opts...)
			runtime.ReadMemStats(&after)
			if RuleOf(err) != RuleTooLarge || !strings.Contains(err.Error(), "line 2") {
				t.Fatalf("err = %v, want %s at line 2", err, RuleTooLarge)
			}
			if max := int64(len(hdr)) + int64(limit) + 256<<10; src.read > max {
				t.Errorf("read %d bytes of the input, want at most %d", src.read, max)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(3*limit) {
				t.Errorf("allocated %d bytes for a %d-byte limit", alloc, limit)
			}
		})
	}
}

func TestReaderAcceptsALineAtTheLimit(t *testing.T) {
	line := `{"type":"a","seq":0,"time":0,"data":"` + strings.Repeat("y", 100) + `"}`
	for _, limit := range []int{len(line), len(line) - 1} {
		_, evs, err := ReadAll(strings.NewReader(hdr+line+"\n"), WithMaxRecordBytes(limit))
		if ok := limit >= len(line); ok != (err == nil && len(evs) == 1) {
			t.Errorf("limit %d for a %d-byte line: err = %v", limit, len(line), err)
		}
	}
}

func TestReaderReadsZstd(t *testing.T) {
	frames := [][]byte{[]byte(hdr), []byte(ev(0, "a") + ev(1, "b")), []byte(ev(2, "turn/end"))}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var file []byte
	var starts []int
	for _, f := range frames {
		starts = append(starts, len(file))
		file = enc.EncodeAll(f, file)
	}
	t.Run("concatenated frames read as one log", func(t *testing.T) {
		_, evs, err := ReadAll(bytes.NewReader(file))
		if err != nil || len(evs) != 3 || evs[2].Type != "turn/end" {
			t.Fatalf("ReadAll = %d events, %v", len(evs), err)
		}
	})
	torn := file[:starts[2]+6]
	t.Run("a torn final frame is refused", func(t *testing.T) {
		_, _, err := ReadAll(bytes.NewReader(torn))
		if RuleOf(err) != RuleTornTail {
			t.Fatalf("err = %v, want %s", err, RuleTornTail)
		}
	})
	t.Run("a torn final frame is dropped in upstream mode", func(t *testing.T) {
		r := NewReader(bytes.NewReader(torn), WithUpstreamTail())
		defer r.Close()
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				break
			}
			n++
		}
		if n != 2 || r.Tail() == nil || r.Tail().Rule != RuleTornTail {
			t.Fatalf("read %d events, tail %v; want 2 and a torn tail", n, r.Tail())
		}
	})
	t.Run("a corrupt frame is refused", func(t *testing.T) {
		bad := bytes.Clone(file)
		bad[starts[1]+8] ^= 0xFF
		_, _, err := ReadAll(bytes.NewReader(bad))
		if r := RuleOf(err); r != RuleZstd && r != RuleInvalidJSON && r != RuleTornTail {
			t.Fatalf("err = %v, want a zstd refusal", err)
		}
		if err == nil {
			t.Fatal("a corrupt frame was read")
		}
	})
	t.Run("garbage after the magic is refused", func(t *testing.T) {
		_, _, err := ReadAll(bytes.NewReader(append(bytes.Clone(zstdMagic), 0xFF, 0xFF, 0xFF)))
		if err == nil {
			t.Fatal("garbage was read")
		}
	})
}

func TestReaderZstdFrameRules(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	frames := func(fs ...string) []byte {
		var out []byte
		for _, f := range fs {
			out = enc.EncodeAll([]byte(f), out)
		}
		return out
	}
	good := frames(hdr, ev(0, "a")+ev(1, "b"))
	reserved := bytes.Clone(good)
	reserved[4] |= 0x08
	tests := []struct {
		name     string
		in       []byte
		upstream bool
		rule     Rule
		msg      string
	}{
		{"a first frame with more than the header", frames(hdr + ev(0, "a")), false, RuleZstd, "first frame is not exactly one header line"},
		{"a first frame with part of the header", frames(hdr[:10], hdr[10:]), false, RuleZstd, "first frame is not exactly one header line"},
		{"a line spanning two frames", frames(hdr, ev(0, "a")[:5], ev(0, "a")[5:]), false, RuleZstd, "torn JSONL record"},
		{"a line spanning two frames in upstream mode", frames(hdr, ev(0, "a")[:5], ev(0, "a")[5:]), true, RuleZstd, "torn JSONL record"},
		{"a seq gap inside a complete frame in upstream mode", frames(hdr, ev(0, "a")+ev(2, "b")), true, RuleSeqGap, "expected 1, got 2"},
		{"an unparsable line inside a complete frame in upstream mode", frames(hdr, ev(0, "a")+"x\n"), true, RuleInvalidJSON, ""},
		{"garbage after the last frame", append(bytes.Clone(good), 'x', 'y', 'z', 'w', 0), false, RuleZstd, "invalid frame magic at byte"},
		{"a skippable frame", append(bytes.Clone(good), 0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0), false, RuleZstd, "invalid frame magic"},
		{"reserved header bits", reserved, false, RuleZstd, "reserved header bits"},
		{"a header-only frame that is torn", good[:7], false, RuleMissingHeader, "empty or header-less"},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			opts := []Option{}
			if tt.upstream {
				opts = append(opts, WithUpstreamTail())
			}
			_, _, err := ReadAll(bytes.NewReader(tt.in), opts...)
			if RuleOf(err) != tt.rule || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want rule %s with %q", err, tt.rule, tt.msg)
			}
		})
	}
	t.Run("complete lines of a torn multi-block frame are recovered in upstream mode", func(t *testing.T) {
		var big strings.Builder
		for i := 0; i < 3000; i++ {
			big.WriteString(`{"type":"a","seq":` + itoa(i) + `,"time":0,"data":"` + strings.Repeat(string(rune('a'+i%26)), 100+i%37) + itoa(i*7919) + `"}` + "\n")
		}
		file := frames(hdr, big.String())
		r := NewReader(bytes.NewReader(file[:len(file)-10]), WithUpstreamTail())
		defer r.Close()
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				if err != io.EOF {
					t.Fatal(err)
				}
				break
			}
			n++
		}
		if n == 0 || n >= 3000 || r.Tail() == nil {
			t.Fatalf("recovered %d of 3000 events, tail %v", n, r.Tail())
		}
	})
}

func TestReaderWithoutPlaceholders(t *testing.T) {
	refused := []struct {
		name, header, msg string
		opts              []Option
	}{
		{"an id that is a placeholder", `{"type":"session","version":0,"id":"{{sessionId}}","createdAt":1}`, `header id "{{sessionId}}" holds the {{sessionId}} placeholder`, nil},
		{"a parent that is a placeholder", `{"type":"session","version":0,"id":"c","createdAt":1,"parentSession":"{{parent}}"}`, `parentSession "{{parent}}" holds the {{parent}} placeholder`, nil},
		{"an absolute cwd holding a placeholder", `{"type":"session","version":0,"id":"c","createdAt":1,"cwd":"/tmp/{{cwd}}"}`, `cwd "/tmp/{{cwd}}" holds the {{cwd}} placeholder`, nil},
		{"a relative placeholder cwd", `{"type":"session","version":0,"id":"c","createdAt":1,"cwd":"{{cwd}}/workspace"}`, `holds the {{cwd}} placeholder`, nil},
		{"an id the fixture substitution leaves", `{"type":"session","version":0,"id":"{{child-1}}","createdAt":1,"cwd":"{{cwd}}"}`, `id "{{child-1}}" holds the {{child-1}} placeholder`,
			[]Option{WithFixturePlaceholders("/ws", "fresh")}},
	}
	for _, tt := range refused {
		t.Run("it refuses "+tt.name+" at line 1", func(t *testing.T) {
			opts := append([]Option{WithName("f.jsonl"), WithoutPlaceholders()}, tt.opts...)
			_, _, err := ReadAll(strings.NewReader(tt.header+"\n"), opts...)
			var re *RecordError
			if !errors.As(err, &re) || re.Rule != RulePlaceholder || re.Line != 1 || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %s at line 1 saying %q", err, RulePlaceholder, tt.msg)
			}
		})
	}
	t.Run("it reads a substituted fixture and braces that are not placeholders", func(t *testing.T) {
		for _, h := range []string{
			`{"type":"session","version":0,"id":"{{sessionId}}","createdAt":1,"cwd":"{{cwd}}","parentSession":"p"}`,
			`{"type":"session","version":0,"id":"a{}b{{}}c","createdAt":1,"cwd":"/x/{y}"}`,
		} {
			if _, _, err := ReadAll(strings.NewReader(h+"\n"), WithoutPlaceholders(), WithFixturePlaceholders("/ws", "fresh")); err != nil {
				t.Errorf("%s: %v", h, err)
			}
		}
	})
	t.Run("without the option an id placeholder reads, as the projector reads it", func(t *testing.T) {
		h, _, err := ReadAll(strings.NewReader(`{"type":"session","version":0,"id":"{{sessionId}}","createdAt":1}` + "\n"))
		if err != nil || h.Header.ID != "{{sessionId}}" {
			t.Fatalf("header %+v, err %v", h.Header, err)
		}
	})
}

func TestPlaceholder(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "plain": "", "{{cwd}}/workspace": "{{cwd}}", "a{{}}b": "", "{{x": "", "{{{a}}}": "{{a}}", "x{{child-1}}y{{z}}": "{{child-1}}",
	} {
		if got := Placeholder(in); got != want {
			t.Errorf("Placeholder(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReaderStandardZstd(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	log := hdr + ev(0, "a") + ev(1, "b") + ev(2, "turn/end")
	one := enc.EncodeAll([]byte(log), nil) // the zstd tool's output: one frame
	split := enc.EncodeAll([]byte(log[:10]), nil)
	split = enc.EncodeAll([]byte(log[10:len(hdr)+7]), split)
	split = enc.EncodeAll([]byte(log[len(hdr)+7:]), split)
	skippable := append([]byte{0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 'p', 'z', 's'}, one...)
	for name, in := range map[string][]byte{
		"one frame holding the whole log": one,
		"frames cut inside lines":         split,
		"a skippable frame first":         skippable,
	} {
		t.Run("it reads "+name, func(t *testing.T) {
			h, evs, err := ReadAll(bytes.NewReader(in), WithStandardZstd())
			if err != nil || h.Header.ID != "s" || len(evs) != 3 || evs[2].Type != "turn/end" {
				t.Fatalf("ReadAll = %+v, %d events, %v", h.Header, len(evs), err)
			}
		})
	}
	t.Run("without it the harness framing refuses the zstd tool's single frame", func(t *testing.T) {
		if _, _, err := ReadAll(bytes.NewReader(one)); RuleOf(err) != RuleZstd {
			t.Fatalf("err = %v, want %s", err, RuleZstd)
		}
	})
	refusals := []struct {
		name string
		in   []byte
		rule Rule
	}{
		{"a stream that ends inside a frame", split[:len(split)-3], RuleTornTail},
		{"a stream that ends inside the header's frame", one[:len(one)-3], RuleMissingHeader},
		{"a corrupt frame", func() []byte { b := bytes.Clone(one); b[len(b)-2] ^= 0xFF; return b }(), RuleZstd},
		{"garbage after the last frame", append(bytes.Clone(one), 'x', 'y', 'z', 'w', 0), RuleZstd},
		{"a seq gap", enc.EncodeAll([]byte(hdr+ev(0, "a")+ev(2, "b")), nil), RuleSeqGap},
	}
	for _, tt := range refusals {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			_, _, err := ReadAll(bytes.NewReader(tt.in), WithStandardZstd())
			if RuleOf(err) != tt.rule {
				t.Fatalf("err = %v, want %s", err, tt.rule)
			}
		})
	}
}
