package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/query"
)

func newSearchCmd(g *globals) *cobra.Command {
	var (
		qf       queryFlags
		session  string
		cwds     []string
		types    []string
		surfaces []string
		harness  []string
		limit    int
		all      bool
	)
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search the corpus (sessions, or the events of one session)",
		Long: `search finds a literal phrase (never search syntax; case- and
diacritic-insensitive) in the semantic text of events. Without --session it
returns sessions, each with its strongest matching event (sessions.search);
with --session it returns that session's matching events (events.search).

Filters narrow the search: --cwd (a workspace, repeatable), --harness (the
harness a session was converted from: claude-code, codex, or native for the
others; repeatable), --type and --surface (event filters, repeatable). --limit is the page size (1..100,
default 20); --all follows every page. --json prints one JSON document: the
reply, or with --all every page's items in one reply (generation and
nextCursor those of the last page).`,
		Example: `  dshq search "flaky test"
  dshq search "permission denied" --cwd /home/me/project --type tool/result --all
  dshq search retry --session 3f2a0c1e-… --surface current --json
  dshq search "rate limit" --harness claude-code --harness codex`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("limit") && (limit < 1 || limit > dshq.MaxSearchLimit) {
				return usageErrorf("--limit %d: the page size is 1..%d", limit, dshq.MaxSearchLimit)
			}
			if err := checkSurfaces(surfaces); err != nil {
				return err
			}
			if err := checkHarnesses(harness); err != nil {
				return err
			}
			if session != "" {
				if err := checkSessionID("--session", session); err != nil {
					return err
				}
			}
			var eventFilters []dshq.Filter
			if len(types) > 0 {
				eventFilters = append(eventFilters, listFilter(dshq.FilterType, types))
			}
			if len(surfaces) > 0 {
				eventFilters = append(eventFilters, listFilter(dshq.FilterSurface, surfaces))
			}
			return g.withClient(cmd.Context(), func(c *query.Client) error {
				ctx := cmd.Context()
				if session != "" {
					if len(cwds) > 0 || len(harness) > 0 {
						return usageErrorf("--cwd and --harness filter sessions; they do not go with --session")
					}
					return g.searchEvents(ctx, c, dshq.EventSearchRequest{SessionID: session, Query: args[0], Filters: eventFilters, Limit: limit}, all, qf.opts())
				}
				var sessionFilters []dshq.Filter
				if len(cwds) > 0 {
					sessionFilters = append(sessionFilters, listFilter(dshq.FilterCwd, cwds))
				}
				if len(harness) > 0 {
					sessionFilters = append(sessionFilters, harnessFilter(harness))
				}
				return g.searchSessions(ctx, c, dshq.SessionSearchRequest{Query: args[0], SessionFilters: sessionFilters, EventFilters: eventFilters, Limit: limit}, all, qf.opts())
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&session, "session", "", "search the events of this session")
	f.StringArrayVar(&cwds, "cwd", nil, "only sessions of this workspace (repeatable)")
	f.StringArrayVar(&harness, "harness", nil, "only sessions converted from this harness: claude-code, codex, or native (repeatable)")
	f.StringArrayVar(&types, "type", nil, "only events of this type, e.g. user/message (repeatable)")
	f.StringArrayVar(&surfaces, "surface", nil, "only events on this surface: current, shadowed, log-only (repeatable)")
	f.IntVar(&limit, "limit", 0, "page size, 1..100 (default 20)")
	f.BoolVar(&all, "all", false, "follow every page")
	qf.add(cmd)
	return cmd
}

// harnessFilter is the harness clause of --harness values: "native" is the
// null value (sessions written through the SDK or imported from
// deepseek-harness logs).
func harnessFilter(values []string) dshq.Filter {
	f := dshq.Filter{Kind: dshq.FilterHarness}
	for _, v := range values {
		if v == admin.NativeHarness {
			f.Values = append(f.Values, nil)
			continue
		}
		f.Values = append(f.Values, &v)
	}
	return f
}

// checkSurfaces refuses a --surface value that is not a surface, in the
// flag's terms (the service would name the request's JSON path).
func checkSurfaces(values []string) error {
	for _, v := range values {
		switch dshq.Surface(v) {
		case dshq.SurfaceCurrent, dshq.SurfaceShadowed, dshq.SurfaceLogOnly:
		default:
			return usageErrorf("--surface %q: a surface is current, shadowed or log-only", v)
		}
	}
	return nil
}

// checkHarnesses refuses a --harness value that names no harness dshq
// stores sessions of (the filter would match nothing, and say so as if the
// corpus had none).
func checkHarnesses(values []string) error {
	for _, v := range values {
		switch v {
		case dshq.HarnessClaudeCode, dshq.HarnessCodex, admin.NativeHarness:
		default:
			return usageErrorf("--harness %q: a harness is %s, %s or %s", v, dshq.HarnessClaudeCode, dshq.HarnessCodex, admin.NativeHarness)
		}
	}
	return nil
}

// listFilter is a list filter of kind with values.
func listFilter(kind string, values []string) dshq.Filter {
	f := dshq.Filter{Kind: kind}
	for _, v := range values {
		f.Values = append(f.Values, dshq.Str(v))
	}
	return f
}

func (g *globals) searchSessions(ctx context.Context, c *query.Client, req dshq.SessionSearchRequest, all bool, opts []query.CallOption) error {
	tw := newTable(g.stdout)
	n := 0
	merged, last, err := followPages(g, opts, all,
		func(cursor string, opts []query.CallOption) (*dshq.SessionSearchPage, error) {
			req.Cursor = cursor
			return c.SearchSessions(ctx, req, opts...)
		},
		func(p *dshq.SessionSearchPage) (string, uint64) { return p.NextCursor, p.Generation },
		func(into, p *dshq.SessionSearchPage) {
			into.Items = append(into.Items, p.Items...)
			into.NextCursor, into.Generation = p.NextCursor, p.Generation
		},
		func(page *dshq.SessionSearchPage) {
			if n == 0 && len(page.Items) > 0 {
				fmt.Fprintln(tw, "SESSION\tSEQ\tTYPE\tTIME\tCWD\tSNIPPET")
			}
			for _, h := range page.Items {
				cwd, _ := h.Header.CwdOrEmpty()
				b := h.BestMatch
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", h.Header.ID, b.Seq, b.Type, isoTime(b.Time), cwd, flat(b.Snippet, 0))
			}
			n += len(page.Items)
		})
	if err != nil {
		return err
	}
	if g.json {
		return writeJSON(g.stdout, withRestoreHints(merged))
	}
	return g.endTable(tw, n, "sessions", last.NextCursor, last.Generation)
}

func (g *globals) searchEvents(ctx context.Context, c *query.Client, req dshq.EventSearchRequest, all bool, opts []query.CallOption) error {
	tw := newTable(g.stdout)
	n := 0
	merged, last, err := followPages(g, opts, all,
		func(cursor string, opts []query.CallOption) (*dshq.EventSearchPage, error) {
			req.Cursor = cursor
			return c.SearchEvents(ctx, req, opts...)
		},
		func(p *dshq.EventSearchPage) (string, uint64) { return p.NextCursor, p.Generation },
		func(into, p *dshq.EventSearchPage) {
			into.Items = append(into.Items, p.Items...)
			into.NextCursor, into.Generation = p.NextCursor, p.Generation
		},
		func(page *dshq.EventSearchPage) {
			if n == 0 && len(page.Items) > 0 {
				fmt.Fprintln(tw, "SEQ\tTYPE\tSURFACE\tTIME\tSNIPPET")
			}
			for _, h := range page.Items {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", h.Seq, h.Type, h.Surface, isoTime(h.Time), flat(h.Snippet, 0))
			}
			n += len(page.Items)
		})
	if err != nil {
		return err
	}
	if g.json {
		return writeJSON(g.stdout, merged)
	}
	return g.endTable(tw, n, "events", last.NextCursor, last.Generation)
}

// nextIf is next when all pages are asked for, else "" (the first page only).
func nextIf(all bool, next string) string {
	if !all {
		return ""
	}
	return next
}

// endTable flushes a result table with a closing line (text mode only).
func (g *globals) endTable(tw *tabwriter.Writer, n int, what, next string, gen uint64) error {
	if g.json {
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	more := ""
	if next != "" {
		more = " (more: --all)"
	}
	if n == 0 {
		fmt.Fprintf(g.stdout, "no %s match (generation %d)\n", what, gen)
		return nil
	}
	fmt.Fprintf(g.stdout, "%s at generation %d%s\n", count(n, strings.TrimSuffix(what, "s")), gen, more)
	return nil
}
