package main

import (
	"fmt"
	"github.com/dshq/dshq/internal/numfmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/usage"
)

// usageReports maps each `dshq usage` report to its dimension and the
// member its rows are under in --json (ccusage's names where it has the
// report).
var usageReports = []struct {
	name, member string
	dim          usage.Dimension
}{
	{"daily", "daily", usage.Day},
	{"weekly", "weekly", usage.Week},
	{"monthly", "monthly", usage.Month},
	{"session", "session", usage.Session},
	{"project", "project", usage.Project},
	{"branch", "branch", usage.Branch},
	{"model", "model", usage.Model},
	{"machine", "machine", usage.Machine},
}

type usageFlags struct {
	qf                                          queryFlags
	since, until, tz, prices                    string
	cwds, prefixes, harness, machines, branches []string
	models, sessions, by                        []string
	own                                         bool
	limit                                       int
}

func newUsageCmd(g *globals) *cobra.Command {
	var f usageFlags
	cmd := &cobra.Command{
		Use:   "usage [daily|weekly|monthly|session|project|branch|model|machine]",
		Short: "Show the tokens and cost the agents spent, by day, session, project, branch, model or machine",
		Long: `usage asks usage.report for the tokens every harness's sessions spent —
Claude Code, Codex and deepseek-harness, on every machine that captured them
— and their cost from the pricing table kept in the repository
(usage/prices.json; --prices FILE adds or replaces models). A model without a
price is shown as such, never as $0. The report is daily unless named: weekly
(from Monday), monthly, session (a session with its subagents; --own for each
session alone), project (the workspace), branch, model or machine. --by adds
a second dimension (dshq usage daily --by machine). --json prints ccusage's
field names (inputTokens, outputTokens, cacheCreationTokens, cacheReadTokens,
totalTokens, totalCost, modelBreakdowns[].modelName, period).`,
		Example: `  dshq usage
  dshq usage daily --since 2026-02-01 --timezone Europe/Paris --json
  dshq usage project --prefix /home/me/work
  dshq usage machine
  dshq usage session --branch feature/retry`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := "daily"
			if len(args) == 1 {
				name = args[0]
			}
			return g.usage(cmd, name, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.since, "since", "", "from this date (YYYY-MM-DD, in --timezone) or RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "until this date, inclusive (YYYY-MM-DD) or RFC 3339 time, exclusive")
	fl.StringVarP(&f.tz, "timezone", "z", "", "IANA time zone of days, weeks and months (default: this machine's, TZ or /etc/localtime)")
	fl.StringVar(&f.prices, "prices", "", "a pricing table in the form of usage/prices.json whose models add to or replace the built-in prices")
	fl.StringSliceVar(&f.cwds, "cwd", nil, "only sessions of this workspace (repeatable)")
	fl.StringSliceVar(&f.prefixes, "prefix", nil, "only sessions of workspaces under this directory (repeatable)")
	fl.StringSliceVar(&f.harness, "harness", nil, "only this harness: claude-code, codex, deepseek-harness (repeatable)")
	fl.StringSliceVar(&f.machines, "machine", nil, "only sessions captured on this machine (repeatable)")
	fl.StringSliceVar(&f.branches, "branch", nil, "only calls made on this git branch (repeatable)")
	fl.StringSliceVar(&f.models, "model", nil, "only this model (repeatable)")
	fl.StringSliceVar(&f.sessions, "session", nil, "only this session and its subagents (repeatable)")
	fl.StringSliceVar(&f.by, "by", nil, "group by this dimension too: day, week, month, session, project, branch, model, harness, tenant, machine")
	fl.BoolVar(&f.own, "own", false, "count each session's own calls (a subagent's are its own, not its parent's)")
	fl.IntVar(&f.limit, "limit", wire.DefaultUsageLimit, "at most this many rows")
	f.qf.add(cmd)
	return cmd
}

func (g *globals) usage(cmd *cobra.Command, name string, f *usageFlags) error {
	var member string
	var dim usage.Dimension
	for _, r := range usageReports {
		if r.name == name {
			member, dim = r.member, r.dim
		}
	}
	if member == "" {
		return &codedError{code: CodeUsage, err: fmt.Errorf("unknown report %q: one of daily, weekly, monthly, session, project, branch, model, machine", name)}
	}
	body := wire.UsageBody{Since: f.since, Until: f.until, TimeZone: f.tz, Cwd: f.cwds, Prefix: f.prefixes,
		Harness: f.harness, Machine: f.machines, Branch: f.branches, Model: f.models, SessionIDs: f.sessions,
		GroupBy: []string{string(dim)}, Rollup: !f.own, Limit: f.limit}
	if body.TimeZone == "" {
		body.TimeZone = localZone()
	}
	for _, b := range f.by {
		d, err := usage.ParseDimension(b)
		if err != nil {
			return &codedError{code: CodeUsage, err: fmt.Errorf("--by: %w", err)}
		}
		body.GroupBy = append(body.GroupBy, string(d))
	}
	if f.prices != "" {
		b, err := os.ReadFile(f.prices)
		if err != nil {
			return &codedError{code: CodeUsage, err: fmt.Errorf("--prices: %w", err)}
		}
		if _, err := usage.ParsePrices(b); err != nil {
			return &codedError{code: CodeUsage, err: fmt.Errorf("--prices %s: %w", f.prices, err)}
		}
		body.Prices = b
	}
	return g.withClient(cmd.Context(), func(c *query.Client) error {
		rep, err := c.Usage(cmd.Context(), body, f.qf.opts()...)
		if err != nil {
			return err
		}
		if g.json {
			return writeJSON(g.stdout, map[string]any{
				member: rep.Rows, "totals": rep.Totals, "groupBy": rep.GroupBy, "timeZone": rep.TimeZone,
				"priceSource": rep.PriceSource, "priceDate": rep.PriceDate, "truncated": rep.Truncated, "generation": rep.Generation,
			})
		}
		printUsage(g.stdout, rep)
		return nil
	})
}

// localZone is this machine's IANA time zone: TZ, else the zoneinfo name
// /etc/localtime links to, else UTC.
func localZone() string {
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" && !strings.HasPrefix(tz, "/") {
		return tz
	}
	if p, err := filepath.EvalSymlinks("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(p, "zoneinfo/"); ok {
			return name
		}
	}
	return "UTC"
}

var usageColumns = map[usage.Dimension]string{
	usage.Day: "DAY", usage.Week: "WEEK (FROM)", usage.Month: "MONTH", usage.Session: "SESSION", usage.Project: "PROJECT",
	usage.Branch: "BRANCH", usage.Model: "MODEL", usage.Harness: "HARNESS", usage.Tenant: "TENANT", usage.Machine: "MACHINE",
}

// printUsage writes a report as a table: one line per group with its
// models, then the total.
func printUsage(w io.Writer, rep wire.UsageReply) {
	tw := newTable(w)
	var head []string
	for _, d := range rep.GroupBy {
		head = append(head, usageColumns[d])
	}
	head = append(head, "MODELS", "INPUT", "OUTPUT", "CACHE CREATE", "CACHE READ", "TOTAL TOKENS", "COST (USD)")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, r := range rep.Rows {
		var cells []string
		for _, d := range rep.GroupBy {
			cells = append(cells, orNone(r.Label(d)))
		}
		cells = append(cells, strings.Join(r.ModelsUsed, ", "))
		cells = append(cells, usageCells(r.Totals)...)
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	cells := make([]string, len(rep.GroupBy))
	cells[0] = "Total"
	cells = append(cells, "")
	cells = append(cells, usageCells(rep.Totals)...)
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	tw.Flush()
	note := fmt.Sprintf("%s in %s at generation %d; prices: %s (%s)", count(len(rep.Rows), "row"), rep.TimeZone, rep.Generation, rep.PriceSource, rep.PriceDate)
	if rep.Truncated {
		note += "; more rows than --limit"
	}
	if len(rep.Totals.UnpricedModels) > 0 {
		note += "; no price for " + strings.Join(rep.Totals.UnpricedModels, ", ") + " (its cost is not in the totals)"
	}
	fmt.Fprintln(w, note)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func usageCells(t usage.Totals) []string {
	return []string{numfmt.Thousands(t.Input), numfmt.Thousands(t.Output), numfmt.Thousands(t.CacheCreation), numfmt.Thousands(t.CacheRead),
		numfmt.Thousands(t.TotalTokens), costCell(t)}
}

func costCell(t usage.Totals) string {
	switch {
	case t.TotalCost == nil:
		return "no price"
	case len(t.UnpricedModels) > 0:
		return fmt.Sprintf("$%.2f + unpriced", *t.TotalCost)
	}
	return fmt.Sprintf("$%.2f", *t.TotalCost)
}
