package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
)

func newTraceCmd(g *globals) *cobra.Command {
	var (
		qf  queryFlags
		seq int64
	)
	cmd := &cobra.Command{
		Use:   "trace ID",
		Short: "Show a session's lineage, or an event's replacement and provenance",
		Long: `trace without --seq shows a session's lineage (sessions.trace): its
ancestors up to the root, and every descendant (forks and subagents) as a tree.
With --seq it traces one event (events.trace): what replaced it, what it
replaced, the events it cites as sources and the events derived from it.`,
		Example: `  dshq trace 3f2a0c1e-…
  dshq trace 3f2a0c1e-… --seq 42 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkSessionID("session", args[0]); err != nil {
				return err
			}
			return g.withClient(cmd.Context(), func(c *query.Client) error {
				if cmd.Flags().Changed("seq") {
					tr, err := c.TraceEvent(cmd.Context(), dshq.EventTraceRequest{SessionID: args[0], Seq: seq}, qf.opts()...)
					if err != nil {
						return err
					}
					if g.json {
						return writeJSON(g.stdout, tr)
					}
					printEventTrace(g.stdout, tr)
					return nil
				}
				tr, err := c.TraceSession(cmd.Context(), dshq.SessionTraceRequest{SessionID: args[0]}, qf.opts()...)
				if err != nil {
					return err
				}
				if g.json {
					return writeJSON(g.stdout, tr)
				}
				printLineage(g.stdout, tr)
				return nil
			})
		},
	}
	cmd.Flags().Int64Var(&seq, "seq", 0, "trace this event instead of the session's lineage")
	qf.add(cmd)
	return cmd
}

func printEventTrace(w io.Writer, tr *dshq.EventTrace) {
	t := tr.Target
	fmt.Fprintf(w, "event %d of %s: %s, %s, %s\n", t.Seq, t.SessionID, t.Type, t.Surface, isoTime(t.Time))
	tw := newTable(w)
	if tr.ReplacedBy != nil {
		fmt.Fprintf(tw, "replaced by\t%d\n", *tr.ReplacedBy)
	} else {
		fmt.Fprintf(tw, "replaced by\t—\n")
	}
	fmt.Fprintf(tw, "replacement chain\t%s\n", seqList(tr.ReplacementChain))
	fmt.Fprintf(tw, "replaces\t%s\n", seqList(tr.ReplacedEventSeqs))
	fmt.Fprintf(tw, "sources\t%s\n", seqList(tr.SourceEventSeqs))
	fmt.Fprintf(tw, "derived\t%s\n", seqList(tr.DerivedEventSeqs))
	fmt.Fprintf(tw, "generation\t%d\n", tr.Generation)
	_ = tw.Flush()
}

func printLineage(w io.Writer, tr *dshq.LineageTrace) {
	line := func(indent string, r dshq.SessionRecord, mark string) {
		cwd, _ := r.Header.CwdOrEmpty()
		live := ""
		if r.Live {
			live = " live"
		}
		origin := ""
		if r.Header.Origin != "" {
			origin = " " + r.Header.Origin
		}
		if r.Header.Harness != "" {
			origin += " (" + r.Header.Harness + ")"
		}
		fmt.Fprintf(w, "%s%s%s  %s  %s%s%s\n", indent, mark, r.Header.ID, isoTime(r.Header.CreatedAt), cwd, origin, live)
	}
	if !tr.Complete && tr.UnresolvedParentID != nil {
		fmt.Fprintf(w, "(parent %s is not in the corpus)\n", *tr.UnresolvedParentID)
	}
	indent := ""
	for i := len(tr.Ancestors) - 1; i >= 0; i-- {
		line(indent, tr.Ancestors[i], "")
		indent += "  "
	}
	line(indent, tr.Target, "* ")
	var walk func(nodes []dshq.LineageNode, indent string)
	walk = func(nodes []dshq.LineageNode, indent string) {
		for _, n := range nodes {
			line(indent, n.Session, "└ ")
			walk(n.Descendants, indent+"  ")
		}
	}
	walk(tr.Descendants, indent+"  ")
	fmt.Fprintf(w, "generation %d\n", tr.Generation)
}
