package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/tools/toolservice"
)

// tourStep is one dshq command of the README's tour: its arguments, the
// output lines the README quotes under it ("#   " lines, compared whole
// and in order, when there are any), and the strings its comment quotes
// as output ("…" after a colon).
type tourStep struct {
	line   string
	args   []string
	output []string
	quoted []string
}

// readmeTour reads the sh blocks of the README's "A five-minute tour".
func readmeTour(t *testing.T) (steps []tourStep, mcp string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(b), "\n## A five-minute tour\n")
	if !ok {
		t.Fatal("README.md has no tour")
	}
	tour, _, _ = strings.Cut(tour, "\n## ")
	quote := regexp.MustCompile(`: "([^"]+)"`)
	for _, block := range strings.Split(tour, "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for line := range strings.Lines(block) {
			line = strings.TrimSuffix(line, "\n")
			if out, ok := strings.CutPrefix(line, "#   "); ok {
				if len(steps) == 0 {
					t.Fatalf("README tour: output %q before any command", line)
				}
				steps[len(steps)-1].output = append(steps[len(steps)-1].output, out)
				continue
			}
			cmd, comment, _ := strings.Cut(line, "#")
			f := strings.Fields(cmd)
			if len(f) == 0 || f[0] != "dshq" {
				continue
			}
			s := tourStep{line: strings.TrimSpace(cmd), args: unquoteFields(f[1:])}
			for _, m := range quote.FindAllStringSubmatch(comment, -1) {
				s.quoted = append(s.quoted, m[1])
			}
			steps = append(steps, s)
		}
	}
	// The tool's answer is the plain block after the MCP configuration.
	_, after, ok := strings.Cut(tour, "then answers:\n\n```\n")
	if !ok {
		t.Fatal("README tour: no session_search answer")
	}
	mcp, _, _ = strings.Cut(after, "```")
	return steps, mcp
}

// unquoteFields joins the shell words of a tour command that a double
// quote holds together ("retry budget").
func unquoteFields(f []string) []string {
	var out []string
	for i := 0; i < len(f); i++ {
		w := f[i]
		if strings.HasPrefix(w, `"`) {
			for !strings.HasSuffix(w, `"`) || w == `"` {
				i++
				w += " " + f[i]
			}
			w = strings.Trim(w, `"`)
		}
		out = append(out, w)
	}
	return out
}

// TestTheREADMETourIsTrue runs the README's tour, command by command, on a
// fresh pipeline and compares what each prints with what the README quotes;
// then it makes the MCP tour's session_search call and compares its answer.
func TestTheREADMETourIsTrue(t *testing.T) {
	steps, mcp := readmeTour(t)
	p := startPipeline(t)
	ran := 0
	for _, s := range steps {
		if s.args[0] == "tail" {
			continue // follows the feed until stopped: TestTail runs it
		}
		args := s.args
		for i, a := range args {
			if strings.HasPrefix(a, "testdata/") {
				args[i] = "../../" + a
			}
		}
		r := p.dshq(args...).ok(t)
		ran++
		t.Logf("$ %s\n%s", s.line, r.stdout)
		if m := importedAt.FindStringSubmatch(r.stdout); m != nil {
			// A reader runs the next command later: the projection has
			// applied the import by then.
			waitStats(t, p, mustUint(t, m[1]))
		}
		if s.output != nil {
			// Trailing blanks (a table's empty last column) are not
			// in the README.
			got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			for i := range got {
				got[i] = strings.TrimRight(got[i], " ")
			}
			if strings.Join(got, "\n") != strings.Join(s.output, "\n") {
				t.Errorf("%s prints\n%s\nthe README says\n%s", s.line, indent(got), indent(s.output))
			}
		}
		for _, q := range s.quoted {
			if !strings.Contains(r.stdout, q) {
				t.Errorf("%s prints\n%s\nthe README says it prints %q", s.line, r.stdout, q)
			}
		}
	}
	if ran < 8 {
		t.Fatalf("the tour ran %d commands: the README's tour was not read", ran)
	}

	t.Run("the MCP tour's session_search answers as quoted", func(t *testing.T) {
		nc, err := nats.Connect(p.url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		r, err := toolservice.NewClient(nc, "s-9a01").Call(context.Background(), "session_search", json.RawMessage(`{"query":"retry budget"}`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(r.Text) != strings.TrimSpace(mcp) {
			t.Errorf("session_search as s-9a01 answers\n%s\nthe README says\n%s", r.Text, mcp)
		}
	})
}

// importedAt finds the generation an import reached.
var importedAt = regexp.MustCompile(`(?m)^generation (\d+) \(read it back`)

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func indent(lines []string) string { return "    " + strings.Join(lines, "\n    ") }
