package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/usage"
)

// usageOut is `dshq usage <report> --json` (the rows under the report's
// member, as ccusage's).
type usageOut struct {
	Daily   []usage.ReportRow `json:"daily"`
	Session []usage.ReportRow `json:"session"`
	Machine []usage.ReportRow `json:"machine"`
	Branch  []usage.ReportRow `json:"branch"`
	Project []usage.ReportRow `json:"project"`
	Totals  usage.Totals      `json:"totals"`
}

// dayModel is one (day, model) cell of a daily report.
type dayModel struct{ day, model string }

type cell struct {
	in, out, cw, cr int64
	cost            *float64
}

func cellsOf(rows []usage.ReportRow) map[dayModel]cell {
	out := map[dayModel]cell{}
	for _, r := range rows {
		for _, b := range r.ModelBreakdowns {
			out[dayModel{r.Period, b.ModelName}] = cell{b.Input, b.Output, b.CacheCreation, b.CacheRead, b.Cost}
		}
	}
	return out
}

// ccusagePath is ccusage 20.0.24 as .ci/setup-ccusage.sh installs it
// (DSHQ_CCUSAGE names another): it skips the test outside CI when it is
// absent, and fails it in CI.
func ccusagePath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("DSHQ_CCUSAGE")
	if p == "" {
		home, _ := os.UserHomeDir()
		p = filepath.Join(home, ".cache", "dshq", "ccusage-20.0.24", "node_modules", ".bin", "ccusage")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ccusage 20.0.24 is not installed at %s (.ci/setup-ccusage.sh installs it)", p)
		}
		t.Skipf("ccusage 20.0.24 is not installed (.ci/setup-ccusage.sh installs it at %s)", p)
	}
	return p
}

// runCcusage runs `ccusage daily --offline --json` in UTC over a
// throw-away home holding claude (Claude Code projects) and codex (Codex
// sessions) — copies, in which a line that is JSON is written compactly:
// ccusage 20.0.24 skips the records of a line written with spaces after
// its colons (`{"type": "assistant", …}`, as Python writes JSON), which
// are the same records, so that both tools read the same records.
func runCcusage(t *testing.T, bin string, claude, codex []string) map[dayModel]cell {
	t.Helper()
	home := t.TempDir()
	copyCompact := func(srcs []string, dst string) {
		for _, src := range srcs {
			err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
					return err
				}
				rel, _ := filepath.Rel(src, p)
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				var out bytes.Buffer
				sc := bufio.NewScanner(bytes.NewReader(data))
				sc.Buffer(nil, 64<<20)
				for sc.Scan() {
					var c bytes.Buffer
					if json.Compact(&c, sc.Bytes()) == nil {
						out.Write(c.Bytes())
					} else {
						out.Write(sc.Bytes())
					}
					out.WriteByte('\n')
				}
				target := filepath.Join(dst, filepath.Base(src), rel)
				if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
					return err
				}
				return os.WriteFile(target, out.Bytes(), 0o644)
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	copyCompact(claude, filepath.Join(home, ".claude", "projects"))
	copyCompact(codex, filepath.Join(home, ".codex", "sessions"))
	cmd := exec.Command(bin, "daily", "--offline", "--json", "--timezone", "UTC")
	cmd.Env = []string{"HOME=" + home, "TZ=UTC", "PATH=" + os.Getenv("PATH"), "NO_COLOR=1",
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"), "CODEX_HOME=" + filepath.Join(home, ".codex")}
	cmd.Dir = home
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ccusage: %v\n%s", err, stderr.Bytes())
	}
	var rep struct {
		Daily []struct {
			Period          string `json:"period"`
			ModelBreakdowns []struct {
				ModelName                                                       string
				InputTokens, OutputTokens, CacheCreationTokens, CacheReadTokens int64
				Cost                                                            float64
				MissingPricing                                                  bool
			} `json:"modelBreakdowns"`
		} `json:"daily"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("ccusage's JSON: %v\n%s", err, out)
	}
	cells := map[dayModel]cell{}
	for _, d := range rep.Daily {
		for _, b := range d.ModelBreakdowns {
			c := cell{b.InputTokens, b.OutputTokens, b.CacheCreationTokens, b.CacheReadTokens, nil}
			if !b.MissingPricing && b.Cost > 0 {
				cost := b.Cost
				c.cost = &cost
			}
			cells[dayModel{d.Period, b.ModelName}] = c
		}
	}
	return cells
}

// compareWithCcusage checks dshq's daily cells against ccusage's: the same
// (day, model) cells with exactly the same token counts, and costs within
// 1% where both price the model. It logs the two side by side.
func compareWithCcusage(t *testing.T, got, want map[dayModel]cell) {
	t.Helper()
	keys := map[dayModel]bool{}
	for k := range got {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]dayModel, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.SortFunc(sorted, func(a, b dayModel) int { return strings.Compare(a.day+a.model, b.day+b.model) })
	var log strings.Builder
	fmt.Fprintf(&log, "%-10s %-28s %-44s %-44s\n", "day", "model", "dshq in/out/cache-create/cache-read $", "ccusage in/out/cache-create/cache-read $")
	show := func(c cell, ok bool) string {
		if !ok {
			return "-"
		}
		cost := "no price"
		if c.cost != nil {
			cost = strconv.FormatFloat(*c.cost, 'f', 4, 64)
		}
		return fmt.Sprintf("%d/%d/%d/%d %s", c.in, c.out, c.cw, c.cr, cost)
	}
	for _, k := range sorted {
		g, gok := got[k]
		w, wok := want[k]
		fmt.Fprintf(&log, "%-10s %-28s %-44s %-44s\n", k.day, k.model, show(g, gok), show(w, wok))
		if !gok || !wok || g.in != w.in || g.out != w.out || g.cw != w.cw || g.cr != w.cr {
			t.Errorf("%s %s: dshq %s, ccusage %s", k.day, k.model, show(g, gok), show(w, wok))
			continue
		}
		if g.cost != nil && w.cost != nil && math.Abs(*g.cost-*w.cost) > 0.01*math.Max(*g.cost, *w.cost) {
			t.Errorf("%s %s: cost $%f, ccusage $%f (more than 1%% apart)", k.day, k.model, *g.cost, *w.cost)
		}
	}
	t.Logf("dshq and ccusage 20.0.24, per day (UTC) and model:\n%s", log.String())
}

// usageFixtures is our own two homes: a Claude Code project (a message
// streamed in two records, a subagent file the transcript mirrors in an
// agent_progress record, an inline sidechain, a one-hour cache write, a day
// boundary, a model no table prices) and a Codex rollout (cumulative token
// counts, one repeated, a model change between turns).
func usageFixtures(t *testing.T) (laptop, desktop string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "usage"))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "laptop"), filepath.Join(dir, "desktop")
}

func (p *pipeline) usage(t *testing.T, gen uint64, args ...string) usageOut {
	t.Helper()
	var out usageOut
	p.waitGeneration(t, gen)
	args = append([]string{"usage"}, args...)
	args = append(args, "--json", "--timezone", "UTC", "--min-generation", strconv.FormatUint(gen, 10), "--timeout-ms", "30000")
	p.dshq(args...).ok(t).decode(t, &out)
	return out
}

func (p *pipeline) importOn(t *testing.T, machine string, dirs ...string) uint64 {
	t.Helper()
	var sum importSummary
	p.dshq(append([]string{"import", "--json", "--machine", machine}, dirs...)...).ok(t).decode(t, &sum)
	if len(sum.Refused) != 0 {
		t.Fatalf("refused: %+v", sum.Refused)
	}
	return sum.Generation
}

// TestUsageSubagentReadFirstKeepsItsCalls imports a subagent's file before
// its parent's transcript, whose agent_progress record mirrors the
// subagent's message: the call stays the subagent's (the parent's mirror
// never takes it), as when the parent is read first.
func TestUsageSubagentReadFirstKeepsItsCalls(t *testing.T) {
	laptop, _ := usageFixtures(t)
	p := startPipeline(t)
	project := filepath.Join(laptop, ".claude", "projects", "-work-alpha")
	parent := "cc-aaaaaaaa-0000-4000-8000-000000000001"
	g1 := p.importOn(t, "laptop", filepath.Join(project, "aaaaaaaa-0000-4000-8000-000000000001", "subagents", "agent-sub1.jsonl"))
	gen := max(g1, p.importOn(t, "laptop", filepath.Join(laptop, ".claude", "projects")))
	own := map[string]int64{}
	for _, r := range p.usage(t, gen, "session", "--own").Session {
		own[*r.SessionID] = r.TotalTokens
	}
	if want := map[string]int64{parent: 3390 - 13 - 5, parent + "-agent-sub1": 13, parent + "-agent-inl1": 5}; !mapsEqual(own, want) {
		t.Errorf("usage session --own, the subagent read first: %v, want %v", own, want)
	}
	one := p.usage(t, gen, "session", "--session", parent)
	if len(one.Session) != 1 || one.Session[0].TotalTokens != 3390 {
		t.Errorf("usage session --session %s: %+v, want one row of 3390 tokens", parent, one.Session)
	}
}

// TestUsageTwoMachines imports two homes as two machines into one
// deployment: the machine, branch and project reports group as asked, a
// subagent's tokens are in its parent's session total (and its own with
// --own), the daily report counts what ccusage counts, and a model no table
// prices is shown without a cost.
func TestUsageTwoMachines(t *testing.T) {
	laptop, desktop := usageFixtures(t)
	p := startPipeline(t)
	g1 := p.importOn(t, "laptop", filepath.Join(laptop, ".claude", "projects"))
	gen := max(g1, p.importOn(t, "desktop", filepath.Join(desktop, ".codex", "sessions")))

	machines := map[string]int64{}
	for _, r := range p.usage(t, gen, "machine").Machine {
		machines[*r.Machine] = r.TotalTokens
	}
	// laptop: sonnet 12+53+100+1000, haiku 4+9, opus 3+7+200+2000, fictional 1+1;
	// desktop: gpt-5.3-codex 600+100+400, gpt-5.2 500+80+100.
	if want := map[string]int64{"laptop": 1165 + 13 + 2210 + 2, "desktop": 1100 + 680}; !mapsEqual(machines, want) {
		t.Errorf("usage machine: %v, want %v", machines, want)
	}

	branches := map[string]int64{}
	for _, r := range p.usage(t, gen, "branch").Branch {
		branches[*r.Branch] = r.TotalTokens
	}
	if want := map[string]int64{"feature/a": 3390, "main": 1780}; !mapsEqual(branches, want) {
		t.Errorf("usage branch: %v, want %v", branches, want)
	}

	projects := map[string]int64{}
	for _, r := range p.usage(t, gen, "project", "--prefix", "/work").Project {
		projects[*r.Project] = r.TotalTokens
	}
	if want := map[string]int64{"/work/alpha": 3390, "/work/beta": 1780}; !mapsEqual(projects, want) {
		t.Errorf("usage project --prefix /work: %v, want %v", projects, want)
	}
	if rows := p.usage(t, gen, "project", "--prefix", "/work/al").Project; len(rows) != 0 {
		t.Errorf("--prefix /work/al matched %+v: a prefix is a directory, not a string", rows)
	}

	parent := "cc-aaaaaaaa-0000-4000-8000-000000000001"
	sessions := map[string]int64{}
	for _, r := range p.usage(t, gen, "session").Session {
		sessions[*r.SessionID] = r.TotalTokens
	}
	if want := map[string]int64{parent: 3390, "codex-bbbbbbbb-0000-4000-8000-000000000002": 1780}; !mapsEqual(sessions, want) {
		t.Errorf("usage session: %v, want %v (a subagent's tokens in its parent's total)", sessions, want)
	}
	own := map[string]int64{}
	for _, r := range p.usage(t, gen, "session", "--own").Session {
		own[*r.SessionID] = r.TotalTokens
	}
	if want := map[string]int64{parent: 3390 - 13 - 5, parent + "-agent-sub1": 13, parent + "-agent-inl1": 5,
		"codex-bbbbbbbb-0000-4000-8000-000000000002": 1780}; !mapsEqual(own, want) {
		t.Errorf("usage session --own: %v, want %v", own, want)
	}
	one := p.usage(t, gen, "session", "--session", parent)
	if len(one.Session) != 1 || one.Session[0].TotalTokens != 3390 {
		t.Errorf("usage session --session %s: %+v, want one row of 3390 tokens", parent, one.Session)
	}

	daily := p.usage(t, gen, "daily")
	cells := cellsOf(daily.Daily)
	if c := cells[dayModel{"2026-03-02", "claude-fictional-9"}]; c.cost != nil || c.in != 1 {
		t.Errorf("the unpriced model: %+v, want 1 input token and no cost", c)
	}
	if !slices.Contains(daily.Totals.UnpricedModels, "claude-fictional-9") || daily.Totals.TotalCost == nil {
		t.Errorf("totals: %+v, want a cost and claude-fictional-9 unpriced", daily.Totals)
	}
	text := p.dshq("usage", "daily", "--timezone", "UTC", "--min-generation", strconv.FormatUint(gen, 10)).ok(t).stdout
	for _, w := range []string{"2026-03-01", "2026-03-02", "$0.00 + unpriced", "no price for claude-fictional-9"} {
		if !strings.Contains(text, w) {
			t.Errorf("usage daily says\n%s\nwithout %q", text, w)
		}
	}
	// In Pacific time the opus call of 00:30 UTC on 2 March is on 1 March.
	var pst usageOut
	p.dshq("usage", "--json", "--timezone", "America/Los_Angeles", "--min-generation", strconv.FormatUint(gen, 10)).ok(t).decode(t, &pst)
	if len(pst.Daily) != 1 || pst.Daily[0].Period != "2026-03-01" {
		t.Errorf("daily in America/Los_Angeles: %d rows (%+v), want all on 2026-03-01", len(pst.Daily), pst.Daily)
	}

	t.Run("the daily tokens are ccusage's", func(t *testing.T) {
		bin := ccusagePath(t)
		want := runCcusage(t, bin, []string{filepath.Join(laptop, ".claude", "projects")}, []string{filepath.Join(desktop, ".codex", "sessions")})
		compareWithCcusage(t, cells, want)
	})
}

// TestUsageCorpusMatchesCcusage imports the agent-harnesses corpus and
// compares `dshq usage daily --json` with ccusage 20.0.24's daily report of
// the same files, day by day and model by model.
func TestUsageCorpusMatchesCcusage(t *testing.T) {
	dir := corpus.RequireHarnesses(t)
	bin := ccusagePath(t)
	p := startPipeline(t)
	var sum importSummary
	p.dshq("import", "--json", dir).ok(t).decode(t, &sum)
	got := cellsOf(p.usage(t, sum.Generation, "daily").Daily)
	want := runCcusage(t, bin, []string{filepath.Join(dir, "claude-code")}, []string{filepath.Join(dir, "codex")})
	compareWithCcusage(t, got, want)
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
