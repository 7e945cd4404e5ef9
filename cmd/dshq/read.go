package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/query"
)

func newReadCmd(g *globals) *cobra.Command {
	var (
		qf            queryFlags
		seq           int64
		before, after int64
	)
	cmd := &cobra.Command{
		Use:   "read ID",
		Short: "Read a session's events, or a window around one event",
		Long: `read without --seq lists a session's events in seq order (sessions.read,
every page): seq, time, type and the start of each event's semantic text.
With --seq it reads a window around one event (events.read): --before and
--after events on either side (at most 50 each), the target marked with ">".
--json prints one JSON document, events exactly as written: the window, or
every page of the session in one sessions.read reply.`,
		Example: `  dshq read 3f2a0c1e-…
  dshq read 3f2a0c1e-… --seq 42 --before 3 --after 3
  dshq read 3f2a0c1e-… --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("seq") && (cmd.Flags().Changed("before") || cmd.Flags().Changed("after")) {
				return usageErrorf("--before and --after need --seq")
			}
			if err := checkSessionID("session", args[0]); err != nil {
				return err
			}
			return g.withClient(cmd.Context(), func(c *query.Client) error {
				if cmd.Flags().Changed("seq") {
					win, err := c.ReadEvent(cmd.Context(), dshq.EventReadRequest{SessionID: args[0], Seq: seq, Before: before, After: after}, qf.opts()...)
					if err != nil {
						return err
					}
					if g.json {
						return writeJSON(g.stdout, win)
					}
					tw := newTable(g.stdout)
					calls := map[string]string{}
					for _, e := range win.Events {
						printEvent(tw, e, e.Seq == win.Target.Seq, calls)
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					fmt.Fprintf(g.stdout, "events %d..%d of %s at generation %d\n", win.StartSeq, win.EndSeq, win.Session.ID, win.Generation)
					return nil
				}
				return g.readSession(cmd.Context(), c, args[0], qf.opts())
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&seq, "seq", 0, "read a window around this event")
	f.Int64Var(&before, "before", 0, "events before --seq (0..50)")
	f.Int64Var(&after, "after", 0, "events after --seq (0..50)")
	qf.add(cmd)
	return cmd
}

func (g *globals) readSession(ctx context.Context, c *query.Client, id string, opts []query.CallOption) error {
	req := dshq.SessionReadRequest{SessionID: id}
	tw := newTable(g.stdout)
	n := 0
	calls := map[string]string{}
	merged, last, err := followPages(g, opts, true,
		func(cursor string, opts []query.CallOption) (*dshq.SessionRead, error) {
			req.Cursor = cursor
			return c.ReadSession(ctx, req, opts...)
		},
		func(p *dshq.SessionRead) (string, uint64) { return p.NextCursor, p.Generation },
		func(into, p *dshq.SessionRead) {
			into.Events = append(into.Events, p.Events...)
			into.NextCursor, into.Generation = p.NextCursor, p.Generation
		},
		func(page *dshq.SessionRead) {
			if n == 0 {
				cwd, _ := page.Session.CwdOrEmpty()
				from := ""
				if page.Session.Harness != "" {
					from = "  (" + page.Session.Harness + ")"
				}
				fmt.Fprintf(g.stdout, "session %s  created %s  %s%s\n", page.Session.ID, isoTime(page.Session.CreatedAt), cwd, from)
			}
			for _, e := range page.Events {
				printEvent(tw, e, false, calls)
			}
			n += len(page.Events)
		})
	if err != nil {
		return err
	}
	if g.json {
		return writeJSON(g.stdout, merged)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "%s at generation %d\n", count(n, "event"), last.Generation)
	return nil
}

// printEvent writes one event row: mark, seq, time, type, text preview; a
// tool result is preceded by its tool's name when calls (the tool names of
// the tool calls read so far, by call id) knows it.
func printEvent(tw io.Writer, e dshq.Event, target bool, calls map[string]string) {
	mark := " "
	if target {
		mark = ">"
	}
	text := preview(e)
	switch e.Type {
	case "tool/call":
		if d := fold.DecodeData(e.Data); d.String("callId") != "" && calls != nil {
			calls[d.String("callId")] = d.String("name")
		}
	case "tool/result":
		if name := calls[fold.DecodeData(e.Data).ResultCallID()]; name != "" {
			text = name + " → " + text
		}
	}
	fmt.Fprintf(tw, "%s %d\t%s\t%s\t%s\n", mark, e.Seq, isoTime(e.Time), e.Type, flat(text, 100))
}
