package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/record"
)

// watchRun is one running dshq watch.
type watchRun struct {
	cancel context.CancelFunc
	done   chan int
	out    *testenv.Buffer
	errs   *testenv.Buffer
}

// startWatch runs dshq watch in-process with args until stop.
func startWatch(t testing.TB, p *pipeline, args ...string) *watchRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchRun{cancel: cancel, done: make(chan int, 1), out: &testenv.Buffer{}, errs: &testenv.Buffer{}}
	env := map[string]string{"DSH_NATS_URL": p.url, "HOME": t.TempDir()}
	go func() {
		w.done <- runContext(ctx, append([]string{"watch"}, args...), func(k string) string { return env[k] }, strings.NewReader(""), w.out, w.errs)
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// stop stops the watcher and waits for it; it fails the test unless it
// exited 0.
func (w *watchRun) stop(t testing.TB) {
	t.Helper()
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
	select {
	case code := <-w.done:
		if code != 0 {
			t.Errorf("watch exited %d: %s", code, w.errs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("watch did not stop within 60 s")
	}
}

// waitFor waits until cond holds, failing the test with what after the
// deadline.
func waitFor(t *testing.T, d time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// expectedLogs is what a one-shot import of the finished file stores (on
// this host: the headers name it, as watch's do by default).
func expectedLogs(t *testing.T, path string, data []byte) []capture.Log {
	t.Helper()
	f := capture.Detect(path, data)
	host, _ := os.Hostname()
	ups, err := capture.Convert(follow.NewConverterOn(f, path, nil, host), data)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := capture.Collect(ups)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// storeOf returns a harness SDK store on the pipeline.
func storeOf(t *testing.T, p *pipeline) *bus.Store {
	t.Helper()
	nc, err := nats.Connect(p.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err := bus.NewStore(context.Background(), nc)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// stored reports whether the stream holds exactly the logs, and if not,
// what differs.
func stored(st *bus.Store, logs []capture.Log) (bool, string) {
	for _, l := range logs {
		id := l.Header.Header.ID
		recs, err := st.Records(context.Background(), id)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", id, err)
		}
		if len(recs) != len(l.Events)+1 {
			return false, fmt.Sprintf("%s: %d records stored, want %d", id, len(recs), len(l.Events)+1)
		}
		if !bytes.Equal(recs[0].Data, l.Header.Raw) {
			return false, fmt.Sprintf("%s: another header", id)
		}
		for i, e := range l.Events {
			if !bytes.Equal(recs[i+1].Data, e.Raw) {
				return false, fmt.Sprintf("%s: event %d differs", id, i)
			}
		}
	}
	return true, ""
}

// writer appends a source file's lines to path, as a harness does.
type writer struct {
	t    *testing.T
	path string
	f    *os.File
}

func newWriter(t *testing.T, path string) *writer {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &writer{t: t, path: path, f: f}
}

func (w *writer) write(b []byte) {
	w.t.Helper()
	if _, err := w.f.Write(b); err != nil {
		w.t.Fatal(err)
	}
}

// lines splits data after each newline.
func lines(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			i = len(data) - 1
		}
		out = append(out, data[:i+1])
		data = data[i+1:]
	}
	return out
}

// TestWatch writes a real Claude Code transcript with its subagent files
// and a real Codex rollout line by line — with pauses, writes torn in the
// middle of a line, a new directory, and a restart of dshq watch half way —
// and checks that the sessions are live while written, that the stored
// logs equal a one-shot import of the finished files, and that they stop
// being live once the files are idle.
//
// It runs on small transcripts and a rollout of our own (a user's clone has
// no ../shared), and on real ones from the shared corpus.
func TestWatch(t *testing.T) {
	type files func(claudeRoot, codexRoot string) []watchSource
	run := func(t *testing.T, sources files) {
		home := t.TempDir()
		claudeRoot := filepath.Join(home, "claude", "projects")
		codexRoot := filepath.Join(home, "codex", "sessions")
		testWatch(t, claudeRoot, codexRoot, sources(claudeRoot, codexRoot))
	}
	t.Run("fixtures", func(t *testing.T) {
		cc := filepath.Join("..", "..", "capture", "claudecode", "testdata")
		cx := filepath.Join("..", "..", "capture", "codex", "testdata")
		const rollout = "rollout-2026-03-10T09-00-00-0a0b0c0d-1111-4222-8333-444455556666.jsonl"
		run(t, func(claudeRoot, codexRoot string) []watchSource {
			return []watchSource{
				{filepath.Join(cc, "turns.jsonl"), filepath.Join(claudeRoot, "-home-dev-kiln", "7d1c2a40-0000-4000-8000-00000000a001.jsonl")},
				{filepath.Join(cc, "layouts", "a1b2c3d4-0000-4000-8000-000000000001", "subagents", "agent-probe1.jsonl"), filepath.Join(claudeRoot, "-home-dev-probe", "a1b2c3d4-0000-4000-8000-000000000001", "subagents", "agent-probe1.jsonl")},
				{filepath.Join(cc, "sidechain.jsonl"), filepath.Join(claudeRoot, "-home-dev-sc", "sc-9.jsonl")},
				// The codex root does not exist when watch starts.
				{filepath.Join(cx, rollout), filepath.Join(codexRoot, "2026", "03", "10", rollout)},
			}
		})
	})
	t.Run("shared", func(t *testing.T) {
		dir := corpus.RequireHarnesses(t)
		spotter := filepath.Join(dir, "claude-code", "marot__spotter", "test", "fixtures", "transcripts")
		run(t, func(claudeRoot, codexRoot string) []watchSource {
			return []watchSource{
				{filepath.Join(spotter, "tool_heavy.jsonl"), filepath.Join(claudeRoot, "-home-marco-projects-spotter", "d6e0bada-1959-4eec-a9d2-0bfade768d8f.jsonl")},
				{filepath.Join(spotter, "258c7280-ae70-4798-800f-63464d01a85d", "subagents", "agent-a881341.jsonl"), filepath.Join(claudeRoot, "-home-USER-projects-spotter", "258c7280-ae70-4798-800f-63464d01a85d", "subagents", "agent-a881341.jsonl")},
				{filepath.Join(dir, "claude-code", "daaain__claude-code-log", "test", "test_data", "sidechain_integrated.jsonl"), filepath.Join(claudeRoot, "-e-Workspace", "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358.jsonl")},
				// The codex root does not exist when watch starts.
				{filepath.Join(dir, "codex", "madshn__localpush", "src-tauri", "tests", "fixtures", "codex", "2026-02-23", "raw", "sessions", "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"), filepath.Join(codexRoot, "2026", "02", "23", "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl")},
			}
		})
	})
}

// watchSource is a file TestWatch writes line by line (src) into a root
// (dst).
type watchSource struct{ src, dst string }

func testWatch(t *testing.T, claudeRoot, codexRoot string, sources []watchSource) {
	p := startPipeline(t)
	st := storeOf(t, p)
	if err := os.MkdirAll(claudeRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"--claude", claudeRoot, "--codex", codexRoot, "--idle", "3s", "--rescan", "1s"}
	var want []capture.Log
	var datas [][][]byte
	for _, s := range sources {
		data, err := os.ReadFile(s.src)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, expectedLogs(t, s.dst, data)...)
		datas = append(datas, lines(data))
	}
	w := startWatch(t, p, args...)
	waitFor(t, 30*time.Second, w.out.String, func() bool { return strings.Contains(w.out.String(), "missing   codex") })

	writers := make([]*writer, len(sources))
	for i, s := range sources {
		writers[i] = newWriter(t, s.dst)
	}
	// Interleave the files' lines; tear every seventh line in two writes
	// with a pause between; restart watch when half the lines are written.
	total := 0
	for _, d := range datas {
		total += len(d)
	}
	// Restart after the fourth line of every file (each has more after
	// it), and again when half the lines are written.
	written, restarts := 0, 0
	live := false
	for n := 0; written < total; n++ {
		for i, d := range datas {
			if n >= len(d) {
				continue
			}
			line := d[n]
			if n%7 == 3 && len(line) > 2 {
				writers[i].write(line[:len(line)/2])
				time.Sleep(30 * time.Millisecond)
				writers[i].write(line[len(line)/2:])
			} else {
				writers[i].write(line)
			}
			written++
		}
		if n%10 == 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if !live && n == 3 {
			waitFor(t, 10*time.Second, w.out.String, func() bool {
				s, err := st.Stat(context.Background(), want[0].Header.Header.ID)
				return err == nil && s != nil && s.Live
			})
			live = true
		}
		if n == 3 && restarts == 0 || written >= total/2 && restarts == 1 {
			// Stopped while it holds the first file's session.
			waitFor(t, 10*time.Second, w.out.String, func() bool {
				return strings.Contains(w.out.String(), "live      "+want[0].Header.Header.ID)
			})
			w.stop(t)
			if !strings.Contains(w.out.String(), "idle      "+want[0].Header.Header.ID) {
				t.Errorf("a stopped watch did not close %s:\n%s", want[0].Header.Header.ID, w.out.String())
			}
			w = startWatch(t, p, args...)
			restarts++
		}
	}
	waitFor(t, 3*time.Minute, func() string { _, why := stored(st, want); return why + "\n" + w.out.String() }, func() bool {
		ok, _ := stored(st, want)
		return ok
	})
	if out := w.out.String(); strings.Contains(out, " error     ") {
		t.Errorf("watch reported errors:\n%s", out)
	}
	waitFor(t, 30*time.Second, w.out.String, func() bool {
		for _, l := range want {
			s, err := st.Stat(context.Background(), l.Header.Header.ID)
			if err != nil || s == nil || s.Live {
				return false
			}
		}
		return true
	})
	for _, s := range sources[:1] {
		data, _ := os.ReadFile(s.dst)
		got := p.dshq("export", want[0].Header.Header.ID, "--source").ok(t).stdout
		if got != string(data) {
			t.Errorf("export --source of the watched %s differs from it", s.dst)
		}
	}
}

// TestWatchFastAndMany writes one rollout at about 1000 lines/s and one
// hundred transcripts at once, and checks that every stored log equals a
// one-shot import of its finished file.
func TestWatchFastAndMany(t *testing.T) {
	dir := corpus.RequireHarnesses(t)
	p := startPipeline(t)
	st := storeOf(t, p)
	home := t.TempDir()
	claudeRoot := filepath.Join(home, "projects")
	codexRoot := filepath.Join(home, "sessions")
	for _, d := range []string{claudeRoot, codexRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := startWatch(t, p, "--claude", claudeRoot, "--codex", codexRoot, "--idle", "2s")
	waitFor(t, 30*time.Second, w.out.String, func() bool { return strings.Count(w.out.String(), "watching") == 2 })

	big, err := os.ReadFile(filepath.Join(dir, "codex", "madshn__localpush", "src-tauri", "tests", "fixtures", "codex", "2026-02-23", "raw", "sessions", "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	fast := filepath.Join(codexRoot, "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl")
	want := expectedLogs(t, fast, big)
	short, err := os.ReadFile(filepath.Join(dir, "claude-code", "marot__spotter", "test", "fixtures", "transcripts", "short.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	const many = 100
	manyData := make([][]byte, many)
	manyPaths := make([]string, many)
	for i := range many {
		id := fmt.Sprintf("55604662-cf2a-4331-851a-%012d", i)
		manyData[i] = bytes.ReplaceAll(short, []byte("55604662-cf2a-4331-851a-ec234028f8ca"), []byte(id))
		manyPaths[i] = filepath.Join(claudeRoot, "-home-marco-projects-spotter", id+".jsonl")
		want = append(want, expectedLogs(t, manyPaths[i], manyData[i])...)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		fw := newWriter(t, fast)
		ls := lines(big)
		start := time.Now()
		for i, l := range ls {
			fw.write(l)
			if i%50 == 49 {
				// 1000 lines/s: 50 lines every 50 ms.
				if d := time.Until(start.Add(time.Duration(i+1) * time.Millisecond)); d > 0 {
					time.Sleep(d)
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		ws := make([]*writer, many)
		for i := range many {
			ws[i] = newWriter(t, manyPaths[i])
		}
		ls := make([][][]byte, many)
		for i := range many {
			ls[i] = lines(manyData[i])
		}
		for n := 0; n < len(ls[0]); n++ {
			for i := range many {
				ws[i].write(ls[i][n])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	wg.Wait()
	// A deadline for correctness, not speed (the latency benchmark measures
	// that): under the race detector on two loaded cores the SDK's appends
	// time out and are retried, and the last lines land minutes late.
	waitFor(t, 5*time.Minute, func() string { _, why := stored(st, want); return why + "\n" + w.out.String() + w.errs.String() }, func() bool {
		ok, _ := stored(st, want)
		return ok
	})
	if out := w.out.String(); strings.Contains(out, " error     ") {
		t.Errorf("watch reported errors:\n%s", out)
	}
}

// TestWatchPollsAndFollowsADeepseekRoot runs watch without inotify
// (--poll): a Claude Code transcript written in two parts, one of them
// torn, is stored as a one-shot import of the finished file; and a
// deepseek-harness log of a --deepseek root written in two halves is stored
// whole, as dshq import stores it.
func TestWatchPollsAndFollowsADeepseekRoot(t *testing.T) {
	p := startPipeline(t)
	st := storeOf(t, p)
	home := t.TempDir()
	claudeRoot, dsRoot := filepath.Join(home, "projects"), filepath.Join(home, "sessions")
	for _, d := range []string{claudeRoot, dsRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := startWatch(t, p, "--claude", claudeRoot, "--codex", "off", "--deepseek", dsRoot, "--poll", "100ms", "--idle", "2s")
	waitFor(t, 30*time.Second, w.out.String, func() bool { return strings.Contains(w.out.String(), "polling every 100ms") })

	src, err := os.ReadFile(filepath.Join("..", "..", "capture", "claudecode", "testdata", "turns.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(claudeRoot, "-home-dev-kiln", "7d1c2a40-0000-4000-8000-00000000a001.jsonl")
	want := expectedLogs(t, dst, src)
	cw := newWriter(t, dst)
	cut := len(src)/2 + 7 // inside a line
	cw.write(src[:cut])
	waitFor(t, 30*time.Second, w.out.String, func() bool { return strings.Contains(w.out.String(), "live      cc-7d1c2a40") })
	cw.write(src[cut:])

	log, err := os.ReadFile(filepath.Join(corpus.Fixtures(t), "tool-round.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	log = bytes.ReplaceAll(bytes.ReplaceAll(log, []byte("{{sessionId}}"), []byte("ds-watched")), []byte("{{cwd}}"), []byte("/work/ws"))
	dw := newWriter(t, filepath.Join(dsRoot, "project", "ds-watched.jsonl"))
	half := bytes.IndexByte(log[len(log)/2:], '\n') + len(log)/2 + 1
	dw.write(log[:half])
	dw.write(log[half : half+5]) // a torn line: not imported until it ends
	waitFor(t, 30*time.Second, w.out.String, func() bool {
		recs, err := st.Records(context.Background(), "ds-watched")
		return err == nil && len(recs) == records(t, log[:half])
	})
	dw.write(log[half+5:])

	waitFor(t, 30*time.Second, func() string { _, why := stored(st, want); return why + "\n" + w.out.String() }, func() bool {
		ok, _ := stored(st, want)
		return ok
	})
	waitFor(t, 30*time.Second, w.out.String, func() bool {
		recs, err := st.Records(context.Background(), "ds-watched")
		return err == nil && len(recs) == records(t, log)
	})
	if out := w.out.String(); strings.Contains(out, " error     ") {
		t.Errorf("watch reported errors:\n%s", out)
	}
}

// records is the number of records dshq import stores of a deepseek-harness
// log (packed chunk rows expand to several events).
func records(t *testing.T, log []byte) int {
	t.Helper()
	_, events, err := record.ReadAll(bytes.NewReader(log), record.WithoutPlaceholders())
	if err != nil {
		t.Fatal(err)
	}
	return len(events) + 1
}

// TestWatchReportsNameAFileOnce prints the reports that carry a file and
// an error or a note: the path is printed once.
func TestWatchReportsNameAFileOnce(t *testing.T) {
	path := "/home/u/.claude/projects/p/7d1c2a40.jsonl"
	for _, r := range []follow.Report{
		{Kind: follow.ReportError, Path: path, Err: &follow.ChangedError{Path: path, SessionID: "cc-7d1c2a40", Why: "it was truncated"}},
		{Kind: follow.ReportNotice, Path: path, Detail: (&follow.NotRegularError{Path: path}).Why()},
		{Kind: follow.ReportRetry, Path: path, Err: errors.New("lease")},
	} {
		var b bytes.Buffer
		printWatchReport(&b, r)
		if n := strings.Count(b.String(), path); n != 1 {
			t.Errorf("%s report names the file %d times: %q", r.Kind, n, b.String())
		}
	}
}
