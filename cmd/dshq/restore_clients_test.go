package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/restore"
	"github.com/dshq/dshq/internal/corpus"
)

// clients are the real Claude Code and Codex CLIs (.ci/setup-clients.sh),
// run offline: in a network namespace of their own (unshare -n), with a
// throw-away HOME, Codex's provider at a closed loopback port.
type clients struct {
	claude, codex string
	closedPort    int
}

// requireClients finds the clients, or skips (fails in CI) with one line.
func requireClients(t *testing.T) *clients {
	t.Helper()
	miss := func(format string, args ...any) *clients {
		t.Helper()
		if corpus.CI() {
			t.Fatalf(format+" (CI runs .ci/setup first)", args...)
		}
		t.Skipf(format+" (run .ci/setup-clients.sh)", args...)
		return nil
	}
	dir := os.Getenv("DSHQ_CLIENTS_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		found, _ := filepath.Glob(filepath.Join(home, ".cache", "dshq", "clients-claude-*-codex-*"))
		sort.Strings(found)
		if len(found) == 0 {
			return miss("the real Claude Code and Codex clients are not installed under ~/.cache/dshq")
		}
		dir = found[len(found)-1]
	}
	c := &clients{claude: filepath.Join(dir, "node_modules", ".bin", "claude"), codex: filepath.Join(dir, "node_modules", ".bin", "codex")}
	for _, b := range []string{c.claude, c.codex} {
		if _, err := os.Stat(b); err != nil {
			return miss("the real client %s is missing", b)
		}
	}
	if err := exec.Command("unshare", "-n", "true").Run(); err != nil {
		// Never run them where they could reach another machine.
		t.Skipf("unshare -n is not available (%v): the real clients run only without a network", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.closedPort = l.Addr().(*net.TCPAddr).Port
	l.Close()
	return c
}

// run starts bin with args in dir as machine m, offline; it reads the
// combined output until stop says so (checked at every line and every
// 100 ms) or the process ends, then kills the process group; it returns
// the output, with a last line saying so when the run was cut. A run is
// cut at three minutes: a guard against a client that hangs, far above
// what one takes (seconds) even on a loaded machine.
func (c *clients) run(t *testing.T, m *machine, dir string, stop func(out string) bool, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"-n", bin}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + m.home, "CODEX_HOME=" + filepath.Join(m.home, ".codex"),
		"DISABLE_AUTOUPDATER=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "NO_COLOR=1", "TERM=dumb",
		fmt.Sprintf("OPENAI_BASE_URL=http://127.0.0.1:%d/v1", c.closedPort), "OPENAI_API_KEY=dshq-test-no-key"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var mu sync.Mutex
	var out strings.Builder
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 64<<10)
		for {
			n, err := pr.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	text := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
loop:
	for {
		select {
		case <-exited:
			break loop
		case <-tick.C:
			if stop(text()) {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
				break loop
			}
		}
	}
	pr.Close()
	<-read
	if ctx.Err() != nil {
		return text() + "\n[cut after three minutes]"
	}
	return text()
}

// claudeFinds reports whether claude --resume finds session sid, from dir.
// A claude that ends without a word (cut by run's bound on a loaded
// machine, or gone before it printed) is asked again, twice at most, as
// codexFinds does.
func (c *clients) claudeFinds(t *testing.T, m *machine, dir, sid, prompt string) (bool, string) {
	for attempt := 1; ; attempt++ {
		out := c.run(t, m, dir, func(string) bool { return false }, c.claude, "--resume", sid, "-p", prompt)
		switch {
		case strings.Contains(out, "Not logged in"):
			return true, out
		case strings.Contains(out, "No conversation found with session ID: "+sid), strings.Contains(out, "is not a UUID and does not match any session title"):
			return false, out
		}
		if attempt == 3 {
			t.Errorf("claude --resume %s: neither found nor not found, three times:\n%s", sid, out)
			return false, out
		}
	}
}

// codexFinds reports whether codex exec resume finds thread tid, from dir:
// it prints its header with that session id, or refuses to continue a
// rollout it read (note says why: a sub-agent resumed through its parent,
// a model provider this home does not configure). When until is set, it
// lets Codex run until until() holds (the prompt is in the rollout), at
// most 20 s, before it stops it.
func (c *clients) codexFinds(t *testing.T, m *machine, dir, tid, prompt string, until func() bool) (found bool, note, out string) {
	// A Codex killed a moment ago may leave the next one in the same home
	// ending without a word (its own locks): ask again, twice at most.
	for attempt := 1; ; attempt++ {
		found, note, out, known := c.codexOnce(t, m, dir, tid, prompt, until)
		if known {
			return found, note, out
		}
		if attempt == 3 {
			t.Errorf("codex resume %s: neither found nor not found, three times:\n%s", tid, out)
			return false, "", out
		}
	}
}

// codexOnce is one codex exec resume; known is false when Codex said
// neither found nor not found.
func (c *clients) codexOnce(t *testing.T, m *machine, dir, tid, prompt string, until func() bool) (found bool, note, out string, known bool) {
	deadline := time.Now().Add(20 * time.Second)
	out = c.run(t, m, dir, func(o string) bool {
		switch {
		case strings.Contains(o, "thread/resume failed"):
			return true
		case strings.Contains(o, "session id: "+tid):
			return until == nil || until() || time.Now().After(deadline)
		}
		return strings.Contains(o, "session id: ") // another: a new thread
	}, c.codex, "exec", "--skip-git-repo-check", "resume", tid, prompt)
	switch {
	case strings.Contains(out, "no rollout found for thread id "+tid):
		return false, "", out, true
	case strings.Contains(out, "OpenAI Codex v") && strings.Contains(out, "session id: "+tid):
		return true, "", out, true
	case strings.Contains(out, "thread/resume failed: "):
		_, why, _ := strings.Cut(out, "thread/resume failed: ")
		return true, firstLine(why), out, true
	case strings.Contains(out, "session id: "):
		return false, "", out, true // it started a new thread instead
	}
	return false, "", out, false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// resumable is a session of the corpus that has its own file and that a
// client resumes by id (Claude Code subagent files come with their
// session and are resumed through it).
type resumable struct {
	id, harness, file string
}

// TestRestoreRealClients is issue 25's "done when" with the real clients:
// every Claude Code and Codex session of the agent-harnesses corpus that
// has its own file, imported on machine A, restored on machine B (another
// HOME, another client of the same NATS), is found by the real client on B
// — as it was, and with --cwd to another directory. On the --cwd machine
// dshq watch runs while the clients resume: what they append reaches the
// corpus as the same session continued (search from A finds the prompt),
// and export --source, mapped as restore maps it, equals B's file byte
// for byte.
func TestRestoreRealClients(t *testing.T) {
	dir := corpus.RequireHarnesses(t)
	c := requireClients(t)
	p := startPipeline(t)
	a := newMachine(t, p, "machine-a")
	var sum importSummary
	a.dshq("import", "--json", dir).ok(t).decode(t, &sum)
	var sessions []resumable
	for _, r := range append(sum.Imported, sum.Present...) {
		if r.Harness == nil || len(r.Harness.Sessions) == 0 {
			continue
		}
		own := r.Harness.Sessions[0]
		if r.Format == capture.FormatClaudeCode && own.Parent != "" {
			continue // a subagent file: restored with its session
		}
		sessions = append(sessions, resumable{id: own.ID, harness: string(r.Format), file: r.File})
	}
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].id < sessions[j].id })
	if len(sessions) < 20 {
		t.Fatalf("only %d resumable sessions in the corpus", len(sessions))
	}

	t.Run("as it was", func(t *testing.T) {
		b := newMachine(t, p, "machine-b")
		r := b.dshq("restore", "--all", "--json")
		var rs restoreSummary
		r.decode(t, &rs)
		items := map[string]restoreItem{}
		for _, it := range rs.Sessions {
			items[it.SessionID] = it
		}
		work := t.TempDir() // the sessions' own directories do not exist here
		var nFound int
		var unreadable, refusedToContinue []string
		defer func() {
			t.Logf("as it was: the real clients found %d of %d restored sessions (%d of them found and not continued, as the client says:\n  %s\n); %d are files the client does not find even copied by hand:\n  %s",
				nFound, len(sessions), len(refusedToContinue), strings.Join(refusedToContinue, "\n  "), len(unreadable), strings.Join(unreadable, "\n  "))
		}()
		for _, s := range sessions {
			it := items[s.id]
			if it.Action == actionRefused {
				// Only a Claude Code session whose lines state no usable cwd
				// has no place as it was: --cwd gives it one (below).
				if s.harness != "claude-code" || !strings.Contains(it.Reason, "states no cwd") {
					t.Errorf("%s (%s) refused: %s", s.id, s.file, it.Reason)
				}
				continue
			}
			if it.Action != actionWritten {
				t.Errorf("%s: %+v", s.id, it)
				continue
			}
			found, note, out := c.finds(t, b, work, it, "hi", nil)
			switch {
			case found && note != "":
				nFound++
				refusedToContinue = append(refusedToContinue, s.id+": "+note)
			case found:
				nFound++
			case c.findsByHand(t, p, s, it):
				t.Errorf("%s (%s): the real client did not find it at %s, and finds the original copied there by hand:\n%s", s.id, s.file, it.File, out)
			default:
				unreadable = append(unreadable, s.id+" ("+filepath.Base(s.file)+"): "+firstLine(out))
			}
		}
		// The test can fail: an id nothing restored is not found.
		if found, _ := c.claudeFinds(t, b, work, "00000000-0000-4000-8000-0000000dead0", "hi"); found {
			t.Error("claude found a session that was never restored")
		}
		if found, _, _ := c.codexFinds(t, b, work, "00000000-0000-4000-8000-0000000dead1", "hi", nil); found {
			t.Error("codex found a thread that was never restored")
		}
	})

	t.Run("with --cwd, continued under dshq watch", func(t *testing.T) {
		b := newMachine(t, p, "machine-b2")
		w := b.watch(t)
		w.started(t)
		type done struct {
			it     restoreItem
			m      restore.Map
			prompt string
		}
		var resumed []done
		// A session restored with its parent (a spawned Codex thread) is
		// in its parent's place.
		earlier := map[string]struct {
			it  restoreItem
			dir string
		}{}
		for i, s := range sessions {
			newDir := filepath.Join(b.home, "work", fmt.Sprintf("p%02d", i))
			var it restoreItem
			if e, ok := earlier[s.id]; ok {
				it, newDir = e.it, e.dir
			} else {
				if err := os.MkdirAll(newDir, 0o755); err != nil {
					t.Fatal(err)
				}
				var rs restoreSummary
				b.dshq("restore", "--json", "--cwd", newDir, s.id).ok(t).decode(t, &rs)
				for _, x := range rs.Sessions {
					earlier[x.SessionID] = struct {
						it  restoreItem
						dir string
					}{x, newDir}
				}
				it = rs.Sessions[0]
			}
			if it.SessionID != s.id || it.Action != actionWritten {
				t.Errorf("%s: %+v", s.id, it)
				continue
			}
			var m restore.Map
			for old, nw := range it.Remapped {
				m = m.Add(restore.Pair{Old: old, New: nw})
			}
			prompt := fmt.Sprintf("restorecheck%02d", i)
			until := func() bool { return bytes.Contains(readFile(t, it.File), []byte(prompt)) }
			found, note, out := c.finds(t, b, newDir, it, prompt, until)
			if found && note != "" {
				continue // found, and not continued (the client says why)
			}
			if !found {
				if c.findsByHand(t, p, s, it) {
					t.Errorf("%s (%s): the real client did not find it in %s, and finds the original copied by hand:\n%s", s.id, s.file, newDir, out)
				}
				continue
			}
			resumed = append(resumed, done{it: it, m: m, prompt: prompt})
		}
		for _, d := range resumed {
			waitFor(t, 60*time.Second, func() string { return d.it.SessionID + " not found by " + d.prompt + "\n" + w.out.String() }, func() bool {
				r := a.dshq("search", d.prompt, "--json")
				return r.code == 0 && strings.Contains(r.stdout, `"id": "`+d.it.SessionID+`"`)
			})
		}
		for _, d := range resumed {
			onB := readFile(t, d.it.File)
			if i := bytes.LastIndexByte(onB, '\n'); i >= 0 {
				onB = onB[:i+1] // a line the stopped client left torn is not a line yet
			}
			var got []byte
			waitFor(t, 30*time.Second, func() string {
				return fmt.Sprintf("%s: export --source is %d bytes, B's file %d", d.it.SessionID, len(got), len(onB))
			}, func() bool {
				out := filepath.Join(t.TempDir(), "src.jsonl")
				a.dshq("export", d.it.SessionID, "--source", "-o", out).ok(t)
				got, _ = rewriteSource(capture.Format(d.it.Harness), readFile(t, out), d.m)
				return bytes.Equal(got, onB)
			})
		}
		if strings.Contains(w.out.String(), " error ") {
			t.Errorf("watch reported an error:\n%s", w.out.String())
		}
	})
}

// findsByHand reports whether the real client finds the original file of
// s copied by hand where the harness documents it (the control of a
// session the client does not find restored: some test fixtures are not
// files the client can read at all).
func (c *clients) findsByHand(t *testing.T, p *pipeline, s resumable, it restoreItem) bool {
	m := newMachine(t, p, "by-hand")
	var dst string
	if s.harness == "codex" {
		dst = filepath.Join(m.home, ".codex", "sessions", "2026", "01", "01", filepath.Base(it.File))
	} else {
		dst = filepath.Join(m.home, ".claude", "projects", filepath.Base(filepath.Dir(it.File)), filepath.Base(it.File))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, readFile(t, s.file), 0o644); err != nil {
		t.Fatal(err)
	}
	found, _, _ := c.finds(t, m, t.TempDir(), it, "hi", nil)
	return found
}

// finds runs the client of it's harness.
func (c *clients) finds(t *testing.T, m *machine, dir string, it restoreItem, prompt string, until func() bool) (found bool, note, out string) {
	_, id, _ := strings.Cut(it.Continue, "--resume ")
	if it.Harness == "codex" {
		_, id, _ = strings.Cut(it.Continue, "codex resume ")
		return c.codexFinds(t, m, dir, strings.Trim(id, "'"), prompt, until)
	}
	found, out = c.claudeFinds(t, m, dir, strings.Trim(id, "'"), prompt)
	return found, "", out
}
