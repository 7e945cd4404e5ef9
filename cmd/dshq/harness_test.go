package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/internal/corpus"
)

// harnessCorpus is what importing the agent-harnesses corpus must report,
// by format: the closing note of issue 15's "done when".
var harnessCorpus = map[capture.Format]harnessTotals{
	// 21 transcripts; 7 subagent files and 2 inline sidechains are children.
	capture.FormatClaudeCode: {Files: 21, Sessions: 23, ChildSessions: 9, Events: 2504, LogOnly: 1498, InvalidLines: 3, Lines: 2200, Bytes: 3426930},
	// 14 rollouts: one spawned thread, one forked subagent.
	capture.FormatCodex: {Files: 14, Sessions: 14, ChildSessions: 2, Events: 4130, LogOnly: 1906, InvalidLines: 1, Lines: 3551, Bytes: 1357004},
}

// TestHarnessCorpus imports every Claude Code and Codex file of the
// agent-harnesses corpus, checks the counts, imports it again (nothing
// stored twice), writes every file back byte for byte with export
// --source, and checks on the real files what the corpus promises: a
// prompt, a reply, a tool's arguments and a tool result find their
// session, thinking does not; a subagent is a child at depth 1.
func TestHarnessCorpus(t *testing.T) {
	dir := corpus.RequireHarnesses(t)
	p := startPipeline(t)
	var sum importSummary
	p.dshq("import", "--json", dir).ok(t).decode(t, &sum)
	if len(sum.Refused) != 0 {
		t.Fatalf("refused: %+v", sum.Refused)
	}
	for f, want := range harnessCorpus {
		if got := sum.Harnesses[f]; got == nil || *got != want {
			t.Errorf("%s: %+v, want %+v", f, got, want)
		}
	}
	for _, r := range sum.Imported {
		want := capture.FormatClaudeCode
		if strings.Contains(filepath.ToSlash(r.File), "/codex/") {
			want = capture.FormatCodex
		}
		if r.Format != want {
			t.Errorf("%s: format %q, want %q", r.File, r.Format, want)
		}
	}
	text := p.dshq("import", dir).ok(t).stdout
	for _, w := range []string{"imported  0 sessions (0 events)\npresent   37 sessions", "claude-code 21 files, 23 sessions (2504 events, 1498 log-only), 3 invalid lines, 9 child sessions",
		"codex       14 files, 14 sessions (4130 events, 1906 log-only), 1 invalid line, 2 child sessions"} {
		if !strings.Contains(text, w) {
			t.Errorf("second import says\n%s\nwithout %q", text, w)
		}
	}

	t.Run("export --source writes every file back byte for byte", func(t *testing.T) {
		out := t.TempDir()
		for i, r := range sum.Imported {
			dst := filepath.Join(out, "f"+strings.Repeat("x", i)+".jsonl")
			p.dshq("export", r.SessionID, "--source", "-o", dst).ok(t)
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(r.File)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s: export --source of %s differs from the file (%d bytes, want %d)", r.File, r.SessionID, len(got), len(want))
			}
		}
		child := "cc-88a8d761-7b9a-4bf1-a8ca-c1febe6bf358-agent-e1c84ba5"
		r := p.dshq("export", child, "--source", "--json")
		if e := jsonError(t, r); r.code != 1 || e.Code != CodeNoSource || !strings.Contains(e.Message, `held by session "cc-88a8d761-7b9a-4bf1-a8ca-c1febe6bf358"`) {
			t.Errorf("export --source of an inline child: exit %d, %+v", r.code, e)
		}
	})

	gen := []string{"--min-generation", fmt.Sprint(sum.Generation)}
	t.Run("what a person said, the model answered and a tool saw finds the session; thinking does not", func(t *testing.T) {
		const short = "cc-55604662-cf2a-4331-851a-ec234028f8ca"
		for _, q := range []string{"phx.server doesnt seem to start", "check the project structure", "head -80", "doesn't want to proceed with this tool use"} {
			var page dshq.SessionSearchPage
			p.dshq(append([]string{"search", q, "--json"}, gen...)...).ok(t).decode(t, &page)
			found := false
			for _, h := range page.Items {
				found = found || h.Header.ID == short
			}
			if !found {
				t.Errorf("search %q does not find %s: %+v", q, short, page.Items)
			}
			var events dshq.EventSearchPage
			p.dshq(append([]string{"search", q, "--session", short, "--json"}, gen...)...).ok(t).decode(t, &events)
			if len(events.Items) == 0 {
				t.Errorf("search %q in %s finds no event", q, short)
			}
		}
		var page dshq.SessionSearchPage
		p.dshq(append([]string{"search", "having trouble starting their Phoenix", "--json"}, gen...)...).ok(t).decode(t, &page)
		for _, h := range page.Items {
			if h.Header.ID == short {
				t.Errorf("thinking text found %s at seq %d", short, h.BestMatch.Seq)
			}
		}
	})

	t.Run("stats count sessions by harness, search filters by harness, read says who spoke", func(t *testing.T) {
		st := waitStats(t, p, sum.Generation)
		if st.Harnesses[dshq.HarnessClaudeCode] != 23 || st.Harnesses[dshq.HarnessCodex] != 14 || len(st.Harnesses) != 2 {
			t.Errorf("stats by harness: %v", st.Harnesses)
		}
		text := p.dshq("stats").ok(t).stdout
		for _, w := range []string{"sessions     37", "by harness   23 claude-code, 14 codex"} {
			if !strings.Contains(text, w) {
				t.Errorf("stats text without %q:\n%s", w, text)
			}
		}
		for _, c := range []struct{ harness, prefix string }{{"codex", "codex-"}, {"claude-code", "cc-"}} {
			var page dshq.SessionSearchPage
			p.dshq(append([]string{"search", "the", "--harness", c.harness, "--limit", "100", "--json"}, gen...)...).ok(t).decode(t, &page)
			if len(page.Items) == 0 {
				t.Errorf("--harness %s finds nothing", c.harness)
			}
			for _, h := range page.Items {
				if !strings.HasPrefix(h.Header.ID, c.prefix) || h.Header.Harness != c.harness {
					t.Errorf("--harness %s found %s (harness %q)", c.harness, h.Header.ID, h.Header.Harness)
				}
			}
		}
		var native dshq.SessionSearchPage
		p.dshq(append([]string{"search", "the", "--harness", "native", "--json"}, gen...)...).ok(t).decode(t, &native)
		if len(native.Items) != 0 {
			t.Errorf("--harness native found %d converted sessions", len(native.Items))
		}
		read := p.dshq(append([]string{"read", "cc-55604662-cf2a-4331-851a-ec234028f8ca"}, gen...)...).ok(t).stdout
		for _, w := range []string{"/home/marco/projects/spotter  (claude-code)", "claude-code/progress               hook_progress",
			"thinking: The user is having trouble", "Bash {\"command\":\"mix phx.server", "Bash → error: The user doesn't want to proceed"} {
			if !strings.Contains(read, w) {
				t.Errorf("read without %q:\n%s", w, read)
			}
		}
	})

	t.Run("a subagent file is a child session at depth 1", func(t *testing.T) {
		const parent = "cc-258c7280-ae70-4798-800f-63464d01a85d"
		var tr dshq.LineageTrace
		p.dshq(append([]string{"trace", parent, "--json"}, gen...)...).ok(t).decode(t, &tr)
		kids := map[string]bool{}
		for _, d := range tr.Descendants {
			h := d.Session.Header
			if h.Origin != dshq.OriginSubagent || h.DelegationDepth == nil || *h.DelegationDepth != 1 || h.Harness != dshq.HarnessClaudeCode {
				t.Errorf("descendant %s: origin %q depth %v harness %q", h.ID, h.Origin, h.DelegationDepth, h.Harness)
			}
			kids[h.ID] = true
		}
		if !kids[parent+"-agent-a881341"] || !kids[parent+"-agent-acompact-fffbd0"] {
			t.Errorf("trace of %s lists %v", parent, kids)
		}
	})
}

// TestHarnessImportGrowsAndRefusesRewrites imports a Codex rollout cut in
// the middle of a line (taken as complete, its last line without a
// newline), then the finished file (continued: the stored lines convert as
// they did, the rest is appended, and export --source writes the finished
// file), then a rewritten one (refused, nothing stored); files in a
// Claude Code root whose lines say nothing are still Claude Code's, their
// lines kept and counted; an empty one is skipped.
func TestHarnessImportGrowsAndRefusesRewrites(t *testing.T) {
	p := startPipeline(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "capture", "codex", "testdata", "rollout-2026-03-11T10-00-00-1b1b1b1b-2222-4333-8444-555566667777.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	dir := filepath.Join(home, ".codex", "sessions", "2026", "03", "11")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "rollout-2026-03-11T10-00-00-1b1b1b1b-2222-4333-8444-555566667777.jsonl")
	cut := bytes.IndexByte(src[len(src)/2:], '\n') + len(src)/2 + 10
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(src[:cut])
	env := map[string]string{"DSH_NATS_URL": p.url, "HOME": home}
	var first, second importSummary
	runCLI(t, env, "", "import", "--json").ok(t).decode(t, &first)
	if len(first.Imported) != 1 || first.Imported[0].SessionID != "codex-1b1b1b1b-2222-4333-8444-555566667777" {
		t.Fatalf("first import: %+v", first)
	}
	id := first.Imported[0].SessionID
	write(src)
	runCLI(t, env, "", "import", "--json").ok(t).decode(t, &second)
	if len(second.Imported) != 1 || !second.Imported[0].Continued || second.Imported[0].Events <= first.Imported[0].Events {
		t.Fatalf("import of the grown file: %+v", second)
	}
	got := runCLI(t, env, "", "export", id, "--source").ok(t).stdout
	if got != string(src) {
		t.Errorf("export --source of the grown file differs from it")
	}
	rewritten := bytes.Replace(src, []byte(`"type"`), []byte(`"type" `), 1)
	write(rewritten)
	r := runCLI(t, env, "", "import", "--json")
	var third importSummary
	r.decode(t, &third)
	if r.code != 1 || len(third.Refused) != 1 || !strings.Contains(third.Refused[0].Reason, "two files claim this session") {
		t.Errorf("import of a rewritten file: exit %d, %+v", r.code, third)
	}

	projects := filepath.Join(home, ".claude", "projects", "-tmp-x")
	if err := os.MkdirAll(projects, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(projects, "garbage.jsonl"), []byte("not json\n{\"torn\":\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(projects, "empty.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var fourth importSummary
	runCLI(t, map[string]string{"DSH_NATS_URL": p.url, "HOME": home}, "", "import", "--json", filepath.Join(home, ".claude", "projects")).ok(t).decode(t, &fourth)
	if len(fourth.Imported) != 1 || fourth.Imported[0].Format != capture.FormatClaudeCode || fourth.Harnesses[capture.FormatClaudeCode].InvalidLines != 2 {
		t.Errorf("import of non-JSON lines in a Claude Code root: %+v", fourth)
	}
	if len(fourth.Skipped) != 1 || !strings.Contains(fourth.Skipped[0].Reason, "empty") {
		t.Errorf("empty file: %+v", fourth.Skipped)
	}
}
