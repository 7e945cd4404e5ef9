package record

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dshq/dshq"
)

func i64(n int64) *int64 { return &n }

func TestParseHeader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want dshq.HeaderRecord
	}{
		{"a version 0 header without seedLength is unseeded",
			`{"type":"session","version":0,"id":"s1","createdAt":5,"cwd":"/w","delegationDepth":0}`,
			dshq.HeaderRecord{FormatVersion: 0, Header: dshq.Header{Version: 2, ID: "s1", CreatedAt: 5, Cwd: dshq.Str("/w"), DelegationDepth: i64(0)}}},
		{"a version 0 header with seedLength is seeded with that count",
			`{"type":"session","version":0,"id":"s1","createdAt":5,"parentSession":"p","seedLength":7,"origin":"subagent","delegationDepth":2,"agentPreset":"x"}`,
			dshq.HeaderRecord{FormatVersion: 0, InheritedEventCount: 7, Header: dshq.Header{Version: 2, ID: "s1", CreatedAt: 5,
				ParentSession: dshq.Str("p"), IsSeeded: true, Origin: "subagent", DelegationDepth: i64(2), AgentPreset: dshq.Str("x")}}},
		{"a version 0 header without delegationDepth reads it as absent",
			`{"type":"session","version":0,"id":"s1","createdAt":0}`,
			dshq.HeaderRecord{Header: dshq.Header{Version: 2, ID: "s1"}}},
		{"a version 0 header with seedLength 0 is seeded with nothing",
			`{"type":"session","version":0,"id":"s1","createdAt":0,"seedLength":0}`,
			dshq.HeaderRecord{Header: dshq.Header{Version: 2, ID: "s1", IsSeeded: true}}},
		{"a version 2 header with inheritedEventCount",
			`{"type":"session","version":2,"id":"a.b","createdAt":1,"isSeeded":true,"inheritedEventCount":4}`,
			dshq.HeaderRecord{FormatVersion: 2, InheritedEventCount: 4, Header: dshq.Header{Version: 2, ID: "a.b", CreatedAt: 1, IsSeeded: true}}},
		{"a version 2 header without inheritedEventCount counts 0",
			`{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false}`,
			dshq.HeaderRecord{FormatVersion: 2, Header: dshq.Header{Version: 2, ID: "s", CreatedAt: 1}}},
		{"a version 2 header of a converted session names its harness",
			`{"type":"session","version":2,"id":"cc-1","createdAt":1,"cwd":"/w","isSeeded":false,"harness":"claude-code"}`,
			dshq.HeaderRecord{FormatVersion: 2, Header: dshq.Header{Version: 2, ID: "cc-1", CreatedAt: 1, Cwd: dshq.Str("/w"), Harness: dshq.HarnessClaudeCode}}},
		{"a harness name no converter writes yet is read",
			`{"type":"session","version":2,"id":"g","createdAt":1,"isSeeded":false,"harness":"gemini-cli.v2"}`,
			dshq.HeaderRecord{FormatVersion: 2, Header: dshq.Header{Version: 2, ID: "g", CreatedAt: 1, Harness: "gemini-cli.v2"}}},
		{"keys in any order are read",
			`{"createdAt":1,"isSeeded":false,"id":"s","version":2.0,"type":"session"}`,
			dshq.HeaderRecord{FormatVersion: 2, Header: dshq.Header{Version: 2, ID: "s", CreatedAt: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHeader([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Raw) != tt.in {
				t.Errorf("Raw = %s, want the input", got.Raw)
			}
			got.Raw = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseHeader =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseHeaderRefusals(t *testing.T) {
	tests := []struct {
		name string
		in   string
		rule Rule
		msg  string
	}{
		{"a version from a newer harness", `{"type":"session","version":3,"id":"s","createdAt":1}`, RuleFormatUnsupported, "newer harness — upgrade"},
		{"version 1 as older with no upgrade path", `{"type":"session","version":1,"id":"s","createdAt":1}`, RuleFormatUnsupported, "no upgrade path"},
		{"a fractional version before any shape check", `{"type":"nope","version":2.5}`, RuleFormatUnsupported, "2.5"},
		{"a negative version", `{"version":-1}`, RuleFormatUnsupported, "older"},
		{"a missing version as a shape error", `{"type":"session","id":"s","createdAt":1,"delegationDepth":0}`, RuleHeader, "version is missing"},
		{"a string version as a shape error", `{"type":"session","version":"0","id":"s","createdAt":1}`, RuleHeader, "not a number"},
		{"a wrong type", `{"type":"sess","version":0,"id":"s","createdAt":1}`, RuleHeader, "type"},
		{"a missing id", `{"type":"session","version":0,"createdAt":1}`, RuleHeader, "id is missing"},
		{"a numeric id", `{"type":"session","version":0,"id":1,"createdAt":1}`, RuleHeader, "id is 1"},
		{"an invalid id", `{"type":"session","version":0,"id":"a\u0000","createdAt":1}`, RuleHeader, "control character"},
		{"an empty id", `{"type":"session","version":0,"id":"","createdAt":1}`, RuleHeader, "empty"},
		{"a missing createdAt", `{"type":"session","version":0,"id":"s"}`, RuleHeader, "createdAt is missing"},
		{"a negative createdAt", `{"type":"session","version":0,"id":"s","createdAt":-1}`, RuleHeader, "createdAt"},
		{"a fractional createdAt", `{"type":"session","version":0,"id":"s","createdAt":1.5}`, RuleHeader, "createdAt"},
		{"an unsafe createdAt", `{"type":"session","version":0,"id":"s","createdAt":9007199254740992}`, RuleHeader, "createdAt"},
		{"a relative cwd", `{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"work"}`, RuleHeader, "absolute path"},
		{"an unsubstituted cwd", `{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"{{cwd}}/workspace"}`, RulePlaceholder, "{{cwd}}"},
		{"a null cwd", `{"type":"session","version":0,"id":"s","createdAt":1,"cwd":null}`, RuleHeader, "cwd is null"},
		{"a numeric parentSession", `{"type":"session","version":0,"id":"s","createdAt":1,"parentSession":3}`, RuleHeader, "parentSession"},
		{"another origin", `{"type":"session","version":0,"id":"s","createdAt":1,"origin":"user"}`, RuleHeader, "origin"},
		{"a negative delegationDepth", `{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":-1}`, RuleHeader, "delegationDepth"},
		{"a numeric agentPreset", `{"type":"session","version":0,"id":"s","createdAt":1,"agentPreset":1}`, RuleHeader, "agentPreset"},
		{"a retired sandboxMode", `{"type":"session","version":0,"id":"s","createdAt":1,"sandboxMode":"x"}`, RuleHeader, "retired policy baseline"},
		{"a retired approvalPolicy", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"approvalPolicy":"x"}`, RuleHeader, "retired policy baseline"},
		{"a fractional seedLength", `{"type":"session","version":0,"id":"s","createdAt":1,"seedLength":0.5}`, RuleHeader, "seedLength"},
		{"isSeeded in version 0", `{"type":"session","version":0,"id":"s","createdAt":1,"isSeeded":true}`, RuleHeader, "isSeeded"},
		{"seedLength in version 2", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":true,"seedLength":1}`, RuleHeader, "seedLength"},
		{"a version 2 header without isSeeded", `{"type":"session","version":2,"id":"s","createdAt":1}`, RuleHeader, "isSeeded is missing"},
		{"a non-boolean isSeeded", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":1}`, RuleHeader, "boolean"},
		{"an inherited count without isSeeded", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"inheritedEventCount":2}`, RuleHeader, "isSeeded is false"},
		{"an empty harness", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"harness":""}`, RuleHeader, "not a harness name"},
		{"an uppercase harness", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"harness":"Codex"}`, RuleHeader, "not a harness name"},
		{"a harness with a slash", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"harness":"a/b"}`, RuleHeader, "not a harness name"},
		{"a harness led by a dash", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"harness":"-x"}`, RuleHeader, "not a harness name"},
		{"a numeric harness", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"harness":1}`, RuleHeader, "harness is 1"},
		{"an over-long harness", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"harness":"` + strings.Repeat("a", MaxHarnessBytes+1) + `"}`, RuleHeader, "not a harness name"},
		{"an unknown key in version 2", `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"title":"x"}`, RuleHeader, "unknown key"},
		{"a duplicate key", `{"type":"session","version":0,"version":0,"id":"s","createdAt":1}`, RuleDuplicateKey, "version"},
		{"an array", `[]`, RuleNotObject, "object"},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			_, err := ParseHeader([]byte(tt.in))
			if err == nil {
				t.Fatal("ParseHeader accepted it")
			}
			if RuleOf(err) != tt.rule || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want rule %s mentioning %q", err, tt.rule, tt.msg)
			}
			if (tt.rule == RuleFormatUnsupported) != errors.Is(err, ErrFormatUnsupported) {
				t.Errorf("errors.Is(ErrFormatUnsupported) is wrong for %v", err)
			}
		})
	}
}

func TestEncodeHeader(t *testing.T) {
	tests := []struct {
		name string
		rec  dshq.HeaderRecord
		want string
	}{
		{"a minimal header",
			dshq.HeaderRecord{Header: dshq.Header{Version: 2, ID: "s", CreatedAt: 3}},
			`{"type":"session","version":2,"id":"s","createdAt":3,"isSeeded":false}`},
		{"every field in the writer's order",
			dshq.HeaderRecord{InheritedEventCount: 9, Header: dshq.Header{ID: "会话 <&>\u2028", CreatedAt: 3, Cwd: dshq.Str("/a\"b\\c\td"),
				ParentSession: dshq.Str("p"), IsSeeded: true, Origin: "subagent", DelegationDepth: i64(1), AgentPreset: dshq.Str("x\u0001")}},
			"{\"type\":\"session\",\"version\":2,\"id\":\"会话 <&>\u2028\",\"createdAt\":3,\"cwd\":\"/a\\\"b\\\\c\\td\",\"parentSession\":\"p\",\"isSeeded\":true,\"origin\":\"subagent\",\"delegationDepth\":1,\"agentPreset\":\"x\\u0001\",\"inheritedEventCount\":9}"},
		{"a converted child session: harness after agentPreset, before inheritedEventCount",
			dshq.HeaderRecord{Header: dshq.Header{ID: "cc-p-agent-a", CreatedAt: 3, ParentSession: dshq.Str("cc-p"), Origin: "subagent",
				DelegationDepth: i64(1), Harness: dshq.HarnessClaudeCode}},
			`{"type":"session","version":2,"id":"cc-p-agent-a","createdAt":3,"parentSession":"cc-p","isSeeded":false,"origin":"subagent","delegationDepth":1,"harness":"claude-code"}`},
		{"a seeded header with nothing inherited",
			dshq.HeaderRecord{Header: dshq.Header{ID: "s", IsSeeded: true}},
			`{"type":"session","version":2,"id":"s","createdAt":0,"isSeeded":true,"inheritedEventCount":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EncodeHeader(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("EncodeHeader =\n%s\nwant\n%s", got, tt.want)
			}
			back, err := ParseHeader(got)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.rec
			want.Header.Version, want.FormatVersion, back.Raw = 2, 2, nil
			if !reflect.DeepEqual(back, want) {
				t.Fatalf("round trip =\n%+v\nwant\n%+v", back, want)
			}
		})
	}
}

func TestEncodeHeaderRefusals(t *testing.T) {
	tests := []struct {
		name string
		rec  dshq.HeaderRecord
	}{
		{"an invalid id", dshq.HeaderRecord{Header: dshq.Header{ID: "a\nb"}}},
		{"a relative cwd", dshq.HeaderRecord{Header: dshq.Header{ID: "s", Cwd: dshq.Str("x")}}},
		{"invalid UTF-8", dshq.HeaderRecord{Header: dshq.Header{ID: "s", AgentPreset: dshq.Str("\xff")}}},
		{"a negative createdAt", dshq.HeaderRecord{Header: dshq.Header{ID: "s", CreatedAt: -1}}},
		{"an unknown origin", dshq.HeaderRecord{Header: dshq.Header{ID: "s", Origin: "x"}}},
		{"an inherited count without isSeeded", dshq.HeaderRecord{InheritedEventCount: 1, Header: dshq.Header{ID: "s"}}},
		{"version 7", dshq.HeaderRecord{Header: dshq.Header{Version: 7, ID: "s"}}},
		{"an invalid harness name", dshq.HeaderRecord{Header: dshq.Header{ID: "s", Harness: "Claude Code"}}},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			if b, err := EncodeHeader(tt.rec); err == nil {
				t.Fatalf("EncodeHeader accepted it: %s", b)
			}
		})
	}
}
