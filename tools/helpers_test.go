package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolstest"

	"github.com/dshq/dshq/internal/golden"
)

// exampleCorpus is the corpus of the examples of docs/tools.md#renderings: the
// log of docs/events-and-surfaces.md#a-worked-example (testdata/sample.jsonl),
// its fork child, that child's child in another workspace (and a grandchild
// back in the caller's workspace), a root session in another workspace and
// the calling sessions.
var exampleCorpus = []string{"s-7f3c", "s-9a01", "s-b77c", "s-a-grand", "b-secret", "s-caller", "b-caller", "n-caller"}

// fullCorpus adds sessions that probe the boundary further.
var fullCorpus = append(append([]string{}, exampleCorpus...), "a-orphan", "n-nocwd")

// liveSessions are held by a harness.
var liveSessions = map[string]bool{"s-7f3c": true, "s-caller": true, "b-caller": true, "n-caller": true}

// corpusFile reads one session log from testdata/corpus.
func corpusFile(t testing.TB, id string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", id+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newService starts the real stack (toolstest.StartPipeline) with the
// given corpus sessions and returns the tools' service over it.
func newService(t testing.TB, ids []string, more ...toolstest.Log) tools.Service {
	t.Helper()
	return tools.FromQueryClient(toolstest.StartPipeline(t, append(corpusLogs(t, ids), more...)).Client)
}

// corpusLogs returns the logs of the corpus sessions ids.
func corpusLogs(t testing.TB, ids []string) []toolstest.Log {
	t.Helper()
	logs := make([]toolstest.Log, len(ids))
	for i, id := range ids {
		logs[i] = toolstest.Log{JSONL: corpusFile(t, id), Live: liveSessions[id]}
	}
	return logs
}

func newTools(t testing.TB, svc tools.Service, opts ...tools.Option) *tools.Tools {
	t.Helper()
	tl, err := tools.New(svc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// call runs one tool and fails the test on a cancellation error.
func call(t testing.TB, tl *tools.Tools, caller, name, args string) tools.Result {
	t.Helper()
	r, err := tl.Call(context.Background(), tools.AsSession(caller), name, []byte(args))
	if err != nil {
		t.Fatalf("%s %s: %v", name, args, err)
	}
	return r
}

// golden compares got with testdata/golden/<name>.txt (rewritten with -update).
func goldenText(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name+".txt"), []byte(got))
}

// resultText renders a result for a golden file.
func resultText(r tools.Result) string {
	code := "ok"
	if r.IsError {
		code = string(r.Code)
	}
	return "code: " + code + "\n" + r.Text + "\n"
}

func wantError(t *testing.T, r tools.Result, code dshq.Code, text string) {
	t.Helper()
	if !r.IsError || r.Code != code || (text != "" && r.Text != text) {
		t.Fatalf("got %+v, want error %s %q", r, code, text)
	}
}

// noneOf fails when text contains any of the secrets.
func noneOf(t *testing.T, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(text, s) {
			t.Fatalf("output leaks %q:\n%s", s, text)
		}
	}
}
