package record

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/corpus"
)

// seedFiles returns up to n of the smallest fixture logs and shared corpus
// files (when it is there), realized with fixed placeholders so that they
// read.
func seedFiles(f *testing.F, n int) [][]byte {
	paths, _ := filepath.Glob(filepath.Join(corpus.Fixtures(f), "*.jsonl"))
	if dir, ok := corpus.Optional(f); ok {
		shared, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		paths = append(paths, shared...)
	}
	var files [][]byte
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		raw = bytes.ReplaceAll(raw, []byte("{{cwd}}"), []byte("/ws"))
		files = append(files, bytes.ReplaceAll(raw, []byte("{{sessionId}}"), []byte("seed")))
	}
	sort.Slice(files, func(i, j int) bool { return len(files[i]) < len(files[j]) })
	return files[:min(n, len(files))]
}

// seedLines returns the distinct lines of the seed files, at most n.
func seedLines(f *testing.F, n int) [][]byte {
	seen := map[string]bool{}
	var lines [][]byte
	for _, file := range seedFiles(f, 200) {
		for _, l := range bytes.Split(file, []byte("\n")) {
			if len(l) > 0 && !seen[string(l)] && len(lines) < n {
				seen[string(l)] = true
				lines = append(lines, l)
			}
		}
	}
	return lines
}

func FuzzParseEvent(f *testing.F) {
	for _, l := range seedLines(f, 300) {
		f.Add(l)
	}
	f.Add([]byte(`{"type":"t","seq":1e0,"time":-0.0,"data":[1,{"a":"\ud800"}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, err := ParseEvent(in)
		if err != nil {
			if RuleOf(err) == "" {
				t.Fatalf("error %v is not a *RecordError", err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("accepted invalid JSON %q", in)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, in); err != nil || !bytes.Equal(compact.Bytes(), ev.Raw) {
			t.Fatalf("Raw %s is not the compact input %s", ev.Raw, compact.Bytes())
		}
		again, err := ParseEvent(ev.Raw)
		if err != nil {
			t.Fatalf("Raw %s does not re-parse: %v", ev.Raw, err)
		}
		if !reflect.DeepEqual(again, ev) {
			t.Fatalf("re-parse changed the event: %+v vs %+v", again, ev)
		}
	})
}

func FuzzParseHeader(f *testing.F) {
	for _, file := range seedFiles(f, 200) {
		f.Add(file[:bytes.IndexByte(file, '\n')])
	}
	f.Add([]byte(`{"type":"session","version":2,"id":"a.b","createdAt":1,"isSeeded":true,"inheritedEventCount":4}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := ParseHeader(in)
		if err != nil {
			if RuleOf(err) == "" {
				t.Fatalf("error %v is not a *RecordError", err)
			}
			return
		}
		again, err := ParseHeader(h.Raw)
		if err != nil || !reflect.DeepEqual(again, h) {
			t.Fatalf("Raw re-parse: %+v, %v; want %+v", again, err, h)
		}
		enc, err := EncodeHeader(h)
		if err != nil {
			t.Fatalf("EncodeHeader of an accepted header: %v", err)
		}
		v2, err := ParseHeader(enc)
		if err != nil {
			t.Fatalf("encoded header %s does not parse: %v", enc, err)
		}
		if !reflect.DeepEqual(v2.Header, h.Header) || v2.InheritedEventCount != h.InheritedEventCount || v2.FormatVersion != 2 {
			t.Fatalf("encode round trip: %+v vs %+v", v2, h)
		}
	})
}

func FuzzReader(f *testing.F) {
	for _, file := range seedFiles(f, 12) {
		f.Add(file)
	}
	small := []byte(hdr + `{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[1,-2],"texts":["a","b","c"]}}` + "\n")
	f.Add(small)
	// The same log as .jsonl.zstd: a header frame and a batch frame.
	_, evs, err := ReadAll(bytes.NewReader(small))
	if err != nil {
		f.Fatal(err)
	}
	h, _ := ParseHeader([]byte(hdr[:len(hdr)-1]))
	var z bytes.Buffer
	w := NewWriter(&z, WithZstd())
	_ = w.WriteHeader(h)
	for _, e := range evs {
		_ = w.WriteEvent(e)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(z.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		h, evs, err := ReadAll(bytes.NewReader(in), WithMaxRecordBytes(1<<20))
		if err != nil {
			if RuleOf(err) == "" {
				t.Fatalf("error %v is not a *RecordError", err)
			}
			return
		}
		for _, opts := range [][]WriterOption{nil, {WithPacking(false)}} {
			var out bytes.Buffer
			w := NewWriter(&out, opts...)
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
			h2, evs2, err := ReadAll(&out)
			if err != nil {
				t.Fatalf("written log does not read: %v", err)
			}
			if !bytes.Equal(h2.Raw, h.Raw) || len(evs2) != len(evs) {
				t.Fatalf("round trip changed the log")
			}
			for i := range evs {
				if !reflect.DeepEqual(evs[i], evs2[i]) {
					t.Fatalf("event %d changed: %s vs %s", i, evs[i].Raw, evs2[i].Raw)
				}
			}
		}
	})
}

func FuzzSubjectToken(f *testing.F) {
	for _, s := range []string{"session-1", "a.b", "~x", "..", "会话", "a\x00", "", "~YWJj"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if tok, err := SubjectToken(s); err == nil {
			back, err := ParseSubjectToken(tok)
			if err != nil || back != s {
				t.Fatalf("ParseSubjectToken(SubjectToken(%q)) = %q, %v", s, back, err)
			}
		} else if ValidateSessionID(s) == nil {
			t.Fatalf("SubjectToken refused a valid id %q: %v", s, err)
		}
		if id, err := ParseSubjectToken(s); err == nil {
			tok, err := SubjectToken(id)
			if err != nil || tok != s {
				t.Fatalf("SubjectToken(ParseSubjectToken(%q)) = %q, %v", s, tok, err)
			}
		}
	})
}

// FuzzWriterPacking builds runs of assistant/chunk deltas from the input
// (kinds, blocks, tool ids and names, time steps, seq jumps, non-canonical
// spellings) and checks that packing them reads back to the same records.
func FuzzWriterPacking(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 3})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 2, 5, 2, 5, 2, 5, 10, 1, 10, 1, 10, 1})
	f.Add([]byte{7, 7, 7, 7, 9, 200, 255, 128, 64, 32, 16, 8})
	f.Fuzz(func(t *testing.T, in []byte) {
		kinds := []string{"text-delta", "reasoning-delta", "tool-call-delta"}
		var lines []string
		seq, tm := 0, 1_000
		for i := 0; i+1 < len(in) && len(lines) < 64; i += 2 {
			a, b := in[i], in[i+1]
			kind := kinds[int(a)%3]
			tm += int(int8(b)) * 1000
			if a&0x80 != 0 {
				seq++ // a gap in the seqs ends a run (and is kept by the writer)
			}
			body := `"text":"t\"` + itoa(int(b)) + `\u00e9"`
			if kind == "tool-call-delta" {
				body = `"id":"c` + itoa(int(a>>4)%2) + `",`
				if a&0x08 != 0 {
					body += `"name":"n",`
				}
				body += `"argumentsDelta":"{\\` + itoa(int(b)) + `"`
			}
			index := itoa(int(a>>5) % 2)
			if b&0x80 != 0 && b&0x01 != 0 {
				index += ".0" // a non-canonical spelling stays verbatim
			}
			lines = append(lines, `{"type":"assistant/chunk","seq":`+itoa(seq)+`,"time":`+itoa(tm)+
				`,"data":{"turn":1,"step":1,"chunk":{"type":"`+kind+`","index":`+index+`,`+body+`}}}`)
			seq++
		}
		var evs []dshq.Event
		for _, l := range lines {
			e, err := ParseEvent([]byte(l))
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			evs = append(evs, e)
		}
		h, _ := ParseHeader([]byte(hdr[:len(hdr)-1]))
		var out bytes.Buffer
		w := NewWriter(&out)
		_ = w.WriteHeader(h)
		for i, e := range evs {
			if err := w.WriteEvent(e); err != nil {
				t.Fatal(err)
			}
			if len(in) > 0 && int(in[0]) == i {
				_ = w.Flush()
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r := NewReader(&out)
		for i := range evs {
			got, err := r.Next()
			if err != nil && RuleOf(err) != RuleSeqGap {
				t.Fatalf("event %d: %v", i, err)
			}
			if err != nil {
				return // a seq gap the input made; the records before it matched
			}
			if !bytes.Equal(got.Raw, evs[i].Raw) {
				t.Fatalf("event %d reread as %s, want %s", i, got.Raw, evs[i].Raw)
			}
		}
	})
}
