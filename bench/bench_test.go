package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/dshq/dshq"
)

// dshqBin is the dshq binary the serve phase of the tests runs, built once
// by TestMain ("" in -short runs, which skip the whole-pipeline tests).
var dshqBin string

func TestMain(m *testing.M) {
	flag.Parse()
	code := 0
	func() {
		if !testing.Short() {
			dir, err := os.MkdirTemp("", "dshq-bench-bin-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				code = 2
				return
			}
			defer os.RemoveAll(dir)
			dshqBin = filepath.Join(dir, "dshq")
			if out, err := exec.Command("go", "build", "-o", dshqBin, "github.com/dshq/dshq/cmd/dshq").CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "go build dshq: %v\n%s", err, out)
				code = 2
				return
			}
		}
		code = m.Run()
		if code == 0 {
			if err := goleak.Find(
				// The embedded server's and nats.go's process-wide helpers.
				goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*Server).Start.func1"),
				goleak.IgnoreAnyFunction("github.com/blevesearch/bleve_index_api.AnalysisWorker"),
			); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				code = 1
			}
		}
	}()
	os.Exit(code)
}

// TestRunPrintsEveryRow runs the whole bench on a tiny corpus, once with
// every session written through the measured ingest and once with most of
// them bulk-loaded first: every figure of the table is there, beside a
// non-zero reference, and the JSON report carries the same rows.
func TestRunPrintsEveryRow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	for _, tc := range []struct {
		name   string
		sample int
		bulk   bool
	}{
		{"all sessions go through the measured ingest", 0, false},
		{"most sessions are bulk-loaded before the measured ingest", 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) { checkEveryRow(t, tc.sample, tc.bulk) })
	}
}

func checkEveryRow(t *testing.T, sample int, bulk bool) {
	rep, err := Run(context.Background(), Config{
		Corpus:         CorpusConfig{Sessions: 12, Turns: 4, Seed: 1},
		Dir:            t.TempDir(),
		SampleSessions: sample, BulkWriters: 3,
		Writers: 2, Samples: 20, SearchSamples: 25, AppendSamples: 2, Dshq: dshqBin,
	})
	if err != nil {
		t.Fatal(err)
	}
	apply := "projector apply (records/s)"
	if bulk {
		apply = "projector apply of the bulk backlog (records/s)"
	}
	want := []string{
		"ingest to searchable, sample, sync always (events/s)|raw JetStream async publish",
		"ingest to searchable, sample, sync always (events/s)|SQLite FTS5 bulk load",
		apply + "|raw JetStream pull+ack consume",
		apply + "|raw Bleve batch index",
		"projector apply CPU (ms per 1k records)|raw Bleve batch index CPU",
		"publish→searchable p50 (ms)|raw publish→consumer delivery p50",
		"publish→searchable p99 (ms)|raw publish→consumer delivery p99",
		"rebuild (s)|raw re-read of the stream (s)",
		"rebuild (records/s)|raw re-read of the stream (rec/s)",
		"peak RSS during ingest (MiB)|RSS before ingest",
		"peak Go heap during ingest (MiB)|Go heap before ingest",
	}
	if bulk {
		want = append(want, "bulk backlog to searchable (events/s)|raw JetStream pull+ack consume, same records")
	}
	want = append(want,
		"dshq serve: records published (rec/s)|raw JetStream, same client and server",
		"dshq serve: whole load searchable (events/s)|the same load published (events/s)",
		"dshq serve: CPU of the load to searchable (ms per 1k records)|dshq serve's CPU during the raw reference",
		"dshq serve peak RSS, load and queries (MiB)|dshq serve RSS when ready, empty home",
		"dshq serve peak RssAnon, load and queries, sampled (MiB)|dshq serve RssAnon when ready, empty home",
		"dshq serve peak RssFile, load and queries, sampled (MiB)|dshq serve peak RSS (MiB)",
		"dshq serve home: DSH_SESSIONS stream (MiB)|the records' own bytes",
		"dshq serve home: DSH_FEED stream (MiB)|DSH_SESSIONS stream",
		"dshq serve home: bbolt projection.db (MiB)|DSH_SESSIONS stream",
		"dshq serve home: Bleve index (MiB)|DSH_SESSIONS stream",
		"dshq serve home: Bleve index (MiB)|SQLite FTS5, whole database",
		"dshq serve home: whole $DSH_HOME (MiB)|DSH_SESSIONS stream",
	)
	for _, p := range []string{"p50", "p99"} {
		want = append(want,
			"dshq serve: publish→searchable during the load (|publish→ack of the same records "+p,
			"dshq serve: one append→searchable, quiet (|raw publish→consumer delivery, same server "+p)
	}
	for _, policy := range []string{"sync always", "sync relaxed"} {
		for _, n := range []string{"1", "10", "100"} {
			for _, p := range []string{"p50", "p99"} {
				want = append(want, "append→ack batch="+n+", "+policy+" "+p+" (ms)|raw JetStream publish of "+n+", "+policy+" "+p)
			}
		}
	}
	// The search classes name their 25 requests, the reads their 20.
	for _, op := range []string{"sessions.search rare phrase", "sessions.search common phrase", "events.search common phrase"} {
		for _, p := range []string{"p50", "p99"} {
			want = append(want, op+", 25 requests "+p+" (ms)|raw Bleve", op+", 25 requests "+p+" (ms)|SQLite FTS5 (original design) "+p)
		}
	}
	want = append(want, "sessions.search rare phrase, 25 requests p99 (ms)|its own p50 (ms)")
	for _, p := range []string{"p50", "p99"} {
		want = append(want, "sessions.search common phrase, cwd+surface filters, 25 requests "+p+" (ms)|SQLite FTS5 (original design) "+p)
		want = append(want, "events.trace, 20 requests "+p+" (ms)|SQLite log read + fold", "sessions.surface, 20 requests "+p+" (ms)|SQLite log read + fold")
		want = append(want, "events.read ±5, 20 requests "+p+" (ms)|SQLite read of the same window "+p, "sessions.trace, 20 requests "+p+" (ms)|SQLite lineage walk "+p)
		for _, u := range []string{"daily by model", "top 10 sessions (rolled up)", "projects under /"} {
			want = append(want, "usage.report "+u+" "+p+" (ms)|target (issue 26, p99)")
		}
	}
	var got []string
	for _, row := range rep.Rows {
		if row.Value <= 0 || row.RefValue <= 0 {
			t.Errorf("row %q: value %v, reference %v: want both positive", row.Metric, row.Value, row.RefValue)
		}
		got = append(got, row.Metric+"|"+row.Reference)
	}
	for _, w := range want {
		metric, ref, _ := strings.Cut(w, "|")
		if !slices.ContainsFunc(got, func(g string) bool {
			m, r, _ := strings.Cut(g, "|")
			if strings.HasSuffix(metric, "(") { // a metric naming its sample count
				return strings.HasPrefix(m, metric) && strings.HasPrefix(r, ref)
			}
			return m == metric && strings.HasPrefix(r, ref)
		}) {
			t.Errorf("no row %q beside %q", metric, ref)
		}
	}
	if len(rep.Rows) != len(want) {
		t.Errorf("%d rows, want %d:\n%s", len(rep.Rows), len(want), strings.Join(got, "\n"))
	}
	if rep.Sessions != 12 || rep.Events == 0 || rep.Documents == 0 || rep.Records <= rep.Events {
		t.Errorf("corpus summary %+v", rep)
	}
	ph := rep.Phases
	if ph.BulkEvents+ph.SampleEvents != rep.Events || ph.BulkSessions+ph.SampleSessions != 12 {
		t.Errorf("phases %+v do not add up to the corpus (%d events)", ph, rep.Events)
	}
	if bulk != (ph.BulkSessions == 8 && ph.SampleSessions == 4 && ph.BulkElapsed > 0) {
		t.Errorf("phases %+v: want bulk load %v of 8 sessions", ph, bulk)
	}

	checkTargets(t, rep)

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, row := range rep.Rows {
		if !strings.Contains(table.String(), row.Metric) {
			t.Errorf("table lacks %q", row.Metric)
		}
	}
	_, targets, _ := strings.Cut(table.String(), "\ntargets (issue 28, its bounds at 100k events; this corpus: ")
	_, targets, _ = strings.Cut(targets, "\n") // after the section's head
	if n := strings.Count(targets, " met\n") + strings.Count(targets, " missed\n"); n != len(issue28Targets) {
		t.Errorf("the table's targets section says met or missed %d times, want %d:\n%s", n, len(issue28Targets), targets)
	}
	if !strings.Contains(table.String(), "measured ingest sample: ") ||
		bulk != strings.Contains(table.String(), "through Store.Import, record by record, 3 writers, sync relaxed") {
		t.Errorf("table does not say how the corpus was written (bulk load %v):\n%s", bulk, table.String())
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Rows       []Row
		TargetSize string
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Rows) != len(rep.Rows) {
		t.Fatalf("JSON report: %d rows, %v", len(back.Rows), err)
	}
	withTarget := 0
	for _, row := range back.Rows {
		if row.Target != nil {
			withTarget++
		}
	}
	if withTarget != len(issue28Targets) || back.TargetSize != "100k" {
		t.Errorf("JSON report: %d rows with a target at size %q, want %d at 100k", withTarget, back.TargetSize, len(issue28Targets))
	}
}

// issue28Targets are the rows (metric and reference prefixes) that carry a
// target of issue 28 at 100k events.
var issue28Targets = []string{
	"sessions.search rare phrase, 25 requests p99 (ms)|SQLite FTS5",
	"sessions.search rare phrase, 25 requests p99 (ms)|raw Bleve",
	"sessions.search rare phrase, 25 requests p99 (ms)|its own p50",
	"sessions.search common phrase, 25 requests p99 (ms)|SQLite FTS5",
	"sessions.search common phrase, 25 requests p99 (ms)|raw Bleve",
	"sessions.search common phrase, cwd+surface filters, 25 requests p99 (ms)|SQLite FTS5",
	"events.search common phrase, 25 requests p99 (ms)|SQLite FTS5",
	"events.search common phrase, 25 requests p99 (ms)|raw Bleve",
	"dshq serve: records published (rec/s)|raw JetStream",
	"dshq serve: CPU of the load to searchable (ms per 1k records)|dshq serve's CPU during the raw reference",
	"dshq serve: publish→searchable during the load (|publish→ack of the same records p99",
	"dshq serve: one append→searchable, quiet (|raw publish→consumer delivery, same server p99",
	"dshq serve peak RssAnon, load and queries, sampled (MiB)|",
	"dshq serve home: DSH_FEED stream (MiB)|",
	"dshq serve home: whole $DSH_HOME (MiB)|",
}

// checkTargets checks that exactly the rows of issue28Targets carry a
// target, and that each says whether its figure is within its bound.
func checkTargets(t *testing.T, rep *Report) {
	t.Helper()
	for _, row := range rep.Rows {
		want := slices.ContainsFunc(issue28Targets, func(w string) bool {
			metric, ref, _ := strings.Cut(w, "|")
			return strings.HasPrefix(row.Metric, metric) && strings.HasPrefix(row.Reference, ref)
		})
		if (row.Target != nil) != want {
			t.Errorf("row %q beside %q: target %+v, want one: %v", row.Metric, row.Reference, row.Target, want)
			continue
		}
		if row.Target == nil {
			continue
		}
		got := row.Value
		if row.Target.Of == "ratio" {
			got = row.Ratio
		}
		if met := (got <= row.Target.Bound) == row.Target.AtMost || got == row.Target.Bound; met != row.Target.Met {
			t.Errorf("row %q: %v against %+v says met %v", row.Metric, got, row.Target, row.Target.Met)
		}
	}
}

func TestRunApplyOnlyStopsAfterTheApplyFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the pipeline")
	}
	for _, tc := range []struct {
		name   string
		sample int
		apply  string
	}{
		{"without a bulk a fresh projector applies the ingest sample", 0, "projector apply (records/s)"},
		{"with a bulk the projector catches up with it", 4, "projector apply of the bulk backlog (records/s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Run(context.Background(), Config{
				Corpus: CorpusConfig{Sessions: 12, Turns: 3, Seed: 2}, Dir: t.TempDir(),
				SampleSessions: tc.sample, BulkWriters: 3, Writers: 2, ApplyOnly: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			var rows []string
			for _, row := range rep.Rows {
				if row.Value <= 0 || row.RefValue <= 0 {
					t.Errorf("row %q: value %v, reference %v: want both positive", row.Metric, row.Value, row.RefValue)
				}
				rows = append(rows, row.Metric+"|"+row.Reference)
			}
			for _, w := range []string{
				tc.apply + "|raw Bleve batch index, same docs (rec/s equiv.)",
				"projector apply CPU (ms per 1k records)|raw Bleve batch index CPU, same docs (ms per 1k records equiv.)",
			} {
				if !slices.Contains(rows, w) {
					t.Errorf("no row %q in:\n%s", w, strings.Join(rows, "\n"))
				}
			}
			for _, r := range rows {
				if strings.Contains(r, ".search") || strings.Contains(r, "rebuild") || strings.Contains(r, "append→ack") {
					t.Errorf("an apply-only run measured %q", r)
				}
			}
			if rep.Documents == 0 {
				t.Error("no documents counted")
			}
		})
	}
}

func TestRunServeOnlyPrintsTheServeRowsAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs dshq serve")
	}
	rep, err := Run(context.Background(), Config{
		Corpus: CorpusConfig{Sessions: 6, Turns: 2, Seed: 4}, Dir: t.TempDir(),
		Samples: 5, ServeOnly: true, Dshq: dshqBin,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rep.Rows {
		if !strings.HasPrefix(row.Metric, "dshq serve") || row.Value <= 0 || row.RefValue <= 0 {
			t.Errorf("row %q = %v beside %v: want only positive dshq serve rows", row.Metric, row.Value, row.RefValue)
		}
	}
	if len(rep.Rows) < 10 {
		t.Errorf("%d rows, want every serve row", len(rep.Rows))
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "dshq serve phase only") || strings.Contains(table.String(), "measured ingest sample") {
		t.Errorf("the table's head does not say the serve phase ran alone:\n%s", table.String())
	}
}

func TestRunRefusesAUsedDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "leftover"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), Config{Corpus: CorpusConfig{Sessions: 1, Turns: 1}, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Run in a used directory: %v, want a not-empty error", err)
	}
}

func TestGenerateCorpus(t *testing.T) {
	c, err := GenerateCorpus(CorpusConfig{Sessions: 23, Turns: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := GenerateCorpus(CorpusConfig{Sessions: 23, Turns: 4, Seed: 3})
	var forks, subagents, chinese, compactions int
	for i, s := range c.Sessions {
		if string(s.Batches[0][0].Raw) != string(again.Sessions[i].Batches[0][0].Raw) {
			t.Errorf("session %d differs between two runs with one seed", i)
		}
		if s.Header.IsSeeded {
			forks++
		}
		if s.Header.Origin == dshq.OriginSubagent {
			subagents++
		}
		var seq int64
		for _, b := range s.Batches {
			for _, e := range b {
				if e.Seq != seq {
					t.Fatalf("session %d: seq %d at position %d", i, e.Seq, seq)
				}
				seq++
				if strings.Contains(string(e.Raw), "压缩") || strings.Contains(string(e.Raw), "配置") {
					chinese++
				}
				if e.Type == "compaction/summary" {
					compactions++
				}
			}
		}
		if !strings.Contains(rawOf(s), c.Rare[i]) {
			t.Errorf("session %d lacks its rare phrase %q", i, c.Rare[i])
		}
	}
	if forks == 0 || subagents == 0 || chinese == 0 || compactions == 0 {
		t.Errorf("forks %d, subagents %d, Chinese events %d, compactions %d: want each > 0", forks, subagents, chinese, compactions)
	}
	for _, bad := range []CorpusConfig{{Sessions: 0, Turns: 1}, {Sessions: 1, Turns: 0}} {
		if _, err := GenerateCorpus(bad); err == nil {
			t.Errorf("GenerateCorpus(%+v) = nil error", bad)
		}
	}
}

func rawOf(s Session) string {
	var b strings.Builder
	for _, batch := range s.Batches {
		for _, e := range batch {
			b.Write(e.Raw)
		}
	}
	return b.String()
}

// TestFTSBaseline checks that the baseline behaves as the original's FTS5
// search: unicode61 folding, one literal phrase, match-count ranking, one
// best document per session.
func TestFTSBaseline(t *testing.T) {
	ctx := context.Background()
	f, err := OpenFTS(ctx, filepath.Join(t.TempDir(), "fts.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc := func(id string, seq int64, text string) dshq.SearchDocument {
		return dshq.SearchDocument{EventRecord: dshq.EventRecord{SessionID: id, Seq: seq, Type: "user/message", Time: 1000 + seq, Surface: dshq.SurfaceCurrent}, Text: text}
	}
	sessions := []FTSSession{
		{Header: dshq.Header{Version: 2, ID: "a", CreatedAt: 1}, HeaderRaw: []byte(`{}`), Events: [][]byte{[]byte(`{}`), []byte(`{}`)},
			Docs: []dshq.SearchDocument{doc("a", 0, "the café is open"), doc("a", 1, "needle needle OR haystack")}},
		{Header: dshq.Header{Version: 2, ID: "b", CreatedAt: 2, ParentSession: dshq.Str("a")}, HeaderRaw: []byte(`{}`), Events: [][]byte{[]byte(`{}`)},
			Docs: []dshq.SearchDocument{doc("b", 0, "a needle in the BRAID")}},
	}
	if err := f.Load(ctx, sessions); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"a query matches case- and diacritic-insensitively", "CAFE", []string{"a/0"}},
		{"the session with more matches ranks first", "needle", []string{"a/1", "b/0"}},
		{"OR is a literal token, not syntax", "needle OR", []string{"a/1"}},
		{"a token never matches inside a word", "AI", nil},
		{"quotes are data", `say "needle"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits, err := f.SearchSessions(ctx, tc.query, FTSFilters{}, 20, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hits {
				got = append(got, h.SessionID+"/"+string(rune('0'+h.Seq)))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("search %q = %v, want %v", tc.query, got, tc.want)
			}
		})
	}
	if n, err := f.Trace(ctx, "a"); err != nil || n != 2 {
		t.Errorf("Trace(a) = %d, %v; want 2 records", n, err)
	}
	if n, err := f.ReadWindow(ctx, "a", 1, 5, 5); err != nil || n != 2 {
		t.Errorf("ReadWindow(a, 1) = %d, %v; want 2 events", n, err)
	}
	if _, err := f.ReadWindow(ctx, "a", 9, 0, 0); err == nil {
		t.Error("ReadWindow of a missing seq: nil error")
	}
}

func TestSnippet(t *testing.T) {
	long := strings.Repeat("word ", 100) + "\uFDD0needle\uFDD1 " + strings.Repeat("tail ", 100)
	for _, tc := range []struct {
		name, in string
		limit    int
		want     string
	}{
		{"short text is returned whole with whitespace collapsed", "  a \n\uFDD0b\uFDD1  c ", 240, "a b c"},
		{"a limit of one is an ellipsis", long, 1, "…"},
		{"a long text is cut around its first match", long, 20, "…d word needle tail…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := snippet(tc.in, tc.limit); got != tc.want {
				t.Errorf("snippet = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMeasureOpRefusesVoidFigures(t *testing.T) {
	hits := func(n ...int) call { return func(i int) (int, error) { return n[i], nil } }
	for _, tc := range []struct {
		name string
		op   op
		want string
	}{
		{"a rare phrase that one call does not find fails the run",
			op{name: "rare", mustHit: true, dshq: hits(1, 0), ftsName: "fts", fts: hits(1, 1)}, "sample 1 found nothing"},
		{"a reference whose calls all find nothing fails the run",
			op{name: "common", dshq: hits(2, 3), bleveName: "bleve", bleve: hits(0, 0), ftsName: "fts", fts: hits(1, 1)}, "bleve: no call of 2 found anything"},
		{"dshq and the baseline disagreeing on counts fails the run",
			op{name: "rare", sameHits: true, dshq: hits(1, 2), ftsName: "fts", fts: hits(1, 1)}, "disagree on result counts"},
		{"agreeing implementations give two rows per reference",
			op{name: "ok", sameHits: true, mustHit: true, dshq: hits(1, 2), bleveName: "bleve", bleve: hits(5, 5), ftsName: "fts", fts: hits(1, 2)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{rep: &Report{}}
			err := r.measureOp(tc.op, 2)
			if tc.want == "" {
				if err != nil || len(r.rep.Rows) != 4 {
					t.Fatalf("measureOp = %v with %d rows, want nil and 4 rows", err, len(r.rep.Rows))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("measureOp = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestTargetSaysMetOrMissed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		events     int
		value, ref float64
		b          bound
		want       *Target
	}{
		{"a value under its upper bound is met", 50_000, 120, 35, valueAtMost(150, 250),
			&Target{Of: "value", AtMost: true, Bound: 150, Met: true}},
		{"a value over its upper bound is missed", 50_000, 151, 35, valueAtMost(150, 250),
			&Target{Of: "value", AtMost: true, Bound: 150}},
		{"a million-event run takes the 1M bound", 1_000_000, 151, 35, valueAtMost(150, 250),
			&Target{Of: "value", AtMost: true, Bound: 250, Met: true}},
		{"a ratio under its lower bound is missed", 50_000, 4000, 7000, ratioAtLeast(0.9, 0.9),
			&Target{Of: "ratio", Bound: 0.9}},
		{"a ratio on its lower bound is met", 50_000, 900, 1000, ratioAtLeast(0.9, 0.9),
			&Target{Of: "ratio", Bound: 0.9, Met: true}},
		{"a ratio without a reference is missed", 50_000, 1, 0, ratioAtMost(2, 2),
			&Target{Of: "ratio", AtMost: true, Bound: 2}},
		{"no bound at this size sets no target", 50_000, 1000, 35, valueAtMost(0, 400), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &Report{Events: tc.events}
			rep.add("figure", tc.value, "reference", tc.ref)
			rep.target(tc.b)
			got := rep.Rows[0].Target
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Fatalf("target = %+v, want %+v", got, tc.want)
			}
			var table bytes.Buffer
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			verdict := ""
			switch {
			case got == nil:
			case got.Met:
				verdict = "  met\n"
			default:
				verdict = "  missed\n"
			}
			if strings.Contains(table.String(), "targets (issue 28") != (got != nil) || !strings.Contains(table.String(), verdict) {
				t.Errorf("table:\n%s\nwant a targets section saying %q", table.String(), verdict)
			}
		})
	}
}
