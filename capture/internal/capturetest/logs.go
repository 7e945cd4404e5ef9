package capturetest

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/internal/corpus"
)

// MatchGolden fails t unless got equals the golden file's bytes; with update
// it first rewrites the file with got.
func MatchGolden(t testing.TB, golden string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("conversion differs from %s (go test -update rewrites it; review the diff):\n%s", golden, got)
	}
}

// Folded is a converted log with its strict fold.
type Folded struct {
	capture.Log
	Res *fold.Result
}

// Fold folds l under the strict rules, failing t when they refuse it.
func Fold(t testing.TB, l capture.Log) Folded {
	t.Helper()
	res, err := fold.Fold(l.Header, l.Events, fold.Strict)
	if err != nil {
		t.Fatal(err)
	}
	return Folded{l, res}
}

// EventsOfLine returns the events derived from source line n.
func (f Folded) EventsOfLine(t testing.TB, n int64) []dshq.Event {
	t.Helper()
	var out []dshq.Event
	for _, e := range f.Events {
		var d struct {
			Capture struct {
				Line int64 `json:"line"`
			} `json:"capture"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Capture.Line == n {
			out = append(out, e)
		}
	}
	return out
}

// Types lists the types of evs, space-separated.
func Types(evs []dshq.Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, " ")
}

// CorpusFile converts, whole, the session file of harness in the
// agent-harnesses corpus whose path ends with suffix (a converter from
// newConv, configured with the file's path below the harness's directory)
// and folds each of its logs. The full checks of the corpus run in package
// capture's corpus test.
func CorpusFile(t testing.TB, harness, suffix string, newConv New) []Folded {
	t.Helper()
	for _, file := range corpus.RequireHarnessFiles(t, harness) {
		if !strings.HasSuffix(file.Rel, suffix) {
			continue
		}
		data, err := os.ReadFile(file.Path)
		if err != nil {
			t.Fatal(err)
		}
		ups, err := capture.Convert(newConv(capture.Config{Path: file.Rel}), data)
		if err != nil {
			t.Fatal(err)
		}
		logs, err := capture.Collect(ups)
		if err != nil {
			t.Fatal(err)
		}
		var out []Folded
		for _, l := range logs {
			out = append(out, Fold(t, l))
		}
		return out
	}
	t.Fatalf("no %s corpus file ends with %s", harness, suffix)
	return nil
}
