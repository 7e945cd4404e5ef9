package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/record"
	"github.com/dshq/dshq/shellenv"
	"github.com/dshq/dshq/tools/mcpserver"
)

func newTailCmd(g *globals) *cobra.Command {
	var (
		workspace string
		session   string
		from      uint64
		kinds     []string
		count     int
	)
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Follow the live feed of a workspace or a session",
		Long: `tail follows what the projector commits (the live feed): new sessions,
appended events with their text, surface changes, titles, lease changes and
quarantined records, one line per message (--json: one feed message per line).

--workspace CWD or --session ID narrows it (a relative CWD is made absolute
against the current directory, as session cwds are absolute; a Windows
drive-letter or UNC path is kept as written); --kinds picks
message kinds (session, event, surface, title, lease, quarantine). Without
--from it starts with the next message; --from GEN resumes after generation
GEN (0 = the whole retained feed) with nothing dropped or repeated at the
hand-off to live messages; a GEN past the session stream's last sequence is
refused. It runs until SIGINT, or until --count messages were printed.`,
		Example: `  dshq tail --workspace /home/me/project
  dshq tail --session 3f2a0c1e-… --from 1200 --kinds event,title
  dshq tail --from 0 --json --count 100`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workspace != "" && session != "" {
				return usageErrorf("--workspace and --session do not go together")
			}
			var f feed.Filter
			if workspace != "" {
				ws, err := workspaceArg(workspace)
				if err != nil {
					return usageErrorf("--workspace: %w", err)
				}
				workspace = ws
				f.Workspace = record.WorkspaceKey(&workspace)
			}
			if session != "" {
				if err := checkSessionID("--session", session); err != nil {
					return err
				}
			}
			f.SessionID = session
			for _, k := range kinds {
				if !feed.Kind(k).Valid() {
					return usageErrorf("--kinds: unknown kind %q (session, event, surface, title, lease, quarantine)", k)
				}
				f.Kinds = append(f.Kinds, feed.Kind(k))
			}
			if _, err := f.Subject(); err != nil {
				return err
			}
			start := feed.Live()
			if cmd.Flags().Changed("from") {
				start = feed.AfterGeneration(from)
			}
			nc, err := g.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("from") {
				if err := checkFrom(cmd.Context(), js, from); err != nil {
					return err
				}
			}
			ctx, stop := natsconn.WatchConnection(cmd.Context(), nc)
			defer stop()
			n := 0
			errDone := errors.New("done")
			err = feed.Subscribe(ctx, js, f, start, func(m feed.Message) error {
				if err := g.printFeed(m); err != nil {
					return err
				}
				n++
				if count > 0 && n >= count {
					return errDone
				}
				return nil
			})
			if cause := context.Cause(ctx); errors.Is(cause, natsconn.ErrConnectionClosed) {
				return cause
			}
			if errors.Is(err, errDone) || cmd.Context().Err() != nil {
				return nil
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&workspace, "workspace", "", "follow the sessions whose cwd is CWD")
	fl.StringVar(&session, "session", "", "follow one session")
	fl.Uint64Var(&from, "from", 0, "resume after this generation (0 = everything retained)")
	fl.StringSliceVar(&kinds, "kinds", nil, "message kinds to print (comma-separated)")
	fl.IntVarP(&count, "count", "n", 0, "stop after this many messages (0 = follow until SIGINT)")
	return cmd
}

// checkFrom refuses a --from past the session stream's last sequence: no
// feed message will ever follow it, and tail would wait in silence.
func checkFrom(ctx context.Context, js jetstream.JetStream, from uint64) error {
	st, err := js.Stream(ctx, dshq.SessionStream)
	if err != nil {
		return fmt.Errorf("session stream %s: %w", dshq.SessionStream, err)
	}
	if last := st.CachedInfo().State.LastSeq; from > last {
		return usageErrorf("--from %d is past the end of the session stream (its last generation is %d): nothing follows it", from, last)
	}
	return nil
}

// printFeed prints one feed message: a JSON line, or a readable line.
func (g *globals) printFeed(m feed.Message) error {
	if g.json {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(g.stdout, "%s\n", b)
		return err
	}
	var detail string
	switch {
	case m.Session != nil:
		cwd, _ := m.Session.Header.CwdOrEmpty()
		detail = fmt.Sprintf("created %s %s", isoTime(m.Session.Header.CreatedAt), cwd)
	case m.Event != nil:
		e := m.Event
		surface := string(e.Surface)
		if e.Invalid {
			surface = "invalid"
		}
		detail = fmt.Sprintf("%5d  %-20s  %-8s  %s", e.Seq, e.Type, surface, flat(e.Text, 100))
	case m.Surface != nil:
		detail = fmt.Sprintf("%d %s → %s", m.Surface.Seq, orDash(m.Surface.From), m.Surface.To)
	case m.Title != nil:
		detail = fmt.Sprintf("%q", m.Title.Title)
	case m.Lease != nil:
		detail = map[bool]string{true: "live", false: "not live"}[m.Lease.Live]
	case m.Quarantine != nil:
		detail = flat(m.Quarantine.Reason, 160)
	}
	// Fixed widths keep the columns of a stream aligned: a generation of up
	// to 8 digits, a session id up to a UUID's 36 characters.
	_, err := fmt.Fprintf(g.stdout, "%8d  %-10s  %-36s  %s\n", m.Generation, m.Kind, orDash(m.SessionID), detail)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func newRebuildCmd(g *globals) *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{
		Use:   "rebuild",
		Short: "Rebuild the projection from the stream, without downtime",
		Long: `rebuild asks the running projector (dsh.admin.v1.rebuild) to build a fresh
projection — store and index — from the session stream beside the serving one,
and to swap it in once it has caught up; queries go on meanwhile. It shows the
progress (a bar on a terminal) until the swap, or returns at once with
--no-wait. If a rebuild is already running it follows that one.`,
		Example: `  dshq rebuild
  dshq rebuild --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, err := g.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			c := admin.NewClient(nc)
			ctx := cmd.Context()
			before, err := c.Status(ctx)
			if err != nil {
				return err
			}
			r, err := c.Rebuild(ctx)
			if err != nil {
				return err
			}
			if !noWait {
				if r, err = g.followRebuild(ctx, c, r.ID); err != nil {
					return err
				}
			}
			if g.json {
				return writeJSON(g.stdout, r)
			}
			switch {
			case r.Running:
				fmt.Fprintf(g.stdout, "rebuild %s started (follow it with dshq rebuild, or dshq stats)\n", r.ID)
			case r.Error != "":
				return fmt.Errorf("rebuild failed: %s", r.Error)
			default:
				after, err := c.Status(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "rebuilt: %d records through generation %d in %s; epoch %s → %s\n", r.Records, r.Applied,
					time.Duration(r.FinishedAt-r.StartedAt)*time.Millisecond, before.Epoch, after.Epoch)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the rebuild and return")
	return cmd
}

// followRebuild polls the rebuild's status until it swapped in or failed,
// showing a progress bar on a terminal.
func (g *globals) followRebuild(ctx context.Context, c *admin.Client, id string) (*admin.RebuildStatus, error) {
	var bar *progressbar.ProgressBar
	if f, ok := g.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar = progressbar.NewOptions64(1, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("rebuilding"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.Status(ctx)
		if err != nil {
			return nil, err
		}
		r := st.Rebuild
		if r == nil || r.ID != id {
			return nil, fmt.Errorf("rebuild %s is no longer known to the projector (was it restarted?)", id)
		}
		if bar != nil && r.Target > 0 {
			bar.ChangeMax64(int64(r.Target))
			_ = bar.Set64(int64(min(r.Applied, r.Target)))
		}
		if !r.Running {
			if bar != nil {
				_ = bar.Finish()
			}
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped following rebuild %s (it goes on): %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

func newStatsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show what the projection holds and how far behind the stream it is",
		Long: `stats asks the running projector (dsh.admin.v1.stats) for its counts, taken
from one consistent snapshot: sessions (and how many are invalid or live, and,
once Claude Code or Codex sessions are stored, how many come from each harness:
native, claude-code, codex),
events, quarantined records, the index, and the generation beside the session
stream's last sequence (lag = records not yet applied). While the projector
works off a backlog (after a start or an automatic rebuild) its first line
says "catching up: generation X of Y". On a partitioned projection it asks
every shard and shows their sum.`,
		Example: `  dshq stats
  dshq stats --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, err := g.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			st, err := admin.NewClient(nc).Stats(cmd.Context())
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, st)
			}
			if st.CatchingUp {
				fmt.Fprintln(g.stdout, catchingUpLine(st.Generation, st.StreamLastSeq))
			}
			tw := newTable(g.stdout)
			fmt.Fprintf(tw, "sessions\t%d\t(%d invalid, %d live)\n", st.Sessions, st.InvalidSessions, st.LiveSessions)
			if names := harnessNames(st.Harnesses); len(names) > 0 {
				var parts []string
				for _, h := range names {
					parts = append(parts, fmt.Sprintf("%d %s", st.Harnesses[h], h))
				}
				fmt.Fprintf(tw, "by harness\t%s\t\n", strings.Join(parts, ", "))
			}
			fmt.Fprintf(tw, "events\t%d\t\n", st.Events)
			fmt.Fprintf(tw, "quarantined\t%d\trecords\n", st.Quarantined)
			fmt.Fprintf(tw, "generation\t%d\t(stream last sequence %d, %d records)\n", st.Generation, st.StreamLastSeq, st.StreamRecords)
			fmt.Fprintf(tw, "lag\t%d\trecords\n", st.Lag)
			fmt.Fprintf(tw, "index\t%d\tdocs, %d bytes\n", st.IndexDocs, st.IndexBytes)
			fmt.Fprintf(tw, "epoch\t%s\t\n", st.Epoch)
			if st.Shards > 1 {
				fmt.Fprintf(tw, "shards\t%d\t(the figures are their sum; the generation the least)\n", st.Shards)
			}
			return tw.Flush()
		},
	}
	return cmd
}

// harnessNames returns the harnesses of a stats reply in display order:
// native first, then by name. Native alone (no converted session) is not
// listed: the sessions line says it all.
func harnessNames(m map[string]int64) []string {
	if len(m) == 0 || len(m) == 1 && m[admin.NativeHarness] > 0 {
		return nil
	}
	names := make([]string, 0, len(m))
	for h := range m {
		if h != admin.NativeHarness {
			names = append(names, h)
		}
	}
	sort.Strings(names)
	if m[admin.NativeHarness] > 0 {
		names = append([]string{admin.NativeHarness}, names...)
	}
	return names
}

func newEnvCmd(g *globals) *cobra.Command {
	var session, home string
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print the managed DSH_* environment of a session",
		Long: `env prints the managed shell environment a harness gives its shell children
(DSH_HOME, DSH_SHELL=1, and DSH_SESSION_ID with --session), as KEY=value lines
sorted by key, or a JSON object with --json. DSH_HOME is --home, else $DSH_HOME
when set and not blank, else ~/.dsh, made absolute. It needs no server.`,
		Example: `  dshq env --session 3f2a0c1e-…
  eval "$(dshq env --session 3f2a0c1e-… | sed 's/^/export /')"
  dshq env --home /srv/dsh --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if session != "" {
				if err := record.ValidateSessionID(session); err != nil {
					return usageErrorf("--session: %w", err)
				}
			}
			var configured *string
			if cmd.Flags().Changed("home") {
				configured = &home
			}
			resolved, err := resolveHome(configured, g.getenv)
			if err != nil {
				return err
			}
			reg, err := shellenv.NewRegistry(resolved)
			if err != nil {
				return err
			}
			env, err := reg.Collect(shellenv.Execution{SessionID: session})
			if err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, env)
			}
			for _, kv := range env.Sorted() {
				fmt.Fprintln(g.stdout, kv)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "the session (sets DSH_SESSION_ID)")
	cmd.Flags().StringVar(&home, "home", "", "DSH_HOME (default $DSH_HOME, else ~/.dsh)")
	return cmd
}

func newMCPCmd(g *globals) *cobra.Command {
	var (
		viaTools  bool
		workspace string
	)
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the five session tools to an MCP client over stdio",
		Long: `mcp runs an MCP server on stdin/stdout exposing session_search,
session_event_search, session_trace, session_event_trace and session_event_read.
The caller is the session named by DSH_SESSION_ID in this process's environment
(the harness sets it for its shell children); naming no stored session, every
call fails with SESSION_QUERY_TOOL_MISSING_AGENT, its text saying so (and a
warning on stderr). Without DSH_SESSION_ID the caller is a workspace:
--workspace DIR, by default the working directory (made absolute, symlinks as
they are) — what Claude Code and Codex, which name no session, get: the model
sees exactly the sessions whose cwd is that directory (its Claude Code, Codex
and deepseek-harness sessions alike), none excluded from search, and the
single-session tools need session_id. Whoever configures the MCP client
chooses the workspace, never the model. Tools see only sessions of the
caller's workspace (its tenant and cwd). It reaches a running dshq at --nats-url; with
--via-tools it calls the dsh-tools service on its trusted subjects instead of
the trusted query API. With --tenant (a tenant's credential) it calls the
tenant's tool subjects, all such a credential may reach, so it implies
--via-tools, and DSH_SESSION_ID must be one of the tenant's sessions.
Diagnostics go to stderr.`,
		Example: `  claude mcp add dshq -- dshq mcp
  codex mcp add dshq -- dshq mcp
  dshq mcp --workspace /home/me/project
  DSH_SESSION_ID=3f2a0c1e-… dshq mcp
  # in an MCP client configuration:
  {"command": "dshq", "args": ["mcp", "--nats-url", "nats://127.0.0.1:4222"]}
  DSH_SESSION_ID=… DSH_NATS_PASSWORD=… dshq mcp --tenant teamA --user teamA --nats-url nats://dshq.internal:4222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			nc, err := g.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			cfg := mcpserver.ConfigFromEnv(g.getenv, g.conn.URL)
			if cfg.SessionID != "" && cmd.Flags().Changed("workspace") {
				return usageErrorf("--workspace and %s name two callers: unset %s to call as the workspace", mcpserver.EnvSessionID, mcpserver.EnvSessionID)
			}
			if cfg.SessionID == "" {
				ws, err := callerWorkspace(workspace)
				if err != nil {
					return err
				}
				cfg.Workspace = ws
			}
			cfg.Conn = nc
			cfg.ViaToolService = viaTools
			cfg.Tenant = g.tenant
			cfg.Logger = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			// A connection the server closed for good serves no tool call
			// again: exit non-zero so that the MCP client restarts us.
			ctx, stop := natsconn.WatchConnection(cmd.Context(), nc)
			defer stop()
			err = mcpserver.Run(ctx, g.stdin, g.stdout, cfg)
			if cause := context.Cause(ctx); errors.Is(cause, natsconn.ErrConnectionClosed) {
				return cause
			}
			if err != nil && (cmd.Context().Err() != nil || errors.Is(err, io.EOF)) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&viaTools, "via-tools", false, "call the dsh-tools service instead of the query API")
	cmd.Flags().StringVar(&workspace, "workspace", "", "without DSH_SESSION_ID, call as this workspace: the sessions whose cwd is DIR (default: the working directory)")
	return cmd
}

// callerWorkspace returns the workspace of a workspace caller: dir as
// workspaceArg reads it, symlinks as they are, or, when dir is "", the working directory
// as the system reports it (getcwd, not $PWD), which is what Claude Code
// and Codex record as their sessions' cwd.
func callerWorkspace(dir string) (string, error) {
	if dir == "" {
		wd, err := syscall.Getwd()
		if err != nil {
			return "", fmt.Errorf("--workspace: the working directory: %w", err)
		}
		return wd, nil
	}
	ws, err := workspaceArg(dir)
	if err != nil {
		return "", usageErrorf("--workspace: %w", err)
	}
	return ws, nil
}

// workspaceArg is the workspace a --workspace flag names: a path that is
// absolute in a harness's own terms (dshq.AbsoluteCwd: POSIX, a Windows
// drive letter or UNC path, as Claude Code on Windows writes it) is kept as
// written, since a workspace is compared byte for byte; any other is made
// absolute here (filepath.Abs). On Linux filepath.Abs would take
// "e:\work" for a relative path and put the working directory before it.
func workspaceArg(dir string) (string, error) {
	if dshq.AbsoluteCwd(dir) {
		return dir, nil
	}
	return filepath.Abs(dir)
}
