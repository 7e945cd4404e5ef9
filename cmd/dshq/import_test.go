package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/node"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/tenancy"
)

// TestImport covers what the corpus tests do not: placeholders, partial
// imports, conflicts and session roots.
func TestImport(t *testing.T) {
	p := startPipeline(t)
	fixture := webPreset(t)

	t.Run("an unsubstituted placeholder cwd is refused and nothing is stored", func(t *testing.T) {
		var sum importSummary
		r := p.dshq("import", "--json", fixture)
		r.decode(t, &sum)
		if r.code != 1 || len(sum.Refused) != 1 || !strings.Contains(sum.Refused[0].Reason, "{{cwd}} placeholder") || !strings.Contains(sum.Refused[0].Reason, "--fixture-cwd DIR") {
			t.Fatalf("exit %d, %+v", r.code, sum)
		}
		if st := stats(t, p); st.StreamRecords != 0 {
			t.Errorf("%d records stored", st.StreamRecords)
		}
	})

	t.Run("a placeholder in the header's id, parent or cwd refuses the file with its line", func(t *testing.T) {
		dir := t.TempDir()
		files := map[string]string{
			"id.jsonl":     `{"type":"session","version":0,"id":"{{sessionId}}","createdAt":1}`,
			"parent.jsonl": `{"type":"session","version":0,"id":"child-of-a-template","createdAt":1,"cwd":"/work/p","parentSession":"{{parent}}"}`,
			"cwd.jsonl":    `{"type":"session","version":0,"id":"abs-template","createdAt":1,"cwd":"/work/{{cwd}}"}`,
		}
		for name, hdr := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(hdr+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var sum importSummary
		r := p.dshq("import", "--json", dir)
		r.decode(t, &sum)
		if r.code != 1 || len(sum.Refused) != 3 {
			t.Fatalf("exit %d, %+v", r.code, sum)
		}
		for _, f := range sum.Refused {
			if !strings.HasPrefix(f.Reason, "line 1: placeholder: session header ") || !strings.Contains(f.Reason, "give --fixture-cwd DIR") {
				t.Errorf("%s: reason %q", f.File, f.Reason)
			}
		}
		text := p.dshq("import", filepath.Join(dir, "id.jsonl")).stdout
		if want := `id.jsonl: line 1: placeholder: session header id "{{sessionId}}" holds the {{sessionId}} placeholder`; !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
		r = p.dshq("import", "--json", "--fixture-cwd", "/work/p", filepath.Join(dir, "parent.jsonl"))
		r.decode(t, &sum)
		if r.code != 1 || len(sum.Refused) != 1 || !strings.Contains(sum.Refused[0].Reason, `parentSession "{{parent}}"`) || !strings.Contains(sum.Refused[0].Reason, "substitutes only {{cwd}} and {{sessionId}}") {
			t.Fatalf("with --fixture-cwd: exit %d, %+v", r.code, sum)
		}
		if st := stats(t, p); st.StreamRecords != 0 {
			t.Errorf("%d records stored", st.StreamRecords)
		}
	})

	t.Run("a partial earlier import is continued where it stopped", func(t *testing.T) {
		hdr, events, err := readLog(importFile{path: fixture}, importOptions{fixtureCwd: "/work/p", fixtureSessionID: "partial-1"})
		if err != nil {
			t.Fatal(err)
		}
		recs := logRecords(hdr, events)
		nc, err := natsconn.Connect(natsconn.Options{URL: p.url})
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		store, err := openStore(context.Background(), nc, dshq.SessionStream, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Import(context.Background(), hdr, events[:2]); err != nil {
			t.Fatal(err)
		}
		var sum importSummary
		p.dshq("import", "--fixture-cwd", "/work/p", "--fixture-session-id", "partial-1", "--json", fixture).ok(t).decode(t, &sum)
		if len(sum.Imported) != 1 || !sum.Imported[0].Continued || sum.Imported[0].Published != len(recs)-3 {
			t.Fatalf("%+v", sum)
		}
		stored, err := store.Records(context.Background(), "partial-1")
		if err != nil || len(stored) != len(recs) {
			t.Fatalf("%d records stored (%v), want %d", len(stored), err, len(recs))
		}
		for i := range recs {
			msgID := "partial-1:h"
			if i > 0 {
				msgID = fmt.Sprintf("partial-1:%d", i-1)
			}
			if !bytes.Equal(stored[i].Data, recs[i]) || stored[i].MsgID != msgID {
				t.Errorf("record %d stored as %s %q", i, stored[i].MsgID, stored[i].Data)
			}
		}
	})

	t.Run("a different session under a stored id is refused unless renamed, and the rename is stable", func(t *testing.T) {
		p.dshq("import", "--fixture-cwd", "/work/c", "--fixture-session-id", "conf-1", fixture).ok(t)
		other := filepath.Join(corpus.Fixtures(t), "tool-round.jsonl")
		var sum importSummary
		r := p.dshq("import", "--fixture-cwd", "/work/c", "--fixture-session-id", "conf-1", "--json", other)
		r.decode(t, &sum)
		if r.code != 1 || len(sum.Refused) != 1 || !strings.Contains(sum.Refused[0].Reason, `session "conf-1" is already stored with different content`) ||
			!strings.Contains(sum.Refused[0].Reason, "--rename-on-conflict") {
			t.Fatalf("exit %d, %+v", r.code, sum)
		}
		var renamed, again importSummary
		p.dshq("import", "--fixture-cwd", "/work/c", "--fixture-session-id", "conf-1", "--rename-on-conflict", "--json", other).ok(t).decode(t, &renamed)
		p.dshq("import", "--fixture-cwd", "/work/c", "--fixture-session-id", "conf-1", "--rename-on-conflict", "--json", other).ok(t).decode(t, &again)
		if len(renamed.Imported) != 1 || renamed.Imported[0].RenamedFrom != "conf-1" || !strings.HasPrefix(renamed.Imported[0].SessionID, "conf-1~") {
			t.Fatalf("rename: %+v", renamed)
		}
		if len(again.Present) != 1 || again.Present[0].SessionID != renamed.Imported[0].SessionID {
			t.Errorf("second rename: %+v", again)
		}
		out := p.dshq("export", renamed.Imported[0].SessionID).ok(t).stdout
		if first := strings.SplitN(out, "\n", 2)[0]; !strings.Contains(first, `"id":"`+renamed.Imported[0].SessionID+`"`) {
			t.Errorf("exported header %s", first)
		}
	})

	t.Run("mcp serves the tools over stdio as the session in DSH_SESSION_ID", func(t *testing.T) {
		waitStats(t, p, stats(t, p).StreamLastSeq) // the caller must be projected
		inR, inW := io.Pipe()
		out := &lineWatch{want: `"id":3`, seen: make(chan struct{})}
		env := map[string]string{"DSH_NATS_URL": p.url, "DSH_SESSION_ID": "conf-1"}
		done := make(chan int, 1)
		var stderr bytes.Buffer
		go func() {
			done <- runContext(context.Background(), []string{"mcp"}, func(k string) string { return env[k] }, inR, out, &stderr)
		}()
		for _, line := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"session_search","arguments":{"query":"lighthouse sweeps"}}}`,
		} {
			if _, err := io.WriteString(inW, line+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-out.seen:
		case <-time.After(60 * time.Second):
			t.Fatalf("no answer to the tool call; stdout %s; stderr %s", out.String(), stderr.String())
		}
		inW.Close()
		if code := <-done; code != 0 {
			t.Errorf("mcp exited %d: %s", code, stderr.String())
		}
		got := out.String()
		for _, want := range []string{`"session_search"`, `"session_event_read"`, `Session search results (1)`, `Session conf-1~`} {
			if !strings.Contains(got, want) {
				t.Errorf("stdout lacks %s:\n%s", want, got)
			}
		}
	})

	t.Run("tail stops cleanly when its context ends (SIGINT in main)", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &lineWatch{want: "\n", seen: make(chan struct{})}
		env := map[string]string{"DSH_NATS_URL": p.url}
		done := make(chan int, 1)
		var stderr bytes.Buffer
		go func() {
			done <- runContext(ctx, []string{"tail", "--workspace", "/work/c", "--from", "0"}, func(k string) string { return env[k] }, nil, out, &stderr)
		}()
		select {
		case <-out.seen:
		case <-time.After(60 * time.Second):
			t.Fatalf("tail printed nothing; stderr %s", stderr.String())
		}
		cancel()
		if code := <-done; code != 0 || stderr.Len() != 0 {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), "session conf-1 created") {
			t.Errorf("tail output:\n%s", out.String())
		}
	})

	t.Run("a session root is walked and each file checked against its place", func(t *testing.T) {
		src, err := os.ReadFile(fixture)
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		write := func(rel, id string) {
			data := bytes.ReplaceAll(src, []byte("{{sessionId}}"), []byte(id))
			data = bytes.ReplaceAll(data, []byte("{{cwd}}/workspace"), []byte("/work/root")) // the header's workspace is the root
			data = bytes.ReplaceAll(data, []byte("{{cwd}}"), []byte("/work/root"))
			path := filepath.Join(root, rel)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("--work-root--/root-1/session.jsonl", "root-1")
		write("--work-root--/root.2~0021/session.jsonl", "root.2!")
		write("--elsewhere--/root-3/session.jsonl", "root-3")
		write("--work-root--/wrong-dir/session.jsonl", "root-4")
		write("--work-root--/flat.jsonl", "root-5")
		write("--work-root--/mixed/session.jsonl", "mixed")
		write("--work-root--/mixed/session.jsonl.zstd", "mixed")
		write("README.md", "x")
		var sum importSummary
		r := p.dshq("import", "--json", root)
		r.decode(t, &sum)
		got := map[string]string{}
		for _, x := range sum.Imported {
			got[strings.TrimPrefix(x.File, root+"/")] = "imported " + x.SessionID
		}
		for _, x := range sum.Refused {
			got[strings.TrimPrefix(x.File, root+"/")] = "refused: " + x.Reason
		}
		want := map[string]string{
			"--work-root--/root-1/session.jsonl":      "imported root-1",
			"--work-root--/root.2~0021/session.jsonl": "imported root.2!",
			"--elsewhere--/root-3/session.jsonl":      `refused: header cwd belongs in project directory "--work-root--", not "--elsewhere--"`,
			"--work-root--/wrong-dir/session.jsonl":   `refused: header id "root-4" belongs in directory "root-4", not "wrong-dir"`,
			"--work-root--/flat.jsonl":                "refused: a flat <project>/<id>.jsonl file is an older layout the original refuses; move it to <project>/<id>/session.jsonl",
			"--work-root--/mixed/session.jsonl":       "refused: the session directory holds both session.jsonl and session.jsonl.zstd",
			"--work-root--/mixed/session.jsonl.zstd":  "refused: the session directory holds both session.jsonl and session.jsonl.zstd",
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %q, want %q", k, got[k], w)
			}
		}
		if len(got) != len(want) || r.code != 1 {
			t.Errorf("exit %d, results %v", r.code, got)
		}
	})
}

// TestImportOrdinaryZstd: a log compressed as one stream, by the zstd tool
// or any zstd library, imports under either suffix, and a walk says what it
// skipped.
func TestImportOrdinaryZstd(t *testing.T) {
	p := startPipeline(t)
	plain, err := os.ReadFile(webPreset(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	// One frame holding the header and the events, as the zstd tool writes.
	if err := os.WriteFile(filepath.Join(dir, "lib.jsonl.zst"), enc.EncodeAll(plain, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	want := []string{"lib.jsonl.zst"}
	if tool, err := exec.LookPath("zstd"); err == nil {
		src := filepath.Join(t.TempDir(), "tool.jsonl")
		if err := os.WriteFile(src, plain, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(tool, "-q", "-19", src, "-o", filepath.Join(dir, "tool.jsonl.zstd")).CombinedOutput(); err != nil {
			t.Fatalf("zstd: %v\n%s", err, out)
		}
		want = append(want, "tool.jsonl.zstd")
	} else {
		t.Log("no zstd tool on PATH: only the library-written file is imported")
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	var sum importSummary
	r := p.dshq("import", "--fixture-cwd", "/work/zst", "--json", dir)
	r.decode(t, &sum)
	if r.code != 0 || len(sum.Refused) != 0 || len(sum.Imported)+len(sum.Present) != len(want) {
		t.Fatalf("exit %d, stderr %q, %+v", r.code, r.stderr, sum)
	}
	skipped := map[string]string{}
	for _, s := range sum.Skipped {
		skipped[filepath.Base(s.File)] = s.Reason
	}
	if !strings.Contains(skipped["notes.txt"], "not a session log") || !strings.Contains(skipped["link.jsonl"], "symbolic link") || len(skipped) != 2 {
		t.Errorf("skipped %v", skipped)
	}
	text := p.dshq("import", "--fixture-cwd", "/work/zst", dir).ok(t).stdout
	if !strings.Contains(text, "skipped   2 files (not session logs; -v lists them)") {
		t.Errorf("summary without -v:\n%s", text)
	}
	text = p.dshq("import", "--fixture-cwd", "/work/zst", "-v", dir).ok(t).stdout
	if !strings.Contains(text, "  skipped  "+filepath.Join(dir, "notes.txt")+": not a session log") {
		t.Errorf("summary with -v:\n%s", text)
	}
}

func TestLayoutNames(t *testing.T) {
	for _, c := range []struct{ name, cwd, project, id, segment string }{
		{"a fixture placeholder cwd escapes its braces", "{{cwd}}/workspace", "--~007B~007Bcwd~007D~007D-workspace--", "{{sessionId}}", "~007B~007BsessionId~007D~007D"},
		{"separators fold into one dash and leading dashes go", "/home//me\\x:y", "--home-me-x-y--", "abc-DEF_1.2", "abc-DEF_1.2"},
		{"an all-separator cwd becomes root", "///", "--root--", ".", "~002E"},
		{"non-ASCII is escaped per UTF-16 unit", "/tmp/é😀", "--tmp-~00E9~D83D~DE00--", "..", "~002E~002E"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := projectDir(&c.cwd); got != c.project {
				t.Errorf("projectDir(%q) = %q, want %q", c.cwd, got, c.project)
			}
			if got := encodeSegment(c.id); got != c.segment {
				t.Errorf("encodeSegment(%q) = %q, want %q", c.id, got, c.segment)
			}
		})
	}
	long := "/" + strings.Repeat("a", 300)
	if got := projectDir(&long); len(got) != 251+4 {
		t.Errorf("a long cwd gives a %d-character directory, want 255", len(got))
	}
	if got := projectDir(nil); got != "_no-cwd" {
		t.Errorf("no cwd: %q", got)
	}
}

func TestRenaming(t *testing.T) {
	t.Run("the header keeps every other member in order", func(t *testing.T) {
		in := []byte(`{"type":"session","version":0,"id":"a","createdAt":1,"cwd":"/x<y>","delegationDepth":0}`)
		got, err := withHeaderID(in, "b~1")
		if err != nil || string(got) != `{"type":"session","version":0,"id":"b~1","createdAt":1,"cwd":"/x<y>","delegationDepth":0}` {
			t.Errorf("%s, %v", got, err)
		}
	})
	t.Run("a derived id is stable, distinct per content and within the id limit", func(t *testing.T) {
		a := [][]byte{[]byte("h"), []byte("e")}
		b := [][]byte{[]byte("h"), []byte("f")}
		if derivedID("x", a) != derivedID("x", a) || derivedID("x", a) == derivedID("x", b) {
			t.Error("derived ids are not a function of the content")
		}
		long := strings.Repeat("é", 300)
		if id := derivedID(long, a); len(id) > record.MaxSessionIDBytes || record.ValidateSessionID(id) != nil {
			t.Errorf("derived id of a long id: %d bytes", len(id))
		}
	})
}

func TestWithoutServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "nats://" + ln.Addr().String()
	ln.Close()
	env := map[string]string{"DSH_NATS_URL": closed, "DSH_HOME": "/srv/dsh"}

	commands := [][]string{{"stats"}, {"search", "x"}, {"import", webPreset(t)}, {"export", "a"}, {"tail"}, {"rebuild"}}
	t.Run("an unreachable server is one clear line and exit 1", func(t *testing.T) {
		for _, args := range commands {
			r := runCLI(t, env, "", args...)
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "no servers available") || !strings.Contains(r.stderr, "is dshq serve running?") {
				t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
			}
		}
	})
	// That it fails at once, rather than waiting for the server, is what
	// the commands do, not how long they take: a server that drops every
	// connection is dialled once per command, never again.
	t.Run("a server that drops the connection is dialled once, not waited for", func(t *testing.T) {
		dropper, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex // guards dials
		dials := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := dropper.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				dials++
				mu.Unlock()
				c.Close()
			}
		}()
		t.Cleanup(func() { dropper.Close(); <-done })
		env := map[string]string{"DSH_NATS_URL": "nats://" + dropper.Addr().String(), "DSH_HOME": "/srv/dsh"}
		for _, args := range commands {
			mu.Lock()
			before := dials
			mu.Unlock()
			r := runCLI(t, env, "", args...)
			mu.Lock()
			n := dials - before
			mu.Unlock()
			if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "is dshq serve running?") || n != 1 {
				t.Errorf("%v: exit %d after %d dials, stderr %q", args, r.code, n, r.stderr)
			}
		}
	})

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"env prints the built-ins with the session, home from DSH_HOME", []string{"env", "--session", "s-1"}, "DSH_HOME=/srv/dsh\nDSH_SESSION_ID=s-1\nDSH_SHELL=1\n"},
		{"env without a session has no DSH_SESSION_ID", []string{"env", "--home", "/a/../b"}, "DSH_HOME=/b\nDSH_SHELL=1\n"},
		{"env --json is one object", []string{"env", "--session", "s-1", "--json"}, "{\n  \"DSH_HOME\": \"/srv/dsh\",\n  \"DSH_SESSION_ID\": \"s-1\",\n  \"DSH_SHELL\": \"1\"\n}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := runCLI(t, env, "", c.args...).ok(t).stdout; got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}

	t.Run("tenant permissions prints the generated block", func(t *testing.T) {
		want, err := tenancy.For("teamA", tenancy.Options{TrustedConsumers: []string{"dsh-projector", "p2"}})
		if err != nil {
			t.Fatal(err)
		}
		got := runCLI(t, env, "", "tenant", "permissions", "teamA", "--trusted-consumer", "dsh-projector", "--trusted-consumer", "p2").ok(t).stdout
		if got != want.ConfigBlock() {
			t.Errorf("got\n%s\nwant\n%s", got, want.ConfigBlock())
		}
		if r := runCLI(t, env, "", "tenant", "permissions", "team.A"); r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("an invalid tenant: exit %d, stderr %q", r.code, r.stderr)
		}
	})
	t.Run("an invalid --tenant is refused before connecting", func(t *testing.T) {
		if r := runCLI(t, env, "", "export", "a", "--tenant", "*"); r.code != 1 || !strings.Contains(r.stderr, "--tenant") {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("env refuses an invalid session id", func(t *testing.T) {
		if r := runCLI(t, env, "", "env", "--session", "a\nb"); r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("every command's help has an example", func(t *testing.T) {
		root := newRootCmd(func(string) string { return "" }, nil, nil, nil)
		for _, c := range root.Commands() {
			if c.Name() == "help" || c.Name() == "completion" {
				continue
			}
			r := runCLI(t, env, "", c.Name(), "--help")
			if r.code != 0 || !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "dshq "+c.Name()) {
				t.Errorf("%s --help: exit %d\n%s", c.Name(), r.code, r.stdout)
			}
		}
	})
}

// lineWatch collects output and closes seen once it holds want.
type lineWatch struct {
	mu     sync.Mutex // guards b and closed
	b      bytes.Buffer
	want   string
	seen   chan struct{}
	closed bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if !w.closed && strings.Contains(w.b.String(), w.want) {
		w.closed = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestServe(t *testing.T) {
	t.Run("serve reports ready with its URL and stops cleanly when its context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		home := t.TempDir()
		out := &lineWatch{want: "\n", seen: make(chan struct{})}
		var stderr bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- runContext(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--relaxed-sync", "--json", "--log-level", "warn"},
				func(k string) string { return map[string]string{"DSH_HOME": home}[k] }, nil, out, &stderr)
		}()
		select {
		case <-out.seen:
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		case <-time.After(60 * time.Second):
			t.Fatal("serve did not become ready")
		}
		var info struct {
			node.Info
			UIURL string
		}
		if err := json.Unmarshal([]byte(out.String()), &info); err != nil || !info.Embedded || !strings.HasPrefix(info.ClientURL, "nats://127.0.0.1:") {
			t.Fatalf("ready line %q (%v)", out.String(), err)
		}
		checkUI(t, info.UIURL)
		checkUIMetrics(t, info.MetricsURL)
		r := runCLI(t, map[string]string{"DSH_NATS_URL": info.ClientURL}, "", "stats", "--json").ok(t)
		if !strings.Contains(r.stdout, `"sessions": 0`) {
			t.Errorf("stats of a new node: %s", r.stdout)
		}
		if _, err := os.Stat(filepath.Join(home, "nats")); err != nil {
			t.Errorf("the embedded server's data is not under DSH_HOME: %v", err)
		}
		cancel()
		if code := <-done; code != 0 || stderr.Len() != 0 {
			t.Errorf("exit %d, stderr %q", code, stderr.String())
		}
	})
}
