package fold

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/corpus"
)

// handEvent builds an event without the record parser, for inputs the
// parser refuses (e.g. -0) but a caller could still hand to Apply.
func handEvent(typ string, seq int64, data, surfaceOp, sources string) dshq.Event {
	e := dshq.Event{Type: typ, Seq: seq, Time: 1, Data: json.RawMessage(data)}
	if surfaceOp != "" {
		e.SurfaceOp = json.RawMessage(surfaceOp)
	}
	if sources != "" {
		e.SourceEventSeqs = json.RawMessage(sources)
	}
	return e
}

const userData = `{"id":"m","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"x"}]}`

func TestApply_ReplaceBounds(t *testing.T) {
	tests := []struct {
		name   string
		header dshq.HeaderRecord
		op     string
		rule   string // "" = accepted
	}{
		{"G2 refuses -0 as a replace start", g2Header(), `{"op":"replace","start":-0,"end":0}`, RuleSurfaceOp},
		{"G2 refuses -0.0 as a replace end", g2Header(), `{"op":"replace","start":0,"end":-0.0}`, RuleSurfaceOp},
		{"G0 reads -0 as 0", g0Header(), `{"op":"replace","start":-0,"end":0}`, ""},
		{"an exponent that is an integer is a bound", g2Header(), `{"op":"replace","start":0e3,"end":0}`, ""},
		{"a bound beyond the safe integers is refused", g2Header(), `{"op":"replace","start":9007199254740992,"end":0}`, RuleSurfaceOp},
		{"a string bound is refused", g2Header(), `{"op":"replace","start":"0","end":0}`, RuleSurfaceOp},
		{"a null surfaceOp is refused", g2Header(), `null`, RuleSurfaceOp},
		{"an append spelled with an escape is an append", g2Header(), `"\u0061ppend"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.header, Lenient)
			if _, err := s.Apply(handEvent(dshq.TypeUserMessage, 0, userData, `"append"`, "")); err != nil {
				t.Fatal(err)
			}
			_, err := s.Apply(handEvent(dshq.TypeUserMessage, 1, userData, tt.op, "[0]"))
			checkRule(t, err, tt.rule)
		})
	}
}

func TestApply_EnvelopeWithoutRaw(t *testing.T) {
	tests := []struct {
		name string
		e    dshq.Event
		rule string
	}{
		{"an event without a type is refused", dshq.Event{Seq: 0, Data: json.RawMessage(`{}`)}, RuleEnvelope},
		{"an event without data is refused", dshq.Event{Type: "x/y", Seq: 0}, RuleEnvelope},
		{"a time beyond the safe integers is refused", dshq.Event{Type: "x/y", Time: 1 << 60, Data: json.RawMessage(`{}`)}, RuleEnvelope},
		{"a negative seq is not contiguous", dshq.Event{Type: "x/y", Seq: -1, Data: json.RawMessage(`{}`)}, RuleSeq},
		{"a raw record that is not an object is refused", dshq.Event{Type: "x/y", Data: json.RawMessage(`{}`), Raw: json.RawMessage(`[1]`)}, RuleEnvelope},
		{"a raw record without time is refused", dshq.Event{Type: "x/y", Data: json.RawMessage(`{}`), Raw: json.RawMessage(`{"type":"x/y","seq":0,"data":{}}`)}, RuleEnvelope},
		{"surface data that is not JSON is refused", handEvent(dshq.TypeUserMessage, 0, `{"content":`, `"append"`, ""), RuleData},
		{"surface data with an infinite number is refused", handEvent(dshq.TypeUserMessage, 0, `{"n":1e999}`, `"append"`, ""), RuleData},
		{"an unknown type with any data is accepted", dshq.Event{Type: "x/y", Data: json.RawMessage(`"anything"`)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, level := range []Level{Lenient, Strict} {
				_, err := New(g2Header(), level).Apply(tt.e)
				checkRule(t, err, tt.rule)
			}
		})
	}
}

func TestApply_StrictLossless(t *testing.T) {
	e := handEvent("x/y", 0, `{"a":[1,-0.0]}`, "", "")
	if _, err := New(g2Header(), Lenient).Apply(e); err != nil {
		t.Fatalf("Lenient refused an unknown type's data: %v", err)
	}
	_, err := New(g2Header(), Strict).Apply(e)
	checkRule(t, err, RuleLossless)
}

func TestApply_StrictTitle(t *testing.T) {
	tests := []struct {
		name, data, rule string
		// lenientTitle: Lenient takes the title (with empty messageSeqs
		// when they are malformed); only a title without text is skipped.
		lenientTitle bool
	}{
		{"a title without text is refused", `{"title":"","messageSeqs":[],"source":{"kind":"user"}}`, RuleTitle, false},
		{"a title with bad messageSeqs is refused", `{"title":"t","messageSeqs":[-1],"source":{"kind":"user"}}`, RuleTitle, true},
		{"a well-formed title is accepted", `{"title":"t","messageSeqs":[],"source":{"kind":"user"}}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := handEvent("session/title", 0, tt.data, "", "")
			_, err := New(g2Header(), Strict).Apply(e)
			checkRule(t, err, tt.rule)
			s := New(g2Header(), Lenient)
			eff, err := s.Apply(e)
			if err != nil {
				t.Fatalf("Lenient refused a title event: %v", err)
			}
			if (eff.Title != nil) != tt.lenientTitle || (s.Title() != nil) != tt.lenientTitle {
				t.Fatalf("Lenient title change = %v, want %v", eff.Title != nil, tt.lenientTitle)
			}
		})
	}
}

func checkRule(t *testing.T, err error, rule string) {
	t.Helper()
	if rule == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var v *ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("got %v, want a *ValidationError with rule %s", err, rule)
	}
	if v.Rule != rule || v.Message == "" {
		t.Fatalf("got rule %q (%s), want %q", v.Rule, v.Message, rule)
	}
}

func TestKnownType(t *testing.T) {
	for typ, want := range map[string]bool{
		"turn/start": true, "assistant/chunk": true, "assistant/attempt": true,
		"compaction/prune": true, "session/title": true,
		"request/header-delta": false, "prompt/blocked": false, "x/y": false, "": false,
	} {
		if KnownType(typ) != want {
			t.Errorf("KnownType(%q) = %v, want %v", typ, !want, want)
		}
	}
}

func TestText_MatchesTheFold(t *testing.T) {
	h, events := readLog(t, "testdata/golden/semantic-text-of-every-kind-and-reasoning-never-indexed.jsonl")
	r, err := Fold(h, events, Strict)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		if got := Text(e); got != r.Texts[i] {
			t.Errorf("seq %d: Text = %q, fold text %q", i, got, r.Texts[i])
		}
	}
}

func TestUnmarshalBinary_RefusesCorruptInput(t *testing.T) {
	h, events := readLog(t, "testdata/golden/crash-closers-balance-an-interrupted-step.jsonl")
	r, err := Fold(h, events, Lenient)
	if err != nil {
		t.Fatal(err)
	}
	good := mustMarshal(t, r.State)
	cases := map[string][]byte{
		"empty input":          nil,
		"another magic":        append([]byte{'X'}, good[1:]...),
		"a future version":     append([]byte{stateMagic, stateVersion + 1}, good[2:]...),
		"a trailing byte":      append(append([]byte(nil), good...), 0),
		"an unknown format":    append([]byte{stateMagic, stateVersion, 7}, good[3:]...),
		"a huge session id":    append([]byte{stateMagic, stateVersion, 2, 1, 0xff, 0xff, 0xff, 0xff, 0x0f}, good[9:]...),
		"a single-byte prefix": good[:1],
	}
	for i := range good {
		cases["truncated at "+itoa(i)] = good[:i]
	}
	for name, b := range cases {
		t.Run(name+" is refused", func(t *testing.T) {
			s := r.State.Clone()
			err := s.UnmarshalBinary(b)
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("got %v, want ErrCorruptState", err)
			}
			if string(mustMarshal(t, s)) != string(good) {
				t.Fatal("a failed UnmarshalBinary changed the state")
			}
		})
	}
}

// TestCorpus folds every log of the fixture logs and of the deepseek-harness
// corpus under Lenient: each one with contiguous seqs must fold (nothing
// the original accepts is refused), incrementally with a state round trip
// before every event exactly as in one pass, and its closers must apply
// under Strict; a log with a seq gap must be refused naming the seq, and a
// file this test's reader cannot take (a header without a version, a torn
// last line) is record's to refuse.
func TestCorpus(t *testing.T) {
	corpus.Each(t, func(t *testing.T, dir string, shared bool) {
		// unread: files parseLog refuses; gapped: the log with a seq gap.
		unread, gapped, want := []string{"versionless-", "torn-tail"}, "seq-gap", 11
		if shared {
			unread, gapped, want = []string{"acp-snapshot"}, "cordis-tool-round", 141
		}
		paths, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		folded := 0
		for _, path := range paths {
			name := filepath.Base(path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			h, events, err := parseLog(b)
			if err != nil {
				if !slices.ContainsFunc(unread, func(s string) bool { return strings.Contains(name, s) }) {
					t.Errorf("%s: %v", name, err)
				}
				continue
			}
			r, err := Fold(h, events, Lenient)
			if strings.Contains(name, gapped) {
				var v *ValidationError
				if !errors.As(err, &v) || v.Rule != RuleSeq {
					t.Errorf("%s: got %v, want a seq gap", name, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			folded++
			checkClosers(t, r.State)
			checkIncremental(t, h, events, Lenient)
		}
		if folded != want {
			t.Errorf("folded %d logs, want %d", folded, want)
		}
	})
}

func TestCheckLossless(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{`{"a":-0}`, false},
		{`[1,-0.0e5]`, false},
		{`{"n":1e999}`, false},
		{`{"n":-1e999}`, false},
		{`{"s":"-0","k-0":1}`, true},
		{`[-1,0,0.5,-0.5,1e3,-2E-3]`, true},
		{`{"a":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if err := checkLossless([]byte(tt.in)); (err == nil) != tt.ok {
				t.Fatalf("checkLossless(%s) = %v, want ok=%v", tt.in, err, tt.ok)
			}
		})
	}
}
