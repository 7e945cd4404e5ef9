package record

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/klauspost/compress/zstd"

	"github.com/dshq/dshq/internal/golden"
)

func chunk(seq, time int, kind, index, extra string) string {
	body := `"text":"t` + itoa(seq) + `"`
	if kind == "tool-call-delta" {
		body = extra + `"argumentsDelta":"a` + itoa(seq) + `"`
	}
	return `{"type":"assistant/chunk","seq":` + itoa(seq) + `,"time":` + itoa(time) + `,"data":{"turn":1,"step":1,"chunk":{"type":"` + kind + `","index":` + index + `,` + body + `}}}`
}

func mustEvents(t *testing.T, lines ...string) []dshq.Event {
	t.Helper()
	var evs []dshq.Event
	for _, l := range lines {
		e, err := ParseEvent([]byte(l))
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		evs = append(evs, e)
	}
	return evs
}

// writeLines writes a header and events, flushing after each index in
// flushAt, and returns the lines after the header.
func writeLines(t *testing.T, evs []dshq.Event, flushAt map[int]bool) []string {
	t.Helper()
	var out bytes.Buffer
	w := NewWriter(&out)
	h, err := ParseHeader([]byte(strings.TrimSpace(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if err := w.WriteEvent(e); err != nil {
			t.Fatal(err)
		}
		if flushAt[i] {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if lines[0]+"\n" != hdr {
		t.Fatalf("header line = %s", lines[0])
	}
	// Whatever was packed, reading it back gives the same records.
	_, back, err := ReadAll(&out)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(evs) {
		t.Fatalf("reread %d events, want %d", len(back), len(evs))
	}
	for i := range evs {
		if !bytes.Equal(back[i].Raw, evs[i].Raw) {
			t.Fatalf("event %d reread as %s, want %s", i, back[i].Raw, evs[i].Raw)
		}
	}
	return lines[1:]
}

func TestWriterPacksRuns(t *testing.T) {
	tool := func(seq int, id, name string) string {
		extra := `"id":"` + id + `",`
		if name != "" {
			extra += `"name":"` + name + `",`
		}
		return chunk(seq, seq, "tool-call-delta", "1", extra)
	}
	tests := []struct {
		name    string
		lines   []string
		flushAt map[int]bool
		want    []string // "row:<tag>:<n>" for a row, "ev" for a verbatim line
	}{
		{"three text deltas make a row", []string{chunk(0, 5, "text-delta", "0", ""), chunk(1, 3, "text-delta", "0", ""), chunk(2, 9, "text-delta", "0", "")},
			nil, []string{"row:text-chunks:3"}},
		{"two deltas stay verbatim", []string{chunk(0, 0, "text-delta", "0", ""), chunk(1, 0, "text-delta", "0", "")},
			nil, []string{"ev", "ev"}},
		{"a change of kind ends a run", []string{chunk(0, 0, "reasoning-delta", "0", ""), chunk(1, 0, "reasoning-delta", "0", ""), chunk(2, 0, "reasoning-delta", "0", ""), chunk(3, 0, "text-delta", "0", ""), chunk(4, 0, "text-delta", "0", "")},
			nil, []string{"row:reasoning-chunks:3", "ev", "ev"}},
		{"a change of index ends a run", []string{chunk(0, 0, "text-delta", "0", ""), chunk(1, 0, "text-delta", "0", ""), chunk(2, 0, "text-delta", "1", ""), chunk(3, 0, "text-delta", "1", ""), chunk(4, 0, "text-delta", "1", "")},
			nil, []string{"ev", "ev", "row:text-chunks:3"}},
		{"another event ends a run", []string{chunk(0, 0, "text-delta", "0", ""), chunk(1, 0, "text-delta", "0", ""), ev(2, "x")[:len(ev(2, "x"))-1], chunk(3, 0, "text-delta", "0", "")},
			nil, []string{"ev", "ev", "ev", "ev"}},
		{"a flush ends a run", []string{chunk(0, 0, "text-delta", "0", ""), chunk(1, 0, "text-delta", "0", ""), chunk(2, 0, "text-delta", "0", ""), chunk(3, 0, "text-delta", "0", ""), chunk(4, 0, "text-delta", "0", "")},
			map[int]bool{1: true}, []string{"ev", "ev", "row:text-chunks:3"}},
		{"tool deltas pack while id and name hold", []string{tool(0, "a", "bash"), tool(1, "a", "bash"), tool(2, "a", "bash"), tool(3, "a", ""), tool(4, "a", ""), tool(5, "a", ""), tool(6, "b", "")},
			nil, []string{"row:tool-call-chunks:3", "row:tool-call-chunks:3", "ev"}},
		{"a chunk with an extra envelope key stays verbatim", []string{chunk(0, 0, "text-delta", "0", ""), strings.Replace(chunk(1, 0, "text-delta", "0", ""), `"data"`, `"ignorable":true,"data"`, 1), chunk(2, 0, "text-delta", "0", "")},
			nil, []string{"ev", "ev", "ev"}},
		{"a chunk with keys out of order stays verbatim", []string{chunk(0, 0, "text-delta", "0", ""), chunk(1, 0, "text-delta", "0", ""), `{"seq":2,"type":"assistant/chunk","time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}}}`},
			nil, []string{"ev", "ev", "ev"}},
		{"a chunk with a non-canonical time stays verbatim", []string{chunk(0, 0, "text-delta", "0", ""), chunk(1, 0, "text-delta", "0", ""), strings.Replace(chunk(2, 0, "text-delta", "0", ""), `"time":0`, `"time":0.0`, 1)},
			nil, []string{"ev", "ev", "ev"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := writeLines(t, mustEvents(t, tt.lines...), tt.flushAt)
			var kinds []string
			for _, l := range got {
				if strings.HasPrefix(l, `{"type":"assistant/chunk"`) || !strings.Contains(l, `-chunks"`) {
					kinds = append(kinds, "ev")
					continue
				}
				tag := l[len(`{"type":"`):strings.Index(l, `","seq0"`)]
				_, rows, _ := ReadAll(strings.NewReader(hdr + strings.Replace(l, `"seq0":`+seq0(l), `"seq0":0`, 1) + "\n"))
				kinds = append(kinds, "row:"+tag+":"+itoa(len(rows)))
			}
			if strings.Join(kinds, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("wrote %v, want %v:\n%s", kinds, tt.want, strings.Join(got, "\n"))
			}
		})
	}
}

func seq0(l string) string {
	i := strings.Index(l, `"seq0":`) + len(`"seq0":`)
	j := strings.Index(l[i:], ",")
	return l[i : i+j]
}

func TestWriterRefusals(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	if err := w.WriteEvent(mustEvents(t, strings.TrimSpace(ev(0, "a")))[0]); RuleOf(err) != RuleInvalidEvent {
		t.Fatalf("event before header: err = %v", err)
	}
	w = NewWriter(&out)
	if err := w.WriteHeader(dshq.HeaderRecord{Header: dshq.Header{ID: "s", Cwd: dshq.Str("rel")}}); RuleOf(err) != RuleHeader {
		t.Fatalf("relative cwd: err = %v", err)
	}
	w = NewWriter(&out)
	if err := w.WriteHeader(dshq.HeaderRecord{Header: dshq.Header{ID: "s"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEvent(dshq.Event{Seq: 0}); RuleOf(err) != RuleInvalidEvent {
		t.Fatalf("event without Raw: err = %v", err)
	}
}

// TestGoldenPackedFile: testdata/packed.jsonl, a hand-written file with every
// row kind, expands to testdata/packed.expanded.jsonl (regenerate with
// -update), and re-packs to itself.
func TestGoldenPackedFile(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "packed.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	h, evs, err := ReadAll(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var unpacked, packed bytes.Buffer
	for _, c := range []struct {
		buf  *bytes.Buffer
		opts []WriterOption
	}{{&unpacked, []WriterOption{WithPacking(false)}}, {&packed, nil}} {
		w := NewWriter(c.buf, c.opts...)
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if err := w.WriteEvent(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	goldenPath := filepath.Join("testdata", "packed.expanded.jsonl")
	golden.Check(t, goldenPath, unpacked.Bytes())
	if !bytes.Equal(packed.Bytes(), in) {
		t.Errorf("re-packing differs from the input:\n%s", packed.Bytes())
	}
}

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"cwd": `/tmp/a "b"\c`, "sessionId": "{{cwd}}"}
	tests := []struct{ name, in, want string }{
		{"a line without placeholders is unchanged", `{"a":"b"}`, `{"a":"b"}`},
		{"values are JSON-escaped", `{"cwd":"{{cwd}}/x"}`, `{"cwd":"/tmp/a \"b\"\\c/x"}`},
		{"substitution is one pass", `{"id":"{{sessionId}}"}`, `{"id":"{{cwd}}"}`},
		{"other placeholders stay literal", `{"s":"{{system}}","t":"{{tools}}"}`, `{"s":"{{system}}","t":"{{tools}}"}`},
		{"every occurrence is replaced", `["{{cwd}}","{{cwd}}"]`, `["/tmp/a \"b\"\\c","/tmp/a \"b\"\\c"]`},
		{"unbalanced braces are kept", `{"a":"{{{{cwd}}}}"}`, `{"a":"{{/tmp/a \"b\"\\c}}"}`},
		{"an unterminated placeholder is kept", `{"a":"{{cwd"}`, `{"a":"{{cwd"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(Substitute([]byte(tt.in), vars)); got != tt.want {
				t.Fatalf("Substitute = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestFixturePlaceholders(t *testing.T) {
	tests := []struct {
		name, header, line, cwd, text string
	}{
		{"a {{cwd}}/workspace header collapses to the workspace root",
			`{"type":"session","version":0,"id":"{{sessionId}}","createdAt":1,"cwd":"{{cwd}}/workspace"}`,
			`{"type":"a","seq":0,"time":0,"data":"{{cwd}}/workspace/f and {{cwd}} in {{sessionId}} {{tools}}"}`,
			"/ws", `"/ws/f and /ws in fresh {{tools}}"`},
		{"a {{cwd}} header keeps /workspace elsewhere",
			`{"type":"session","version":0,"id":"{{sessionId}}","createdAt":1,"cwd":"{{cwd}}"}`,
			`{"type":"a","seq":0,"time":0,"data":"{{cwd}}/workspace/f"}`,
			"/ws", `"/ws/workspace/f"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, evs, err := ReadAll(strings.NewReader(tt.header+"\n"+tt.line+"\n"), WithFixturePlaceholders("/ws", "fresh"))
			if err != nil {
				t.Fatal(err)
			}
			if h.Header.ID != "fresh" || *h.Header.Cwd != tt.cwd || string(evs[0].Data) != tt.text {
				t.Fatalf("got id %q cwd %q data %s", h.Header.ID, *h.Header.Cwd, evs[0].Data)
			}
		})
	}
}

func TestWriterZstdFrames(t *testing.T) {
	h, err := ParseHeader([]byte(strings.TrimSpace(hdr)))
	if err != nil {
		t.Fatal(err)
	}
	evs := mustEvents(t, strings.TrimSpace(ev(0, "a")), strings.TrimSpace(ev(1, "b")), strings.TrimSpace(ev(2, "c")))
	var out bytes.Buffer
	w := NewWriter(&out, WithZstd())
	if err := w.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if err := w.WriteEvent(e); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// The same frames encoded one by one, with the same settings.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(true), zstd.WithLowerEncoderMem(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var want []byte
	for _, frame := range []string{hdr, ev(0, "a"), ev(1, "b") + ev(2, "c")} {
		want = enc.EncodeAll([]byte(frame), want)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Fatalf("frames differ from header / first batch / second batch")
	}
	_, back, err := ReadAll(&out)
	if err != nil || len(back) != 3 {
		t.Fatalf("reread: %d events, %v", len(back), err)
	}
}

func TestWriterRefusesAnInvalidRawHeader(t *testing.T) {
	w := NewWriter(io.Discard)
	err := w.WriteHeader(dshq.HeaderRecord{Raw: []byte(`{"type":"session"}`)})
	if RuleOf(err) != RuleHeader {
		t.Fatalf("err = %v, want %s", err, RuleHeader)
	}
	if err2 := w.WriteHeader(dshq.HeaderRecord{Header: dshq.Header{ID: "s"}}); err2 != err {
		t.Fatalf("error is not sticky: %v", err2)
	}
}
