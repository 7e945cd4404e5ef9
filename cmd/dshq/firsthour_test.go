package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/node"
)

// tour is a pipeline holding the README's tour sessions (s-7f3c and its
// fork s-9a01, both in /home/u/proj).
func tour(t *testing.T) *pipeline {
	t.Helper()
	p := startPipeline(t)
	var sum importSummary
	p.dshq("import", "--json", "../../testdata/sample.jsonl", "../../testdata/fork.jsonl").ok(t).decode(t, &sum)
	waitStats(t, p, sum.Generation)
	return p
}

// jsonError decodes a --json run's stderr as one error object.
func jsonError(t *testing.T, r result) dshq.ErrorBody {
	t.Helper()
	var e dshq.ErrorReply
	if strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("stderr is not one line: %q", r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("stderr is not {\"error\":{\"code\",\"message\"}}: %q (%v)", r.stderr, err)
	}
	return e.Error
}

func TestJSONErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "nats://" + ln.Addr().String()
	ln.Close()
	t.Run("an unreachable server is DSHQ_UNAVAILABLE", func(t *testing.T) {
		r := runCLI(t, map[string]string{"DSH_NATS_URL": closed}, "", "search", "x", "--json")
		if e := jsonError(t, r); r.code != 1 || e.Code != CodeUnavailable || !strings.Contains(e.Message, "is dshq serve running?") || r.stdout != "" {
			t.Errorf("exit %d, %+v, stdout %q", r.code, e, r.stdout)
		}
	})
	t.Run("a bad flag is DSHQ_USAGE, whatever its place", func(t *testing.T) {
		for _, args := range [][]string{{"search", "--json", "--no-such-flag", "x"}, {"--json", "trace"}, {"read", "x", "--after", "1", "--json"}} {
			r := runCLI(t, map[string]string{"DSH_NATS_URL": closed}, "", args...)
			if e := jsonError(t, r); r.code != 1 || e.Code != CodeUsage {
				t.Errorf("%v: exit %d, %+v", args, r.code, e)
			}
		}
	})
	t.Run("without --json an error stays one line of text", func(t *testing.T) {
		r := runCLI(t, map[string]string{"DSH_NATS_URL": closed}, "", "trace")
		if r.code != 1 || r.stderr != "dshq: accepts 1 arg(s), received 0\n" {
			t.Errorf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

func TestJSONOutput(t *testing.T) {
	p := tour(t)
	t.Run("a service error keeps its code", func(t *testing.T) {
		r := p.dshq("read", "no-such-session", "--json")
		if e := jsonError(t, r); r.code != 1 || e.Code != dshq.CodeSessionNotFound {
			t.Errorf("exit %d, %+v", r.code, e)
		}
	})
	t.Run("search --all --json is one document holding every page", func(t *testing.T) {
		r := p.dshq("search", "retry budget", "--limit", "1", "--all", "--json").ok(t)
		var page dshq.SessionSearchPage
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		if err := dec.Decode(&page); err != nil {
			t.Fatal(err)
		}
		if dec.More() {
			t.Fatalf("more than one document:\n%s", r.stdout)
		}
		if len(page.Items) != 2 || page.NextCursor != "" || page.Generation == 0 {
			t.Errorf("%d items, cursor %q, generation %d", len(page.Items), page.NextCursor, page.Generation)
		}
		var events dshq.EventSearchPage
		p.dshq("search", "retry", "--session", "s-7f3c", "--limit", "1", "--all", "--json").ok(t).decode(t, &events)
		if len(events.Items) < 2 || events.NextCursor != "" {
			t.Errorf("events: %d items, cursor %q", len(events.Items), events.NextCursor)
		}
	})
}

func TestMessagesInTheFlagsTerms(t *testing.T) {
	p := tour(t)
	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"a bogus --surface names the flag", []string{"search", "retry", "--surface", "bogus"}, `dshq: --surface "bogus": a surface is current, shadowed or log-only` + "\n"},
		{"--limit 0 is refused as help says", []string{"search", "retry", "--limit", "0"}, "dshq: --limit 0: the page size is 1..100\n"},
		{"--limit 101 is refused", []string{"search", "retry", "--limit", "101"}, "dshq: --limit 101: the page size is 1..100\n"},
		{"an empty trace id is invalid, not missing", []string{"trace", ""}, `dshq: session "" is not a session id: session id is empty` + "\n"},
		{"an empty read id is invalid", []string{"read", ""}, `dshq: session "" is not a session id: session id is empty` + "\n"},
		{"a --session with a control character is invalid", []string{"search", "x", "--session", "a\x01b"}, `dshq: --session "a\x01b" is not a session id: session id contains control character U+0001 at byte 1` + "\n"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			r := p.dshq(tt.args...)
			if r.code != 1 || r.stderr != tt.want {
				t.Errorf("exit %d, stderr %q; want %q", r.code, r.stderr, tt.want)
			}
		})
	}
	t.Run("tail --from past the stream's end says so instead of waiting", func(t *testing.T) {
		last := stats(t, p).StreamLastSeq
		r := p.dshq("tail", "--from", fmt.Sprint(last+100))
		want := fmt.Sprintf("dshq: --from %d is past the end of the session stream (its last generation is %d): nothing follows it\n", last+100, last)
		if r.code != 1 || r.stderr != want {
			t.Errorf("exit %d, stderr %q; want %q", r.code, r.stderr, want)
		}
	})
	t.Run("tail --workspace with a relative path follows its absolute form", func(t *testing.T) {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		var sum importSummary
		p.dshq("import", "--json", "--fixture-cwd", wd, "--fixture-session-id", "here-1", webPreset(t)).ok(t).decode(t, &sum)
		r := p.dshq("tail", "--workspace", ".", "--from", "0", "-n", "1", "--kinds", "session").ok(t)
		if !strings.Contains(r.stdout, "here-1") || !strings.Contains(r.stdout, wd) {
			t.Errorf("tail of . (%s):\n%s", wd, r.stdout)
		}
	})
}

func TestCatchingUpNote(t *testing.T) {
	// Batches of one record: any record pending after a pull is a backlog.
	p := startPipelineConfig(t, true, func(c *node.Config) { c.Projection.BatchSize = 1 })
	nc, err := natsconn.Connect(natsconn.Options{URL: p.url})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The projector's consumer is held: what is imported now stays pending.
	if _, err := js.PauseConsumer(ctx, dshq.SessionStream, dshq.ProjectorDurable, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var sum importSummary
	p.dshq("import", "--json", "../../testdata/sample.jsonl", "../../testdata/fork.jsonl").ok(t).decode(t, &sum)
	waitCatchingUp(t, nc, true) // the projector learns it when its pull ends
	note := fmt.Sprintf("dshq: catching up: generation 0 of %d (answers may be incomplete until the projection has caught up)\n", sum.Generation)
	t.Run("a search behind the stream says so on stderr", func(t *testing.T) {
		r := p.dshq("search", "retry budget").ok(t)
		if r.stderr != note || !strings.HasPrefix(r.stdout, "no sessions match (generation 0)") {
			t.Errorf("stdout %q, stderr %q; want the note %q", r.stdout, r.stderr, note)
		}
		r = p.dshq("read", "s-7f3c", "--json")
		if !strings.Contains(r.stderr, `{"catchingUp":{"generation":0,"streamLastSeq":`+fmt.Sprint(sum.Generation)+`}}`) {
			t.Errorf("--json: stderr %q", r.stderr)
		}
	})
	t.Run("stats says it first", func(t *testing.T) {
		text := p.dshq("stats").ok(t).stdout
		if want := strings.TrimPrefix(note, "dshq: "); !strings.HasPrefix(text, want) {
			t.Errorf("stats:\n%s", text)
		}
	})
	if _, err := js.ResumeConsumer(ctx, dshq.SessionStream, dshq.ProjectorDurable); err != nil {
		t.Fatal(err)
	}
	waitStats(t, p, sum.Generation)
	t.Run("once caught up nothing is said", func(t *testing.T) {
		waitCatchingUp(t, nc, false)
		r := p.dshq("search", "retry budget").ok(t)
		if r.stderr != "" || !strings.Contains(r.stdout, "s-7f3c") {
			t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
		}
		if text := p.dshq("stats").ok(t).stdout; strings.HasPrefix(text, "catching up") {
			t.Errorf("stats:\n%s", text)
		}
	})
}

// waitCatchingUp polls dsh-admin until its status says catching up is want.
func waitCatchingUp(t *testing.T, nc *nats.Conn, want bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		st, err := admin.NewClient(nc).Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.CatchingUp == want {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("status never had catchingUp %v: %+v", want, st)
		}
	}
}

func TestReadShowsChunksAndTitles(t *testing.T) {
	ev := func(typ, data string) dshq.Event { return dshq.Event{Type: typ, Data: json.RawMessage(data)} }
	for _, tt := range []struct {
		e    dshq.Event
		want string
	}{
		{ev("assistant/chunk", `{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"Hel"}}`), `text-delta "Hel"`},
		{ev("assistant/chunk", `{"turn":1,"step":1,"chunk":{"type":"reasoning-delta","index":0,"text":" user"}}`), `reasoning-delta " user"`},
		{ev("assistant/chunk", `{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"bash","argumentsDelta":"{\"cmd\""}}`), `tool-call-delta bash "{\"cmd\""`},
		{ev("assistant/chunk", `{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"reasoning"}}`), "block-start reasoning"},
		{ev("assistant/chunk", `{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"Done."}}}`), "block-end text Done."},
		{ev("session/title", `{"title":"Find where the retry budget","messageSeqs":[1]}`), "Find where the retry budget"},
		{ev("user/message", `{"content":[{"type":"text","text":"semantic text first"}]}`), "semantic text first"},
		{ev("step/start", `{}`), ""},
	} {
		if got := preview(tt.e); got != tt.want {
			t.Errorf("%s %s: %q, want %q", tt.e.Type, tt.e.Data, got, tt.want)
		}
	}
}

func TestTextOutputReadsRight(t *testing.T) {
	p := tour(t)
	t.Run("read shows a title row's title", func(t *testing.T) {
		out := p.dshq("read", "s-7f3c").ok(t).stdout
		if !regexp.MustCompile(`(?m)^  2 .*session/title\s+Find where the retry budget$`).MatchString(out) {
			t.Errorf("read:\n%s", out)
		}
	})
	t.Run("one is singular", func(t *testing.T) {
		if out := p.dshq("search", "retry budget", "--session", "s-9a01").ok(t).stdout; !strings.Contains(out, "\n1 event at generation") {
			t.Errorf("search:\n%s", out)
		}
		if out := p.dshq("import", "../../testdata/sample.jsonl").ok(t).stdout; !strings.HasPrefix(out, "imported  0 sessions (0 events)\npresent   1 session (already stored, nothing written)\nrefused   0 files\n") {
			t.Errorf("import:\n%s", out)
		}
	})
	t.Run("tail's columns line up", func(t *testing.T) {
		out := p.dshq("tail", "--from", "0", "-n", "12", "--kinds", "session,event,title").ok(t).stdout
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 12 {
			t.Fatalf("%d lines:\n%s", len(lines), out)
		}
		kindAt, sessionAt := strings.Index(lines[0], "session"), strings.Index(lines[0], "s-7f3c")
		for _, l := range lines {
			k := strings.IndexAny(l, "set") // session, event, title: the kind column
			if k != kindAt || strings.Index(l, "s-") != sessionAt {
				t.Errorf("misaligned:\n%s", out)
				break
			}
		}
	})
	t.Run("a single Chinese character finds the text that holds it", func(t *testing.T) {
		if out := p.dshq("search", "文").ok(t).stdout; !strings.Contains(out, "s-9a01") {
			t.Errorf("search 文:\n%s", out)
		}
	})
}
