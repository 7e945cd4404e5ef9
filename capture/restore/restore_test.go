package restore

import (
	"testing"
	"time"

	"github.com/dshq/dshq/capture"
)

func TestRewriteTouchesOnlyTheDirectoriesTheHarnessReads(t *testing.T) {
	m := Map{}.Add(Pair{Old: "/home/a/proj", New: "/Users/b/app"})
	cases := []struct {
		f         capture.Format
		in, want  string
		unchanged bool
	}{
		{capture.FormatClaudeCode, `{"cwd":"/home/a/proj","message":{"content":"cd /home/a/proj","cwd":"/home/a/proj"}}`,
			`{"cwd":"/Users/b/app","message":{"content":"cd /home/a/proj","cwd":"/home/a/proj"}}`, false},
		{capture.FormatClaudeCode, `{"type": "user", "cwd" : "/home/a/proj/sub", "x":[{"cwd":"/home/a/proj"}]}`,
			`{"type": "user", "cwd" : "/Users/b/app/sub", "x":[{"cwd":"/home/a/proj"}]}`, false},
		{capture.FormatClaudeCode, `{"attachment":{"type":"environment","snapshot":{"workingDirectory":"/home/a/proj"}},"cwd":"/home/a/projX"}`,
			`{"attachment":{"type":"environment","snapshot":{"workingDirectory":"/Users/b/app"}},"cwd":"/home/a/projX"}`, false},
		{capture.FormatCodex, `{"type":"session_meta","payload":{"id":"x","cwd":"/home/a/proj","git":{"cwd":"/home/a/proj"}}}`,
			`{"type":"session_meta","payload":{"id":"x","cwd":"/Users/b/app","git":{"cwd":"/home/a/proj"}}}`, false},
		{capture.FormatCodex, `{"payload":{"cwd":"/home/a/proj"},"type":"turn_context"}`, `{"payload":{"cwd":"/Users/b/app"},"type":"turn_context"}`, false},
		{capture.FormatCodex, `{"type":"response_item","payload":{"cwd":"/home/a/proj"}}`, "", true},
		{capture.FormatClaudeCode, `not json {"cwd":"/home/a/proj"}`, "", true},
		{capture.FormatClaudeCode, `{"cwd":"/home/a/proj"} {"cwd":"/home/a/proj"}`, "", true},
		{capture.FormatClaudeCode, `{"cwd":"/home/a/proj"`, "", true},
		{capture.FormatClaudeCode, `{"cwd":"/home/a/pr\u006fj"}`, `{"cwd":"/Users/b/app"}`, false},
	}
	for _, c := range cases {
		got, changed := Rewrite(c.f, []byte(c.in), m)
		if c.unchanged {
			if changed || string(got) != c.in {
				t.Errorf("%s: rewritten to %s", c.in, got)
			}
			continue
		}
		if !changed || string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
		// The rewritten line is recognised as the stored one.
		if ok, pairs := Equivalent(c.f, []byte(c.in), got, nil); !ok || len(pairs) == 0 {
			t.Errorf("%s: not equivalent to its rewrite", c.in)
		}
	}
}

func TestEquivalentRefusesAnyOtherChange(t *testing.T) {
	f := capture.FormatClaudeCode
	stored := `{"cwd":"/a","message":"hi"}`
	for _, file := range []string{`{"cwd":"/b","message":"ho"}`, `{"cwd":"/b","message":"hi","x":1}`, `{"cwd":"/b"}`, `{"message":"hi","cwd":"/b"}`} {
		if ok, _ := Equivalent(f, []byte(stored), []byte(file), nil); ok {
			t.Errorf("%s taken for %s", file, stored)
		}
	}
	ok, m := Equivalent(f, []byte(stored), []byte(`{"cwd":"/b","message":"hi"}`), nil)
	if !ok || m["/a"] != "/b" {
		t.Fatalf("%v %v", ok, m)
	}
	// One directory is rewritten one way throughout.
	if ok, _ := Equivalent(f, []byte(stored), []byte(`{"cwd":"/c","message":"hi"}`), m); ok {
		t.Error("/a became /b, then /c")
	}
	if ok, _ := Equivalent(f, []byte(stored), []byte(stored), m); !ok {
		t.Error("an equal line")
	}
}

func TestPaths(t *testing.T) {
	if k := ClaudeProjectKey("/tmp/i25w/a_b.c d~e"); k != "-tmp-i25w-a-b-c-d-e" {
		t.Errorf("key %q", k) // as Claude Code 2.1.332 names it (measured)
	}
	if p := ClaudeSubagent("/p", "/w", "s", "a1", "2.0.29"); p != "/p/-w/agent-a1.jsonl" {
		t.Error(p)
	}
	for _, v := range []string{"2.1.2", "2.1.39", ""} {
		if p := ClaudeSubagent("/p", "/w", "s", "a1", v); p != "/p/-w/s/subagents/agent-a1.jsonl" {
			t.Error(v, p)
		}
	}
	if !VersionLess("2.0.29", "2.1.2") || VersionLess("2.1.10", "2.1.2") || VersionLess("2.1.2", "2.1.2") {
		t.Error("VersionLess")
	}
	at := time.Date(2026, 2, 23, 20, 34, 25, 0, time.FixedZone("CET", 3600))
	if p := CodexRollout("/c/sessions", at, "019c"); p != "/c/sessions/2026/02/23/rollout-2026-02-23T20-34-25-019c.jsonl" {
		t.Error(p)
	}
	if m := (Map{}).Add(Pair{"/a", "/x"}).Add(Pair{"/a/b", "/y"}); m[0].Old != "/a/b" {
		t.Errorf("the longer pair first: %v", m)
	} else if v, _ := m.Apply("/a/b/c"); v != "/y/c" {
		t.Error(v)
	} else if v, ok := m.Apply("/ab"); ok || v != "/ab" {
		t.Error("a sibling mapped", v)
	}
	if _, err := ParsePair("rel=/x"); err == nil {
		t.Error("a relative OLD")
	}
	h := HintFor("claude-code", "cc-s1-agent-a", "/w/my app")
	if h.Restore != "dshq restore cc-s1-agent-a" || h.Continue != "cd '/w/my app' && claude --resume s1" {
		t.Errorf("%+v", h)
	}
}
