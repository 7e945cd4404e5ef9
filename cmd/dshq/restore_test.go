package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/restore"
	"github.com/dshq/dshq/internal/testenv"
)

// machine is one client machine of a deployment: its own HOME (so its own
// ~/.claude and ~/.codex) and name, the same NATS.
type machine struct {
	t    testing.TB
	name string
	home string
	env  map[string]string
}

func newMachine(t testing.TB, p *pipeline, name string) *machine {
	home := t.TempDir()
	return &machine{t: t, name: name, home: home, env: map[string]string{"DSH_NATS_URL": p.url, "HOME": home, "DSH_MACHINE": name}}
}

func (m *machine) dshq(args ...string) result {
	m.t.Helper()
	return runCLI(m.t, m.env, "", args...)
}

// watch runs dshq watch on the machine until the test ends.
func (m *machine) watch(t testing.TB, args ...string) *watchRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchRun{cancel: cancel, done: make(chan int, 1), out: &testenv.Buffer{}, errs: &testenv.Buffer{}}
	env := m.env
	go func() {
		w.done <- runContext(ctx, append([]string{"watch", "--rescan", "1s"}, args...), func(k string) string { return env[k] }, strings.NewReader(""), w.out, w.errs)
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

func (m *machine) restore(t testing.TB, args ...string) restoreSummary {
	t.Helper()
	var sum restoreSummary
	m.dshq(append([]string{"restore", "--json"}, args...)...).ok(t).decode(t, &sum)
	return sum
}

const (
	fixClaude = "cc-5a1e0000-0000-4000-8000-00000000c0de"
	fixAgent  = "cc-5a1e0000-0000-4000-8000-00000000c0de-agent-x1"
	fixCodex  = "codex-019c8bfe-0000-7000-8000-00000000c0de"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestore imports our own Claude Code (transcript and subagent file)
// and Codex fixtures on machine A, and restores them on machine B: where
// each harness looks, byte for byte, idempotent, --dry-run, --cwd, and the
// refusals.
func TestRestore(t *testing.T) {
	p := startPipeline(t)
	a, b := newMachine(t, p, "machine-a"), newMachine(t, p, "machine-b")
	fix, _ := filepath.Abs(filepath.Join("testdata", "restore"))
	a.dshq("import", filepath.Join(fix, "claude"), filepath.Join(fix, "codex")).ok(t)
	transcript := filepath.Join(fix, "claude", "-home-a-proj", "5a1e0000-0000-4000-8000-00000000c0de.jsonl")
	agent := filepath.Join(fix, "claude", "-home-a-proj", "5a1e0000-0000-4000-8000-00000000c0de", "subagents", "agent-x1.jsonl")
	rollout := filepath.Join(fix, "codex", "2026", "02", "23", "rollout-2026-02-23T20-34-25-019c8bfe-0000-7000-8000-00000000c0de.jsonl")

	wantClaude := filepath.Join(b.home, ".claude", "projects", "-home-a-proj", "5a1e0000-0000-4000-8000-00000000c0de.jsonl")
	wantAgent := filepath.Join(b.home, ".claude", "projects", "-home-a-proj", "5a1e0000-0000-4000-8000-00000000c0de", "subagents", "agent-x1.jsonl")
	start := time.Date(2026, 2, 23, 19, 34, 25, 573e6, time.UTC).Local()
	wantCodex := restore.CodexRollout(filepath.Join(b.home, ".codex", "sessions"), start, "019c8bfe-0000-7000-8000-00000000c0de")

	t.Run("dry run writes nothing", func(t *testing.T) {
		sum := b.restore(t, "--dry-run", fixClaude, fixCodex)
		if sum.Written != 3 || len(sum.Sessions) != 3 || !sum.Sessions[0].DryRun {
			t.Fatalf("dry run: %+v", sum)
		}
		if _, err := os.Stat(filepath.Join(b.home, ".claude")); !os.IsNotExist(err) {
			t.Fatalf("a dry run wrote %s (%v)", filepath.Join(b.home, ".claude"), err)
		}
		text := b.dshq("restore", "--dry-run", fixClaude).ok(t).stdout
		if !strings.Contains(text, "would write  "+fixClaude+" → "+wantClaude) {
			t.Errorf("dry run says\n%s", text)
		}
	})

	t.Run("as it was", func(t *testing.T) {
		sum := b.restore(t, fixClaude, fixCodex)
		if sum.Written != 3 || sum.Refused != 0 {
			t.Fatalf("%+v", sum)
		}
		for src, dst := range map[string]string{transcript: wantClaude, agent: wantAgent, rollout: wantCodex} {
			if got, want := readFile(t, dst), readFile(t, src); !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s", dst, src)
			}
		}
		byID := map[string]restoreItem{}
		for _, it := range sum.Sessions {
			byID[it.SessionID] = it
		}
		if c := byID[fixClaude].Continue; c != "cd /home/a/proj && claude --resume 5a1e0000-0000-4000-8000-00000000c0de" {
			t.Errorf("claude continue: %q", c)
		}
		if c := byID[fixCodex].Continue; c != "cd /home/a/proj && codex resume 019c8bfe-0000-7000-8000-00000000c0de" {
			t.Errorf("codex continue: %q", c)
		}
		if byID[fixAgent].File != wantAgent || byID[fixAgent].Parent != fixClaude {
			t.Errorf("agent: %+v", byID[fixAgent])
		}
		// Idempotent: a second run writes nothing.
		again := b.restore(t, fixClaude, fixCodex)
		if again.Present != 3 || again.Written+again.Updated+again.Refused != 0 {
			t.Errorf("second run: %+v", again)
		}
	})

	t.Run("with --cwd", func(t *testing.T) {
		c := newMachine(t, p, "machine-c")
		newDir := filepath.Join(c.home, "src", "proj.v2")
		sum := c.restore(t, "--cwd", newDir, fixClaude, fixCodex)
		if sum.Written != 3 {
			t.Fatalf("%+v", sum)
		}
		key := restore.ClaudeProjectKey(newDir)
		if !strings.HasSuffix(key, "-src-proj-v2") {
			t.Fatalf("key %q", key)
		}
		got := readFile(t, filepath.Join(c.home, ".claude", "projects", key, "5a1e0000-0000-4000-8000-00000000c0de.jsonl"))
		want := readFile(t, transcript)
		// Exactly the cwd fields and the environment's working directory
		// are rewritten, a subdirectory along; the conversation is not.
		want = bytes.ReplaceAll(want, []byte(`"cwd":"/home/a/proj"`), []byte(`"cwd":"`+newDir+`"`))
		want = bytes.ReplaceAll(want, []byte(`"cwd":"/home/a/proj/migrations"`), []byte(`"cwd":"`+newDir+`/migrations"`))
		want = bytes.ReplaceAll(want, []byte(`"workingDirectory":"/home/a/proj"`), []byte(`"workingDirectory":"`+newDir+`"`))
		if !bytes.Equal(got, want) {
			t.Errorf("rewritten transcript:\n%s\nwant\n%s", got, want)
		}
		if !bytes.Contains(got, []byte(`look at /home/a/proj/migrations`)) {
			t.Error("the conversation was rewritten")
		}
		gotCodex := readFile(t, restore.CodexRollout(filepath.Join(c.home, ".codex", "sessions"), start, "019c8bfe-0000-7000-8000-00000000c0de"))
		wantCodex := bytes.ReplaceAll(readFile(t, rollout), []byte(`"cwd":"/home/a/proj"`), []byte(`"cwd":"`+newDir+`"`))
		if !bytes.Equal(gotCodex, wantCodex) || !bytes.Contains(gotCodex, []byte("<cwd>/home/a/proj</cwd>")) {
			t.Errorf("rewritten rollout:\n%s", gotCodex)
		}
		for _, it := range sum.Sessions {
			if it.SessionID == fixClaude && it.Continue != "cd "+newDir+" && claude --resume 5a1e0000-0000-4000-8000-00000000c0de" {
				t.Errorf("continue: %q", it.Continue)
			}
			if it.SessionID == fixClaude && it.Remapped["/home/a/proj/migrations"] != newDir+"/migrations" {
				t.Errorf("remapped: %v", it.Remapped)
			}
		}
		// The corpus keeps the original bytes.
		out := filepath.Join(t.TempDir(), "x.jsonl")
		c.dshq("export", fixClaude, "--source", "-o", out).ok(t)
		if !bytes.Equal(readFile(t, out), readFile(t, transcript)) {
			t.Error("the corpus changed")
		}
		if again := c.restore(t, "--cwd", newDir, fixClaude, fixCodex); again.Present != 3 {
			t.Errorf("second run: %+v", again)
		}
	})

	t.Run("--workspace, --since and --all select", func(t *testing.T) {
		d := newMachine(t, p, "machine-d")
		if sum := d.restore(t, "--dry-run", "--workspace", "/home/a/proj"); sum.Written != 3 {
			t.Errorf("--workspace: %+v", sum)
		}
		if sum := d.restore(t, "--dry-run", "--workspace", "/elsewhere"); len(sum.Sessions) != 0 {
			t.Errorf("--workspace elsewhere: %+v", sum)
		}
		if sum := d.restore(t, "--dry-run", "--all", "--since", "2026-02-20"); sum.Written != 1 || sum.Sessions[0].SessionID != fixCodex {
			t.Errorf("--since: %+v", sum)
		}
		if sum := d.restore(t, "--dry-run", "--all"); sum.Written != 3 {
			t.Errorf("--all: %+v", sum)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		e := newMachine(t, p, "machine-e")
		// A different file in place: refused, naming both; nothing written.
		dst := filepath.Join(e.home, ".claude", "projects", "-home-a-proj", "5a1e0000-0000-4000-8000-00000000c0de.jsonl")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, []byte("{\"mine\":true}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := e.dshq("restore", fixClaude)
		if r.code != 1 || !strings.Contains(r.stdout, dst+" is already there and is not session "+fixClaude) || !strings.Contains(r.stderr, "1 of 2 sessions refused") {
			t.Errorf("different file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if string(readFile(t, dst)) != "{\"mine\":true}\n" {
			t.Error("the different file was overwritten")
		}
		// A prefix of the session (continued elsewhere since): completed.
		whole := readFile(t, transcript)
		if err := os.WriteFile(dst, whole[:bytes.IndexByte(whole, '\n')+1], 0o644); err != nil {
			t.Fatal(err)
		}
		if sum := e.restore(t, fixClaude); sum.Updated != 1 || !bytes.Equal(readFile(t, dst), whole) {
			t.Errorf("prefix: %+v", sum)
		}
		// Unknown id.
		r = e.dshq("restore", "cc-no-such-session", "--json")
		if e := jsonError(t, r); r.code != 1 || e.Code != dshq.CodeSessionNotFound {
			t.Errorf("unknown id: exit %d %+v", r.code, e)
		}
		// Usage.
		if r := e.dshq("restore"); r.code != 1 || !strings.Contains(r.stderr, "name the sessions to restore") {
			t.Errorf("no selection: %d %s", r.code, r.stderr)
		}
		if r := e.dshq("restore", "--map", "rel=/x", fixClaude); r.code != 1 || !strings.Contains(r.stderr, "OLD=NEW with two absolute paths") {
			t.Errorf("bad map: %d %s", r.code, r.stderr)
		}
	})

	t.Run("a rollout archived already is the session's place", func(t *testing.T) {
		h := newMachine(t, p, "machine-h")
		dst := filepath.Join(h.home, ".codex", "archived_sessions", filepath.Base(rollout))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, readFile(t, rollout), 0o644); err != nil {
			t.Fatal(err)
		}
		if sum := h.restore(t, fixCodex); sum.Present != 1 || sum.Sessions[0].File != dst {
			t.Errorf("%+v", sum)
		}
	})

	t.Run("a session with no source file", func(t *testing.T) {
		// An inline sidechain's lines are held by its parent's file.
		f := newMachine(t, p, "machine-f")
		dir := t.TempDir()
		inline := filepath.Join(dir, "inline.jsonl")
		lines := `{"parentUuid":null,"isSidechain":false,"cwd":"/home/a/q","sessionId":"1n11e000-0000-4000-8000-000000000001","version":"2.0.46","type":"user","message":{"role":"user","content":"go"},"uuid":"m-1","timestamp":"2026-01-01T00:00:00.000Z"}
{"parentUuid":null,"isSidechain":true,"agentId":"sc1","cwd":"/home/a/q","sessionId":"1n11e000-0000-4000-8000-000000000001","version":"2.0.46","type":"user","message":{"role":"user","content":"side"},"uuid":"s-1","timestamp":"2026-01-01T00:00:01.000Z"}
`
		if err := os.WriteFile(inline, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		f.dshq("import", inline).ok(t)
		r := f.dshq("restore", "cc-1n11e000-0000-4000-8000-000000000001-agent-sc1")
		if r.code != 1 || !strings.Contains(r.stdout, `held by session "cc-1n11e000-0000-4000-8000-000000000001"`) {
			t.Errorf("inline child: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// Its parent restores, the child with it (its lines are the parent's).
		if sum := f.restore(t, "cc-1n11e000-0000-4000-8000-000000000001"); sum.Written != 1 || len(sum.Sessions) != 1 {
			t.Errorf("parent: %+v", sum)
		}
	})

	t.Run("a native session goes to the deepseek-harness root", func(t *testing.T) {
		g := newMachine(t, p, "machine-g")
		ws := t.TempDir()
		var sum importSummary
		g.dshq("import", "--json", "--fixture-cwd", ws, webPreset(t)).ok(t).decode(t, &sum)
		id := sum.Imported[0].SessionID
		root := filepath.Join(g.home, "dsh")
		rs := g.restore(t, "--deepseek", root, id)
		if rs.Written != 1 {
			t.Fatalf("%+v", rs)
		}
		want := g.dshq("export", id).ok(t).stdout
		got := readFile(t, rs.Sessions[0].File)
		if string(got) != want || !strings.HasPrefix(rs.Sessions[0].File, filepath.Join(root, projectDir(&ws))) {
			t.Errorf("%s: %d bytes, want the export's %d", rs.Sessions[0].File, len(got), len(want))
		}
		r := g.dshq("restore", "--deepseek", root, "--cwd", t.TempDir(), id)
		if r.code != 1 || !strings.Contains(r.stdout, "restored as stored, without --cwd") {
			t.Errorf("native --cwd: %d %s", r.code, r.stdout)
		}
	})
}

// TestRestoreContinue restores on machine B (as it was, and elsewhere with
// --cwd), runs dshq watch there, appends what a harness appends on resume,
// and checks that it reaches the corpus as the same session continued:
// found by search from machine A, export --source equal to B's file (the
// remapped one: equal once the corpus's prefix is mapped as restore maps
// it). Then two machines at once: the second is refused, naming the first.
func TestRestoreContinue(t *testing.T) {
	p := startPipeline(t)
	a := newMachine(t, p, "machine-a")
	fix, _ := filepath.Abs(filepath.Join("testdata", "restore"))
	a.dshq("import", filepath.Join(fix, "claude"), filepath.Join(fix, "codex")).ok(t)

	cont := map[string]string{
		fixClaude: `{"parentUuid":"a-2","isSidechain":false,"userType":"external","cwd":"CWD","sessionId":"5a1e0000-0000-4000-8000-00000000c0de","version":"2.1.332","type":"user","message":{"role":"user","content":"now fix the narwhal WORD"},"uuid":"u-9","timestamp":"2026-12-01T21:39:08.656Z"}` + "\n",
		fixCodex:  `{"timestamp":"2026-12-01T21:39:35.798Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"now fix the narwhal WORD"}]}}` + "\n",
	}
	for _, tc := range []struct{ name, word, cwd string }{{"as it was", "asis", ""}, {"with --cwd", "moved", "x"}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newMachine(t, p, "machine-b-"+tc.word)
			args := []string{fixClaude, fixCodex}
			var m restore.Map
			if tc.cwd != "" {
				dir := filepath.Join(b.home, "work", "proj")
				args = append(args, "--cwd", dir)
				m = m.Add(restore.Pair{Old: "/home/a/proj", New: dir})
			}
			sum := b.restore(t, args...)
			w := b.watch(t, "-v")
			w.started(t)
			appended := time.Now()
			for _, it := range sum.Sessions {
				line, ok := cont[it.SessionID]
				if !ok {
					continue
				}
				line = strings.ReplaceAll(strings.ReplaceAll(line, "CWD", it.Cwd), "WORD", tc.word+it.Harness)
				f, err := os.OpenFile(it.File, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(line); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
			for _, it := range sum.Sessions {
				if _, ok := cont[it.SessionID]; !ok {
					continue
				}
				query := "narwhal " + tc.word + it.Harness
				waitFor(t, 60*time.Second, func() string { return w.out.String() + w.errs.String() }, func() bool {
					r := a.dshq("search", query, "--json")
					return r.code == 0 && strings.Contains(r.stdout, `"id": "`+it.SessionID+`"`)
				})
				t.Logf("%s: appended on B → found by search from A in %v", it.SessionID, time.Since(appended).Round(time.Millisecond))
				out := filepath.Join(t.TempDir(), "src.jsonl")
				a.dshq("export", it.SessionID, "--source", "-o", out).ok(t)
				exported, onB := readFile(t, out), readFile(t, it.File)
				got, _ := rewriteSource(capture.Format(it.Harness), exported, m)
				if !bytes.Equal(got, onB) {
					t.Errorf("%s: export --source (mapped: %v) is not B's file:\n%s\n---\n%s", it.SessionID, m != nil, got, onB)
				}
				if m != nil && bytes.Equal(exported, onB) {
					t.Errorf("%s: the corpus holds the remapped bytes", it.SessionID)
				}
			}
			if strings.Contains(w.out.String(), "error") {
				t.Errorf("watch reported an error:\n%s", w.out.String())
			}
			if remapped := strings.Contains(w.out.String(), "restored here with its working directories rewritten (/home/a/proj → "); remapped != (m != nil) {
				t.Errorf("watch's note of a remapped restore (want %v):\n%s", m != nil, w.out.String())
			}
		})
	}

	t.Run("two machines at once", func(t *testing.T) {
		b, c := newMachine(t, p, "machine-b"), newMachine(t, p, "machine-c")
		sum := b.restore(t, fixCodex)
		wb := b.watch(t, "--idle", "10m")
		wb.started(t)
		appendLine(t, sum.Sessions[0].File, `{"timestamp":"2026-12-01T22:00:00.000Z","type":"event_msg","payload":{"type":"user_message","message":"hold the lease"}}`)
		waitFor(t, 30*time.Second, wb.out.String, func() bool { return strings.Contains(wb.out.String(), "live      "+fixCodex) })
		// Machine C restores while B writes: refused, naming B.
		r := c.dshq("restore", fixCodex)
		if r.code != 1 || !strings.Contains(r.stdout, "is being written now (held by machine-b (dshq watch) since") {
			t.Errorf("restore while B writes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// B itself has the file: present, with a word that B is writing it.
		if r := b.dshq("restore", fixCodex); r.code != 0 || !strings.Contains(r.stdout, "being written now (held by machine-b (dshq watch)") {
			t.Errorf("restore on B while B writes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// C already had the file (restored before B continued): C's watch
		// is refused the session, naming B, and publishes nothing.
		st := storeOf(t, p)
		before, err := st.Records(context.Background(), fixCodex)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(c.home, ".codex", "sessions", "x", "rollout-2026-02-23T20-34-25-019c8bfe-0000-7000-8000-00000000c0de.jsonl")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, readFile(t, sum.Sessions[0].File), 0o644); err != nil {
			t.Fatal(err)
		}
		wc := c.watch(t)
		appendLine(t, dst, `{"timestamp":"2026-12-01T22:00:01.000Z","type":"event_msg","payload":{"type":"user_message","message":"from C"}}`)
		waitFor(t, 30*time.Second, wc.out.String, func() bool {
			return strings.Contains(wc.out.String(), "retry     ") && strings.Contains(wc.out.String(), "held by machine-b (dshq watch)")
		})
		after, err := st.Records(context.Background(), fixCodex)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Errorf("C's line was stored beside B's lease: %d records, were %d", len(after), len(before))
		}
	})
}

// started waits until the watcher has looked at its three roots.
func (w *watchRun) started(t *testing.T) {
	t.Helper()
	waitFor(t, 30*time.Second, w.out.String, func() bool {
		return strings.Count(w.out.String(), " watching ")+strings.Count(w.out.String(), " missing ") >= 3
	})
}

func appendLine(t testing.TB, path, line string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// TestSearchHitsCarryRestore: dshq search --json hits say how to restore
// and continue their session.
func TestSearchHitsCarryRestore(t *testing.T) {
	p := startPipeline(t)
	fix, _ := filepath.Abs(filepath.Join("testdata", "restore"))
	p.dshq("import", filepath.Join(fix, "codex")).ok(t)
	var page struct {
		Items []struct {
			Header  struct{ ID string } `json:"header"`
			Restore restore.Hint        `json:"restore"`
		} `json:"items"`
	}
	waitFor(t, 30*time.Second, func() string { return "no hit" }, func() bool {
		r := p.dshq("search", "walrus", "--json")
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &page) == nil && len(page.Items) > 0
	})
	h := page.Items[0].Restore
	if h.Restore != "dshq restore "+fixCodex || h.Continue != "cd /home/a/proj && codex resume 019c8bfe-0000-7000-8000-00000000c0de" {
		t.Errorf("hit: %+v", page.Items[0])
	}
}
