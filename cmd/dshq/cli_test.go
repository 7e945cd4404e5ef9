package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/record"
)

// fixtureCwd is the workspace the corpus is imported into.
const fixtureCwd = "/work/ws"

// relayParent is the id of testdata/logs/relay-parent.jsonl, the parent of
// relay-spawned and relay-forked (its dot is escaped in subject tokens).
const relayParent = "relay.parent"

// importFacts is what an import of a corpus directory must report: how
// many files, how many refused, and for each refused file (matched by a
// part of its name) what its reason must say.
type importFacts struct {
	files, refused int
	reasons        map[string][]string
}

var (
	fixtureImport = importFacts{files: 15, refused: 4, reasons: map[string][]string{
		"seq-gap":      {"line 8", "expected 6, got 40"},
		"versionless-": {"version is missing"},
		"torn-tail":    {"line 5", "no newline"},
	}}
	// The shared corpus's 141 valid files less the three python-sdk
	// "advanced" templates, whose ids ({{parent}}, {{child-1}},
	// {{child-2}}) are placeholders --fixture-cwd does not substitute.
	sharedImport = importFacts{files: 154, refused: 16, reasons: map[string][]string{
		"cordis-tool-round":               {"line 8", "expected 6, got 87"},
		"acp-snapshot":                    {"version is missing"},
		"python-sdk-single-exe__advanced": {`line 1: placeholder: session header id "{{`, "--fixture-cwd substitutes only"},
	}}
)

// TestCorpus drives the CLI through the fixture logs on one pipeline:
// import (twice), stats, export, search, trace, read, tail and rebuild, in
// order.
func TestCorpus(t *testing.T) {
	dir := corpus.Fixtures(t)
	p := startPipeline(t)
	first := checkImport(t, p, dir, fixtureImport)
	gen := fmt.Sprint(first.Generation)
	var page dshq.SessionSearchPage
	t.Run("search prints aligned hits with their snippet, and --json the raw reply", func(t *testing.T) {
		golden(t, "search.txt", p.dshq("search", "harbour", "--limit", "3", "--min-generation", gen).ok(t).stdout)
		p.dshq("search", "harbour", "--limit", "3", "--json").ok(t).decode(t, &page)
		if len(page.Items) != 3 || page.NextCursor == "" || page.Generation < first.Generation {
			t.Fatalf("page: %d items, cursor %q, generation %d", len(page.Items), page.NextCursor, page.Generation)
		}
		all := p.dshq("search", "harbour", "--all", "--limit", "2").ok(t).stdout
		var n int
		if _, err := fmt.Sscanf(lastLine(all), "%d sessions", &n); err != nil || n <= 3 {
			t.Errorf("--all found %d sessions (%v):\n%s", n, err, all)
		}
		golden(t, "search-session.txt", p.dshq("search", "harbour", "--session", page.Items[0].Header.ID, "--type", "tool/call").ok(t).stdout)
		golden(t, "search-none.txt", p.dshq("search", "no such phrase anywhere", "--cwd", fixtureCwd).ok(t).stdout)
	})

	t.Run("trace and read print the lineage, the event trace and the event window", func(t *testing.T) {
		hit := page.Items[0]
		id, seq := hit.Header.ID, fmt.Sprint(hit.BestMatch.Seq)
		golden(t, "trace.txt", p.dshq("trace", id).ok(t).stdout)
		golden(t, "trace-lineage.txt", p.dshq("trace", relayParent).ok(t).stdout)
		golden(t, "trace-seq.txt", p.dshq("trace", id, "--seq", seq).ok(t).stdout)
		golden(t, "read-seq.txt", p.dshq("read", id, "--seq", seq, "--before", "2", "--after", "2").ok(t).stdout)
		var win dshq.EventWindow
		p.dshq("read", id, "--seq", seq, "--json").ok(t).decode(t, &win)
		if win.Target.Seq != hit.BestMatch.Seq || len(win.Events) != 1 {
			t.Errorf("window %d..%d around %d", win.StartSeq, win.EndSeq, win.Target.Seq)
		}
		full := p.dshq("read", id).ok(t).stdout
		if want := fmt.Sprintf("%d events at generation", hit.BestMatch.Seq+1); !strings.Contains(full, "events at generation") || strings.Count(full, "\n") < int(hit.BestMatch.Seq)+2 {
			t.Errorf("read lists too few events (want at least %q):\n%s", want, full)
		}
	})

	t.Run("tail resumes after a generation without dropping or repeating a message", func(t *testing.T) {
		g1 := importFixture(t, p, "tail-1", "/work/tail")
		waitStats(t, p, g1) // tail-2 must land in a later commit
		importFixture(t, p, "tail-2", "/work/tail")
		// An import holds the session's write lease while it publishes; how
		// many lease messages the feed shows for it depends on when the
		// projector's watcher sees the key, so the data messages are compared.
		data := "session,event,surface,title,quarantine"
		whole := tailJSON(t, p, "--workspace", "/work/tail", "--from", "0", "-n", "14", "--kinds", data)
		if got := sessionsOf(whole); got != "tail-1 x7, tail-2 x7" {
			t.Fatalf("whole feed of the workspace: %s", got)
		}
		resumed := tailJSON(t, p, "--workspace", "/work/tail", "--from", fmt.Sprint(g1), "-n", "7", "--kinds", data)
		for i, m := range resumed {
			if w := whole[7+i]; m.Generation != w.Generation || m.Kind != w.Kind || m.SessionID != w.SessionID {
				t.Errorf("resumed message %d is %s %s@%d, want %s %s@%d", i, m.Kind, m.SessionID, m.Generation, w.Kind, w.SessionID, w.Generation)
			}
		}
		text := p.dshq("tail", "--session", "tail-1", "--from", "0", "-n", "2", "--kinds", "event").ok(t).stdout
		if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != 2 || !strings.Contains(strings.Join(strings.Fields(lines[0]), " "), "tail-1 0 user/message current Open /work/tail/notes/ferry.md and reply FERRY_NOTES_OK.") {
			t.Errorf("text tail:\n%s", text)
		}
	})

	t.Run("tail follows messages committed after it started", func(t *testing.T) {
		from := fmt.Sprint(stats(t, p).Generation)
		done := make(chan result, 1)
		go func() {
			done <- runCLI(t, p.env, "", "tail", "--session", "live-1", "--from", from, "-n", "7", "--json")
		}()
		importFixture(t, p, "live-1", "/work/live")
		r := (<-done).ok(t)
		if n := strings.Count(r.stdout, "\n"); n != 7 {
			t.Errorf("%d messages:\n%s", n, r.stdout)
		}
	})

	t.Run("rebuild swaps in a projection of the whole stream with the same counts", func(t *testing.T) {
		// The counts to compare are those of the whole stream: wait until
		// the serving projection has applied its last record (the subtest
		// before may end with records still in flight to it).
		st := waitStats(t, p, stats(t, p).StreamLastSeq)
		var rs admin.RebuildStatus
		p.dshq("rebuild", "--json").ok(t).decode(t, &rs)
		if rs.Running || !rs.Swapped || rs.Error != "" || uint64(rs.Records) < st.StreamRecords || rs.Applied < st.StreamLastSeq {
			t.Errorf("rebuild status %+v, stream %d records", rs, st.StreamRecords)
		}
		after := stats(t, p)
		if after.Epoch == st.Epoch || after.Sessions != st.Sessions || after.Events != st.Events || after.Quarantined != 0 {
			t.Errorf("after rebuild %+v, before %+v", after, st)
		}
		if txt := p.dshq("rebuild").ok(t).stdout; !strings.HasPrefix(txt, "rebuilt: ") || !strings.Contains(txt, "epoch "+after.Epoch+" → ") {
			t.Errorf("rebuild text: %q", txt)
		}
		// Search still answers on the swapped-in index.
		if out := p.dshq("search", "FERRY_NOTES_OK", "--cwd", "/work/tail").ok(t).stdout; !strings.Contains(out, "2 sessions") {
			t.Errorf("search after rebuild:\n%s", out)
		}
	})

	t.Run("failures are one line on stderr and a non-zero exit", func(t *testing.T) {
		for _, c := range []struct {
			name string
			args []string
			want string
		}{
			{"export of a missing session", []string{"export", "nope"}, `session "nope" was not found`},
			{"read of a missing session", []string{"read", "nope"}, "not found"},
			{"trace of a missing session", []string{"trace", "nope", "--seq", "1"}, "not found"},
			{"search of a missing session", []string{"search", "x", "--session", "nope"}, "not found"},
			{"an event past the end", []string{"read", "tail-1", "--seq", "99"}, "99"},
			{"a limit out of range", []string{"search", "x", "--limit", "500"}, "limit"},
			{"an unknown flag", []string{"search", "x", "--bogus"}, "unknown flag: --bogus"},
			{"a missing argument", []string{"export"}, "accepts 1 arg(s), received 0"},
			{"an unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
			{"a window without a seq", []string{"read", "tail-1", "--before", "2"}, "--before and --after need --seq"},
			{"an unknown feed kind", []string{"tail", "--kinds", "bogus"}, `unknown kind "bogus"`},
			{"workspace and session together", []string{"tail", "--workspace", "/a", "--session", "b"}, "do not go together"},
			{"an invalid session id", []string{"export", "a\x01b"}, "control"},
			{"a missing import path", []string{"import", "/nonexistent/x.jsonl"}, "no such file or directory"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := p.dshq(c.args...)
				if r.code == 0 || strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "dshq: ") || !strings.Contains(r.stderr, c.want) {
					t.Errorf("exit %d, stderr %q; want one line with %q", r.code, r.stderr, c.want)
				}
			})
		}
	})
}

// waitStats waits until the projection has applied gen and returns stats.
func waitStats(t *testing.T, p *pipeline, gen uint64) admin.Stats {
	t.Helper()
	p.dshq("search", "x", "--min-generation", fmt.Sprint(gen), "--timeout-ms", "30000").ok(t)
	return stats(t, p)
}

func stats(t *testing.T, p *pipeline) admin.Stats {
	t.Helper()
	var st admin.Stats
	p.dshq("stats", "--json").ok(t).decode(t, &st)
	return st
}

// importFixture imports the fixture log web-preset.jsonl (six events) as
// session id in workspace cwd and returns the generation it reached.
func importFixture(t *testing.T, p *pipeline, id, cwd string) uint64 {
	t.Helper()
	var sum importSummary
	p.dshq("import", "--fixture-cwd", cwd, "--fixture-session-id", id, "--json", webPreset(t)).ok(t).decode(t, &sum)
	if len(sum.Imported) != 1 || sum.Imported[0].SessionID != id {
		t.Fatalf("import of %s: %+v", id, sum)
	}
	return sum.Generation
}

// tailJSON runs tail --json with args and decodes its messages.
func tailJSON(t *testing.T, p *pipeline, args ...string) []feed.Message {
	t.Helper()
	r := p.dshq(append([]string{"tail", "--json"}, args...)...).ok(t)
	var out []feed.Message
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		m, err := feed.Decode(sc.Bytes())
		if err != nil {
			t.Fatalf("tail line %q: %v", sc.Text(), err)
		}
		out = append(out, *m)
	}
	return out
}

// sessionsOf summarises which sessions messages are of, in order.
func sessionsOf(msgs []feed.Message) string {
	var parts []string
	for i := 0; i < len(msgs); {
		j := i
		for j < len(msgs) && msgs[j].SessionID == msgs[i].SessionID {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s x%d", msgs[i].SessionID, j-i))
		i = j
	}
	return strings.Join(parts, ", ")
}

// rewrite is what an imported file's export must be: the file read with
// the import's placeholder substitution, under the id it was stored with,
// written back by the upstream writer rules.
func rewrite(t *testing.T, src []byte, r importResult) []byte {
	t.Helper()
	sum := sha256.Sum256(src)
	fixtureID := "fixture-" + hex.EncodeToString(sum[:8])
	h, events, err := record.ReadAll(bytes.NewReader(src), record.WithFixturePlaceholders(fixtureCwd, fixtureID))
	if err != nil {
		t.Fatal(err)
	}
	if r.RenamedFrom != "" {
		if h.Raw, err = withHeaderID(h.Raw, r.SessionID); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	w := record.NewWriter(&b, record.WithPacking(h.FormatVersion == 0))
	if err := w.WriteHeader(h); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if err := w.WriteEvent(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestSharedCorpus imports the deepseek-harness corpus: every valid file
// imports and the invalid ones are refused with their reason, a second
// import stores nothing, the stats count it, and every session exports as
// the original writer wrote it.
func TestSharedCorpus(t *testing.T) {
	dir := corpus.Require(t)
	checkImport(t, startPipeline(t), dir, sharedImport)
}

// checkImport imports dir twice into p and checks the reports, the stats
// and every imported session's export; it returns the first report.
func checkImport(t *testing.T, p *pipeline, dir string, facts importFacts) importSummary {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) != facts.files {
		t.Fatalf("%d logs in %s (%v), want %d", len(files), dir, err, facts.files)
	}
	valid := facts.files - facts.refused
	var first importSummary
	t.Run("every valid file imports and the invalid ones are refused with their reason", func(t *testing.T) {
		r := p.dshq("import", "--fixture-cwd", fixtureCwd, "--rename-on-conflict", "--json", dir)
		want := fmt.Sprintf(`{"error":{"code":"DSHQ_IMPORT_REFUSED","message":"%d of %d files refused"}}`+"\n", facts.refused, facts.files)
		if r.code != 1 || r.stderr != want {
			t.Fatalf("exit %d, stderr %q; want 1, %q", r.code, r.stderr, want)
		}
		r.decode(t, &first)
		if n := len(first.Imported) + len(first.Present); n != valid {
			t.Errorf("%d files imported or present, want %d", n, valid)
		}
		if len(first.Refused) != facts.refused {
			t.Fatalf("%d refused, want %d", len(first.Refused), facts.refused)
		}
	refused:
		for _, r := range first.Refused {
			for part, wants := range facts.reasons {
				if !strings.Contains(r.File, part) {
					continue
				}
				for _, w := range wants {
					if !strings.Contains(r.Reason, w) {
						t.Errorf("%s: reason %q does not say %q", r.File, r.Reason, w)
					}
				}
				continue refused
			}
			t.Errorf("%s refused: %s", r.File, r.Reason)
		}
		if first.Generation == 0 {
			t.Error("no generation reported")
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	before := waitStats(t, p, first.Generation)

	t.Run("importing the corpus again stores nothing twice", func(t *testing.T) {
		var again importSummary
		r := p.dshq("import", "--fixture-cwd", fixtureCwd, "--rename-on-conflict", "--json", dir)
		r.decode(t, &again)
		if len(again.Imported) != 0 || len(again.Present) != valid || len(again.Refused) != facts.refused || again.Generation != 0 {
			t.Errorf("second import: %d imported, %d present, %d refused, generation %d; want 0, %d, %d, 0; refused: %+v",
				len(again.Imported), len(again.Present), len(again.Refused), again.Generation, valid, facts.refused, again.Refused)
		}
		after := stats(t, p)
		if after.StreamRecords != before.StreamRecords || after.StreamLastSeq != before.StreamLastSeq {
			t.Errorf("stream grew from %d to %d records", before.StreamRecords, after.StreamRecords)
		}
	})

	t.Run("stats count the imported sessions and events", func(t *testing.T) {
		ids := map[string]bool{}
		events := int64(0)
		for _, r := range first.Imported {
			ids[r.SessionID] = true
			events += int64(r.Events)
		}
		for _, r := range first.Present {
			if !ids[r.SessionID] {
				t.Errorf("%s reported present under %s, which this import did not store", r.File, r.SessionID)
			}
		}
		st := before
		if st.Sessions != int64(len(ids)) || st.Events != events || st.Quarantined != 0 || st.InvalidSessions != 0 || st.Lag != 0 {
			t.Errorf("stats %+v; want %d sessions, %d events, nothing quarantined or invalid, no lag", st, len(ids), events)
		}
		if st.StreamRecords != uint64(st.Sessions+st.Events) || st.Generation != st.StreamLastSeq {
			t.Errorf("stream holds %d records (last %d), projection at %d; want %d", st.StreamRecords, st.StreamLastSeq, st.Generation, st.Sessions+st.Events)
		}
		text := p.dshq("stats").ok(t).stdout
		if !strings.Contains(text, fmt.Sprintf("sessions     %d", st.Sessions)) || !strings.Contains(text, "quarantined  0") {
			t.Errorf("stats text:\n%s", text)
		}
	})

	t.Run("every imported session exports as the original writer wrote it", func(t *testing.T) {
		exact, renamed := 0, 0
		dir := t.TempDir()
		for i, r := range first.Imported {
			out := filepath.Join(dir, fmt.Sprintf("%d.jsonl", i))
			p.dshq("export", r.SessionID, "-o", out).ok(t)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			src, err := os.ReadFile(r.File)
			if err != nil {
				t.Fatal(err)
			}
			if r.RenamedFrom != "" {
				renamed++
			}
			if !bytes.Contains(src, []byte("{{")) && r.RenamedFrom == "" {
				exact++
				if !bytes.Equal(got, src) {
					t.Errorf("%s: export differs from the file", r.File)
				}
				continue
			}
			want := rewrite(t, src, r)
			if !bytes.Equal(got, want) {
				t.Errorf("%s: export differs from the substituted file", r.File)
			}
		}
		if exact == 0 || renamed == 0 {
			t.Errorf("%d files compared byte for byte with their original, %d renamed on conflict; want some of each", exact, renamed)
		}
	})

	t.Run("a zstd export reads back as the same records and imports as already present", func(t *testing.T) {
		id := first.Imported[0].SessionID
		out := filepath.Join(t.TempDir(), "s.jsonl.zstd")
		var rep exportReport
		p.dshq("export", id, "-o", out, "--json").ok(t).decode(t, &rep)
		if !rep.Zstd || rep.SessionID != id {
			t.Errorf("report %+v", rep)
		}
		plain := p.dshq("export", id).ok(t).stdout
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		h, events, err := record.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		w := record.NewWriter(&b, record.WithPacking(h.FormatVersion == 0))
		_ = w.WriteHeader(h)
		for _, e := range events {
			_ = w.WriteEvent(e)
		}
		if err := w.Close(); err != nil || b.String() != plain {
			t.Errorf("zstd export does not hold the plain export's records (%v)", err)
		}
		var sum importSummary
		p.dshq("import", "--json", out).ok(t).decode(t, &sum)
		if len(sum.Present) != 1 || sum.Present[0].SessionID != id {
			t.Errorf("re-import: %+v", sum)
		}
	})
	return first
}
