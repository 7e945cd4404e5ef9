package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dshq/dshq/admin"
)

// TestTheCommandsSayOneThingOneWay: a value no session can match is refused
// as a usage error (not answered "no sessions match"), a URL nats.go cannot
// dial is refused by its scheme before anything is looked up, a missing
// session is worded alike by every command, and stats --json names native
// sessions as its text and search --harness do.
func TestTheCommandsSayOneThingOneWay(t *testing.T) {
	p := startPipeline(t)
	gen := importFixture(t, p, "one-way-1", "/work/one-way")
	p.dshq("search", "x", "--min-generation", fmt.Sprint(gen), "--timeout-ms", "30000").ok(t)

	t.Run("an unknown --harness is refused like an unknown --surface", func(t *testing.T) {
		for _, args := range [][]string{
			{"search", "x", "--harness", "foo"},
			{"search", "x", "--surface", "foo"},
		} {
			r := p.dshq(args...)
			if r.code != 1 || !strings.Contains(r.stderr, `"foo"`) || strings.Contains(r.stdout, "match") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
			}
			if j := p.dshq(append(args, "--json")...); !strings.Contains(j.stderr, string(CodeUsage)) {
				t.Errorf("%v --json: stderr %q, want %s", args, j.stderr, CodeUsage)
			}
		}
		for _, h := range []string{"native", "claude-code", "codex"} {
			p.dshq("search", "x", "--harness", h).ok(t)
		}
	})

	t.Run("a URL of another scheme is refused before any lookup", func(t *testing.T) {
		for _, url := range []string{"bogus://x", "http://127.0.0.1:1", "nats://127.0.0.1:1,bogus://x"} {
			r := runCLI(t, map[string]string{"DSH_NATS_URL": url}, "", "stats", "--json")
			if r.code != 1 || !strings.Contains(r.stderr, "scheme") || !strings.Contains(r.stderr, string(CodeUsage)) {
				t.Errorf("%s: exit %d, stderr %q", url, r.code, r.stderr)
			}
		}
	})

	t.Run("a missing session is worded alike by every command", func(t *testing.T) {
		const want = "dshq: session \"s-nope\" was not found\n"
		for _, args := range [][]string{
			{"export", "s-nope"}, {"read", "s-nope"}, {"read", "s-nope", "--seq", "1"},
			{"trace", "s-nope"}, {"trace", "s-nope", "--seq", "1"}, {"search", "x", "--session", "s-nope"},
		} {
			if r := p.dshq(args...); r.code != 1 || r.stderr != want {
				t.Errorf("%v: exit %d, stderr %q; want %q", args, r.code, r.stderr, want)
			}
		}
	})

	t.Run("stats --json names native sessions native", func(t *testing.T) {
		var st admin.Stats
		p.dshq("stats", "--json").ok(t).decode(t, &st)
		if len(st.Harnesses) != 1 || st.Harnesses["native"] != 1 {
			t.Errorf("harnesses %v, want {native: 1}", st.Harnesses)
		}
	})
}
