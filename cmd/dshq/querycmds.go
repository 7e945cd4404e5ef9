package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

// queryFlags are the consistency flags of every query command.
type queryFlags struct {
	minGeneration uint64
	timeoutMs     int
}

func (q *queryFlags) add(cmd *cobra.Command) {
	cmd.Flags().Uint64Var(&q.minGeneration, "min-generation", 0, "answer only once the projection has applied this generation (read your writes; import prints it)")
	cmd.Flags().IntVar(&q.timeoutMs, "timeout-ms", dshq.DefaultTimeoutMs, "how long the service may wait for --min-generation (1..30000)")
}

func (q *queryFlags) opts() []query.CallOption {
	opts := []query.CallOption{query.WithTimeoutMs(q.timeoutMs)}
	if q.minGeneration > 0 {
		opts = append(opts, query.WithMinGeneration(q.minGeneration))
	}
	return opts
}

// withClient dials and runs fn with a query client. When the service
// answered (a reply, or an error of its own) and the projection is catching
// up with the stream, it says so on stderr: the answer may be incomplete.
func (g *globals) withClient(ctx context.Context, fn func(c *query.Client) error) error {
	nc, err := g.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	err = fn(query.NewClient(nc))
	if err == nil || dshq.ErrorCode(err) != "" {
		g.noteCatchingUp(ctx, nc)
	}
	return err
}

// catchingUpWait bounds the status request behind a read's answer.
const catchingUpWait = 2 * time.Second

// noteCatchingUp writes "catching up: generation X of Y" on stderr (a JSON
// object with --json) when the projector says it is working off a backlog.
// A deployment without a reachable dsh-admin says nothing.
func (g *globals) noteCatchingUp(ctx context.Context, nc *nats.Conn) {
	ctx, cancel := context.WithTimeout(ctx, catchingUpWait)
	defer cancel()
	st, err := admin.NewClient(nc).Status(ctx)
	if err != nil || !st.CatchingUp {
		return
	}
	if g.json {
		b, _ := json.Marshal(map[string]any{"catchingUp": map[string]uint64{"generation": st.Generation, "streamLastSeq": st.StreamLastSeq}})
		fmt.Fprintf(g.stderr, "%s\n", b)
		return
	}
	fmt.Fprintln(g.stderr, "dshq:", catchingUpLine(st.Generation, st.StreamLastSeq))
}

// catchingUpLine is the note of a projection at generation gen of a stream
// whose last sequence is last.
func catchingUpLine(gen, last uint64) string {
	return fmt.Sprintf("catching up: generation %d of %d (answers may be incomplete until the projection has caught up)", gen, last)
}

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
		if v == "native" {
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

// checkSessionID refuses an id no session can have (the service would
// answer that no such session exists); what names it the error.
func checkSessionID(what, id string) error {
	if err := record.ValidateSessionID(id); err != nil {
		return fmt.Errorf("%s %q is not a session id: %w", what, id, err)
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
	var merged *dshq.SessionSearchPage // --json: every page's items in one reply
	for {
		page, err := c.SearchSessions(ctx, req, opts...)
		if err != nil {
			return err
		}
		if g.json {
			if merged == nil {
				merged = page
			} else {
				merged.Items = append(merged.Items, page.Items...)
				merged.NextCursor, merged.Generation = page.NextCursor, page.Generation
			}
		} else {
			if n == 0 && len(page.Items) > 0 {
				fmt.Fprintln(tw, "SESSION\tSEQ\tTYPE\tTIME\tCWD\tSNIPPET")
			}
			for _, h := range page.Items {
				cwd, _ := h.Header.CwdOrEmpty()
				b := h.BestMatch
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", h.Header.ID, b.Seq, b.Type, isoTime(b.Time), cwd, flat(b.Snippet, 0))
			}
		}
		n += len(page.Items)
		if !all || page.NextCursor == "" {
			if g.json {
				return writeJSON(g.stdout, withRestoreHints(merged))
			}
			return g.endTable(tw, n, "sessions", page.NextCursor, page.Generation)
		}
		req.Cursor = page.NextCursor
		opts = append(opts, query.WithMinGeneration(page.Generation))
	}
}

func (g *globals) searchEvents(ctx context.Context, c *query.Client, req dshq.EventSearchRequest, all bool, opts []query.CallOption) error {
	tw := newTable(g.stdout)
	n := 0
	var merged *dshq.EventSearchPage // --json: every page's items in one reply
	for {
		page, err := c.SearchEvents(ctx, req, opts...)
		if err != nil {
			return err
		}
		if g.json {
			if merged == nil {
				merged = page
			} else {
				merged.Items = append(merged.Items, page.Items...)
				merged.NextCursor, merged.Generation = page.NextCursor, page.Generation
			}
		} else {
			if n == 0 && len(page.Items) > 0 {
				fmt.Fprintln(tw, "SEQ\tTYPE\tSURFACE\tTIME\tSNIPPET")
			}
			for _, h := range page.Items {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", h.Seq, h.Type, h.Surface, isoTime(h.Time), flat(h.Snippet, 0))
			}
		}
		n += len(page.Items)
		if !all || page.NextCursor == "" {
			if g.json {
				return writeJSON(g.stdout, merged)
			}
			return g.endTable(tw, n, "events", page.NextCursor, page.Generation)
		}
		req.Cursor = page.NextCursor
		opts = append(opts, query.WithMinGeneration(page.Generation))
	}
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
	var merged *dshq.SessionRead // --json: every page's events in one reply
	for {
		page, err := c.ReadSession(ctx, req, opts...)
		if err != nil {
			return err
		}
		if g.json {
			if merged == nil {
				merged = page
			} else {
				merged.Events = append(merged.Events, page.Events...)
				merged.NextCursor, merged.Generation = page.NextCursor, page.Generation
			}
		} else {
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
		}
		n += len(page.Events)
		if page.NextCursor == "" {
			if g.json {
				return writeJSON(g.stdout, merged)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s at generation %d\n", count(n, "event"), page.Generation)
			return nil
		}
		req.Cursor = page.NextCursor
		opts = append(opts, query.WithMinGeneration(page.Generation))
	}
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
	var d struct {
		CallID  string `json:"callId"`
		Name    string `json:"name"`
		Message struct {
			Source struct {
				CallID string `json:"callId"`
			} `json:"source"`
		} `json:"message"`
	}
	switch e.Type {
	case "tool/call":
		if json.Unmarshal(e.Data, &d) == nil && d.CallID != "" && calls != nil {
			calls[d.CallID] = d.Name
		}
	case "tool/result":
		if json.Unmarshal(e.Data, &d) == nil && calls[d.Message.Source.CallID] != "" {
			text = calls[d.Message.Source.CallID] + " → " + text
		}
	}
	fmt.Fprintf(tw, "%s %d\t%s\t%s\t%s\n", mark, e.Seq, isoTime(e.Time), e.Type, flat(text, 100))
}

// preview is the text read shows for an event: its semantic text (what
// search finds), with who it came from where the type does not say it (a
// compaction summary, a failed tool result); else what the rows that have
// none carry: a chunk's delta or block, a title, a model message's
// thinking, a converted harness record's subtype.
func preview(e dshq.Event) string {
	if t := fold.Text(e); strings.TrimSpace(t) != "" {
		if w := who(e); !strings.HasPrefix(strings.ToLower(t), strings.TrimSpace(w)) {
			return w + t
		}
		return t
	}
	if p := harnessPreview(e); p != "" {
		return p
	}
	switch e.Type {
	case "assistant/chunk":
		var d struct {
			Chunk struct {
				Type           string `json:"type"`
				Text           string `json:"text"`
				Name           string `json:"name"`
				ArgumentsDelta string `json:"argumentsDelta"`
				BlockType      string `json:"blockType"`
				Block          struct {
					Type string `json:"type"`
					Text string `json:"text"`
					Name string `json:"name"`
				} `json:"block"`
			} `json:"chunk"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			return ""
		}
		c := d.Chunk
		switch c.Type {
		case "text-delta", "reasoning-delta":
			return c.Type + " " + strconv.Quote(c.Text)
		case "tool-call-delta":
			return words(c.Type, c.Name, strconv.Quote(c.ArgumentsDelta))
		case "block-start":
			return words(c.Type, c.BlockType)
		case "block-end":
			return words(c.Type, c.Block.Type, c.Block.Name, c.Block.Text)
		}
		return c.Type
	case "session/title":
		var d struct {
			Title string `json:"title"`
		}
		if json.Unmarshal(e.Data, &d) == nil {
			return d.Title
		}
	}
	return ""
}

// message is what preview reads of a message event: its source and the
// kinds of its content.
type message struct {
	Source struct {
		Kind   string `json:"kind"`
		Plugin string `json:"plugin"`
	} `json:"source"`
	Content []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		IsError bool   `json:"isError"`
	} `json:"content"`
}

// messageOf decodes the message of a user/message (its data) or of an
// assistant/message or tool/result (data.message).
func messageOf(e dshq.Event) (message, bool) {
	var m message
	switch e.Type {
	case dshq.TypeUserMessage:
		return m, json.Unmarshal(e.Data, &m) == nil
	case "assistant/message", "tool/result":
		var d struct {
			Message message `json:"message"`
		}
		ok := json.Unmarshal(e.Data, &d) == nil
		return d.Message, ok
	}
	return m, false
}

// who is the prefix naming where a text came from when the event type
// does not: a plugin's message (a compaction summary), a tool result that
// is an error.
func who(e dshq.Event) string {
	m, ok := messageOf(e)
	if !ok {
		return ""
	}
	for _, c := range m.Content {
		if c.Type == "tool-result" && c.IsError {
			return "error: "
		}
	}
	if m.Source.Kind == "plugin" && m.Source.Plugin != "" {
		return "[" + m.Source.Plugin + "] "
	}
	return ""
}

// harnessPreview is what read shows for an event without semantic text: a
// model message's thinking ("thinking: …", kept but never searchable), a
// message with only blank text, a converted harness record's subtype and
// role (claude-code/progress hook_progress).
func harnessPreview(e dshq.Event) string {
	if m, ok := messageOf(e); ok {
		for _, c := range m.Content {
			if c.Type == "reasoning" && strings.TrimSpace(c.Text) != "" {
				return "thinking: " + c.Text
			}
		}
		if len(m.Content) > 0 {
			return "(blank)"
		}
		return ""
	}
	if !strings.HasPrefix(e.Type, dshq.HarnessClaudeCode+"/") && !strings.HasPrefix(e.Type, dshq.HarnessCodex+"/") {
		return ""
	}
	var d struct {
		Subtype  string `json:"subtype"`
		Role     string `json:"role"`
		Error    string `json:"error"`
		RoutedTo string `json:"routedTo"`
		CopyOf   *int64 `json:"copyOf"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return ""
	}
	out := words(d.Subtype, d.Role, d.Error)
	if d.RoutedTo != "" {
		out = words(out, "→ "+d.RoutedTo)
	}
	if d.CopyOf != nil {
		out = words(out, fmt.Sprintf("(copy of %d)", *d.CopyOf))
	}
	return out
}

// newTable returns an aligned table writer.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }

// isoTime renders epoch milliseconds as UTC ISO-8601 with milliseconds.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// flat puts text on one line (tabs and newlines become spaces) and cuts it
// to max runes with an ellipsis (max 0 = no cut).
func flat(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// words joins the non-empty ws with spaces.
func words(ws ...string) string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
}

// count is "1 session", "2 sessions": n and noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// seqList renders seqs as "1, 2, 3" or "—".
func seqList(seqs []int64) string {
	if len(seqs) == 0 {
		return "—"
	}
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}
