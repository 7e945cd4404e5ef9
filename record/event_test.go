package record

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/dshq/dshq"
)

func TestParseEventKeepsTheRecordExactly(t *testing.T) {
	tests := []struct {
		name, in, raw string
	}{
		{"a compact record is kept byte for byte",
			`{"type":"x/y","seq":0,"time":1,"data":{"b":1,"a":[1.50,2e3,"<&>\u2028"]}}`,
			`{"type":"x/y","seq":0,"time":1,"data":{"b":1,"a":[1.50,2e3,"<&>\u2028"]}}`},
		{"insignificant whitespace is removed",
			" {\"type\" : \"t\",\r\n\t\"seq\": 3, \"time\": -5, \"data\": [ 1 , { } ] } ",
			`{"type":"t","seq":3,"time":-5,"data":[1,{}]}`},
		{"raw U+2028 and HTML characters stay raw",
			"{\"type\":\"t\",\"seq\":0,\"time\":0,\"data\":\"\u2028<>&é\"}",
			"{\"type\":\"t\",\"seq\":0,\"time\":0,\"data\":\"\u2028<>&é\"}"},
		{"huge integers in data stay verbatim",
			`{"type":"t","seq":0,"time":0,"data":123456789012345678901234567890}`,
			`{"type":"t","seq":0,"time":0,"data":123456789012345678901234567890}`},
		{"a lone surrogate escape is kept",
			`{"type":"t","seq":0,"time":0,"data":"\ud800"}`,
			`{"type":"t","seq":0,"time":0,"data":"\ud800"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := ParseEvent([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(ev.Raw) != tt.raw {
				t.Fatalf("Raw = %s, want %s", ev.Raw, tt.raw)
			}
		})
	}
}

func TestParseEventDecodesTheEnvelope(t *testing.T) {
	in := `{"type":"user/message","seq":9007199254740991,"time":-12,"data":{"x":1},"surfaceOp":{"op":"replace","start":1,"end":2},"sourceEventSeqs":[1,2],"ignorable":true}`
	ev, err := ParseEvent([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := dshq.Event{Type: "user/message", Seq: MaxSafeInteger, Time: -12, Data: []byte(`{"x":1}`),
		SurfaceOp: []byte(`{"op":"replace","start":1,"end":2}`), SourceEventSeqs: []byte(`[1,2]`), Ignorable: true}
	if ev.Type != want.Type || ev.Seq != want.Seq || ev.Time != want.Time || !bytes.Equal(ev.Data, want.Data) ||
		!bytes.Equal(ev.SurfaceOp, want.SurfaceOp) || !bytes.Equal(ev.SourceEventSeqs, want.SourceEventSeqs) || !ev.Ignorable {
		t.Fatalf("ParseEvent = %+v", ev)
	}
	ev, err = ParseEvent([]byte(`{"type":"a\u002fb","seq":1.0,"time":1e3,"data":null,"ignorable":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "a/b" || ev.Seq != 1 || ev.Time != 1000 || string(ev.Data) != "null" || ev.Ignorable || ev.SurfaceOp != nil {
		t.Fatalf("ParseEvent = %+v", ev)
	}
}

func TestParseEventRefusesWhatCannotRoundTrip(t *testing.T) {
	ok := `"type":"t","seq":0,"time":0`
	tests := []struct {
		name string
		in   string
		rule Rule
	}{
		{"an empty record", ``, RuleInvalidJSON},
		{"a blank record", "  \t", RuleInvalidJSON},
		{"an array", `[1]`, RuleNotObject},
		{"a string", `"x"`, RuleNotObject},
		{"truncated JSON", `{"type":"t"`, RuleInvalidJSON},
		{"trailing data", `{` + ok + `,"data":1}x`, RuleInvalidJSON},
		{"two records on one line", `{` + ok + `,"data":1}{}`, RuleInvalidJSON},
		{"a trailing comma", `{` + ok + `,"data":1,}`, RuleInvalidJSON},
		{"a NUL outside strings", "{" + ok + ",\"data\":1\x00}", RuleInvalidJSON},
		{"a raw NUL inside a string", "{" + ok + ",\"data\":\"a\x00\"}", RuleInvalidJSON},
		{"a raw newline inside a string", "{" + ok + ",\"data\":\"a\nb\"}", RuleInvalidJSON},
		{"a bad escape", `{` + ok + `,"data":"\x"}`, RuleInvalidJSON},
		{"a short unicode escape", `{` + ok + `,"data":"\u12"}`, RuleInvalidJSON},
		{"a signed unicode escape", `{` + ok + `,"data":"\u+123"}`, RuleInvalidJSON},
		{"single quotes", `{'type':1}`, RuleInvalidJSON},
		{"NaN", `{` + ok + `,"data":NaN}`, RuleInvalidJSON},
		{"a leading plus", `{` + ok + `,"data":+1}`, RuleInvalidJSON},
		{"a leading zero", `{` + ok + `,"data":01}`, RuleInvalidJSON},
		{"a bare fraction point", `{` + ok + `,"data":1.}`, RuleInvalidJSON},
		{"invalid UTF-8 in a string", "{" + ok + ",\"data\":\"\xff\"}", RuleInvalidUTF8},
		{"an encoded surrogate in a string", "{" + ok + ",\"data\":\"\xed\xa0\x80\"}", RuleInvalidUTF8},
		{"an overlong encoding in a string", "{" + ok + ",\"data\":\"\xc0\xaf\"}", RuleInvalidUTF8},
		{"a duplicate top-level key", `{` + ok + `,"data":1,"data":2}`, RuleDuplicateKey},
		{"a duplicate nested key", `{` + ok + `,"data":[{"a":1,"b":{"c":1,"c":1}}]}`, RuleDuplicateKey},
		{"a duplicate key spelled with an escape", `{` + ok + `,"data":{"a":1,"\u0061":2}}`, RuleDuplicateKey},
		{"a duplicate key spelled with a surrogate pair", `{` + ok + `,"data":{"😀":1,"\ud83d\ude00":2}}`, RuleDuplicateKey},
		{"a duplicate key in a large object", `{` + ok + `,"data":{` + manyKeys(100) + `,"k7":0}}`, RuleDuplicateKey},
		{"-0", `{` + ok + `,"data":-0}`, RuleNegativeZero},
		{"-0.0", `{` + ok + `,"data":[-0.0]}`, RuleNegativeZero},
		{"-0e5", `{` + ok + `,"data":{"a":-0e5}}`, RuleNegativeZero},
		{"a negative number that underflows to -0", `{` + ok + `,"data":-1e-400}`, RuleNegativeZero},
		{"a number beyond a double", `{` + ok + `,"data":1e400}`, RuleNumberRange},
		{"a huge exponent", `{` + ok + `,"data":1e99999999999999999999}`, RuleNumberRange},
		{"nesting deeper than the limit", `{` + ok + `,"data":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, RuleTooDeep},
		{"a missing type", `{"seq":0,"time":0,"data":1}`, RuleEnvelope},
		{"a numeric type", `{"type":1,"seq":0,"time":0,"data":1}`, RuleEnvelope},
		{"a missing seq", `{"type":"t","time":0,"data":1}`, RuleEnvelope},
		{"a missing time", `{"type":"t","seq":0,"data":1}`, RuleEnvelope},
		{"a missing data", `{"type":"t","seq":0,"time":0}`, RuleEnvelope},
		{"a fractional seq", `{"type":"t","seq":1.5,"time":0,"data":1}`, RuleNumberRange},
		{"a non-integral exponent seq", `{"type":"t","seq":15e-1,"time":0,"data":1}`, RuleNumberRange},
		{"a negative seq", `{"type":"t","seq":-1,"time":0,"data":1}`, RuleNumberRange},
		{"a seq beyond 2^53-1", `{"type":"t","seq":9007199254740992,"time":0,"data":1}`, RuleNumberRange},
		{"a string seq", `{"type":"t","seq":"1","time":0,"data":1}`, RuleNumberRange},
		{"a time beyond 2^53-1", `{"type":"t","seq":0,"time":-9007199254740992,"data":1}`, RuleNumberRange},
		{"a fractional time", `{"type":"t","seq":0,"time":0.5,"data":1}`, RuleNumberRange},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			ev, err := ParseEvent([]byte(tt.in))
			if err == nil {
				t.Fatalf("ParseEvent accepted it: %s", ev.Raw)
			}
			var re *RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error %v is not a *RecordError", err)
			}
			if re.Rule != tt.rule {
				t.Fatalf("rule = %s, want %s (%v)", re.Rule, tt.rule, err)
			}
		})
	}
}

func TestParseEventAcceptsDeepNestingUpToTheLimit(t *testing.T) {
	d := MaxDepth - 1 // the record itself is depth 1
	in := `{"type":"t","seq":0,"time":0,"data":` + strings.Repeat("[", d) + strings.Repeat("]", d) + `}`
	if _, err := ParseEvent([]byte(in)); err != nil {
		t.Fatal(err)
	}
}

func TestParseEventRefusesARecordOverTheLimit(t *testing.T) {
	in := make([]byte, DefaultMaxRecordBytes+1)
	_, err := ParseEvent(in)
	if RuleOf(err) != RuleTooLarge {
		t.Fatalf("err = %v, want %s", err, RuleTooLarge)
	}
}

func TestExactInt(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"-7", -7, true}, {"1.0", 1, true}, {"1.000", 1, true},
		{"1e3", 1000, true}, {"1E+3", 1000, true}, {"12.5e1", 125, true}, {"1500e-3", 1, false},
		{"1500e-2", 15, true}, {"0.0", 0, true}, {"0e99999999999", 0, true},
		{"9007199254740991", MaxSafeInteger, true}, {"-9007199254740991", -MaxSafeInteger, true},
		{"9007199254740992", 0, false}, {"9.007199254740991e15", MaxSafeInteger, true},
		{"1.5", 0, false}, {"1e-1", 0, false}, {"1e17", 0, false}, {"-0", 0, false},
		{"100000000000000000000e-5", 1000000000000000, true},
	}
	for _, tt := range tests {
		got, ok := exactInt([]byte(tt.in))
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("exactInt(%s) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	return b.String()
}
