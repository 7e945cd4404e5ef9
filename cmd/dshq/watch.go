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
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/internal/natsconn"
)

// watchOptions are the watch command's flags.
type watchOptions struct {
	claude, codex, deepseek []string
	idle, poll, rescan      time.Duration
	stream                  string
	verbose                 bool
	machine                 string // the header's machine of converted sessions (machine.go)
}

func newWatchCmd(g *globals) *cobra.Command {
	var o watchOptions
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Follow Claude Code, Codex and deepseek-harness roots and publish what they append, live",
		Long: `watch follows the directories the harnesses write their session files to and
publishes every line they append, within a second of the line reaching disk,
through the harness SDK (write leases, expected sequences, retries) — the same
conversion as dshq import, so a watched file and a one-shot import of the
finished file store the same log (docs/harnesses.md#dshq-watch).

By default it follows Claude Code's $CLAUDE_CONFIG_DIR/projects (default
~/.claude/projects) and Codex's $CODEX_HOME/sessions and
$CODEX_HOME/archived_sessions (default ~/.codex/…). --claude and --codex
replace a harness's default roots (repeat the flag for several; "off" follows
none of that harness); --deepseek adds a deepseek-harness session root (none
by default), whose files are imported again each time they grow. A root that
does not exist yet is looked for at every rescan.

It uses inotify, adding a watch on every directory (new files and directories
are picked up as they appear), and walks the roots every --rescan for anything
inotify did not report; without inotify (or past the system's watch limit) it
polls every --poll. --poll given forces polling.

While a file is written its sessions are live (watch holds their write
leases); after --idle without a change their handles close. A torn last line
(a write cut in the middle of a line) waits for its newline. watch survives
its own restart: each file resumes from what the session stream holds, with no
gap and no duplicate, and the leases a killed watch of the same roots on this
machine left are taken back at once (its writer identity, held by a lock file
under ~/.cache/dshq/writers: a second watch of the same roots is refused); a file that does not begin with what its session holds
(another file claiming the session, a rewritten or truncated one) is reported
and not published. It runs until SIGINT or
SIGTERM; reports go to stdout, one line each (--json: one JSON object per
line): watching, missing, live, idle, note, retry (a write that failed for a
reason that passes — the bus overloaded, a lease not yet lapsed — retried
where it stopped), error (the file is resumed from the stream after a
pause); -v adds one per append.`,
		Example: `  dshq watch
  dshq watch --claude ~/work/claude-projects --codex off
  dshq watch --deepseek ~/.dsh/sessions -v
  dshq watch --poll 500ms --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			roots, err := g.watchRoots(cmd, o)
			if err != nil {
				return err
			}
			// The writer identity of this machine and these roots: a
			// restarted watch takes back at once the leases a killed one
			// left; the lock refuses a second watch of the same roots.
			host, err := os.Hostname()
			if err != nil {
				return fmt.Errorf("writer identity: %w", err)
			}
			lock, err := g.lockWriter(follow.WriterName(host, roots))
			var busy *follow.WriterBusyError
			if errors.As(err, &busy) {
				return fmt.Errorf("another dshq watch of the same roots runs on this machine (%w): stop it first", err)
			}
			if err != nil {
				return err
			}
			defer func() { _ = lock.Unlock() }()
			nc, err := g.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			store, err := openStore(cmd.Context(), nc, o.stream, g.tenant, bus.WithWriter(lock.Name),
				bus.WithLeaseHolder(g.machine()+" (dshq watch)"))
			if err != nil {
				if cmd.Context().Err() != nil {
					return nil // stopped while starting: a stop, not a failure
				}
				return err
			}
			// A connection the server closed for good (not reconnecting)
			// ends watch with an error: it never lingers publishing nothing.
			ctx, stop := natsconn.WatchConnection(cmd.Context(), nc)
			defer stop()
			cfg := follow.Config{Store: store, Roots: roots, Idle: o.idle, Rescan: o.rescan,
				Report: g.watchReporter(o.verbose), Machine: o.machine,
				Logger: slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			if cmd.Flags().Changed("poll") {
				cfg.Poll, cfg.ForcePoll = o.poll, true
			}
			cfg.Native = func(ctx context.Context, path string, data []byte) error {
				return importNative(ctx, store, path, data)
			}
			w, err := follow.NewWatcher(cfg)
			if err != nil {
				return err
			}
			if err := w.Run(ctx); err != nil {
				return err
			}
			if cause := context.Cause(ctx); errors.Is(cause, natsconn.ErrConnectionClosed) {
				return cause
			}
			return nil
		},
	}
	f := cmd.Flags()
	addMachineFlag(f, &o.machine)
	f.StringArrayVar(&o.claude, "claude", nil, "a Claude Code projects root to follow instead of the default (repeatable; off = none)")
	f.StringArrayVar(&o.codex, "codex", nil, "a Codex sessions root to follow instead of the defaults (repeatable; off = none)")
	f.StringArrayVar(&o.deepseek, "deepseek", nil, "a deepseek-harness session root to follow too (repeatable)")
	f.DurationVar(&o.idle, "idle", follow.DefaultIdle, "close a file's sessions (no longer live) after this long without a change")
	f.DurationVar(&o.poll, "poll", follow.DefaultPoll, "poll at this interval instead of using inotify")
	f.DurationVar(&o.rescan, "rescan", follow.DefaultRescan, "walk the roots this often for changes inotify did not report")
	f.StringVar(&o.stream, "stream", dshq.SessionStream, "session log stream")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "report every append")
	return cmd
}

// watchRoots returns the roots the flags name.
func (g *globals) watchRoots(cmd *cobra.Command, o watchOptions) ([]follow.Root, error) {
	home, err := g.home()
	if err != nil {
		return nil, err
	}
	defaults := follow.DefaultRoots(g.getenv, home)
	var roots []follow.Root
	pick := func(flag string, dirs []string, format capture.Format) error {
		if !cmd.Flags().Changed(flag) {
			for _, r := range defaults {
				if r.Format == format {
					roots = append(roots, r)
				}
			}
			return nil
		}
		for _, d := range dirs {
			if d == "off" {
				continue
			}
			abs, err := filepath.Abs(d)
			if err != nil {
				return usageErrorf("--%s: %w", flag, err)
			}
			roots = append(roots, follow.Root{Format: format, Dir: abs})
		}
		return nil
	}
	if err := pick("claude", o.claude, capture.FormatClaudeCode); err != nil {
		return nil, err
	}
	if err := pick("codex", o.codex, capture.FormatCodex); err != nil {
		return nil, err
	}
	for _, d := range o.deepseek {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, usageErrorf("--deepseek: %w", err)
		}
		roots = append(roots, follow.Root{Format: capture.FormatDeepseek, Dir: abs})
	}
	if len(roots) == 0 {
		return nil, usageErrorf("no root to follow: --claude off and --codex off need --deepseek DIR")
	}
	return roots, nil
}

// lockWriter takes writer identity name on this machine, its lock file
// under $XDG_CACHE_HOME/dshq/writers (default ~/.cache/dshq/writers).
func (g *globals) lockWriter(name string) (*follow.WriterLock, error) {
	cache := g.getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := g.home()
		if err != nil {
			return nil, err
		}
		cache = filepath.Join(home, ".cache")
	}
	return follow.LockWriter(filepath.Join(cache, "dshq", "writers"), name)
}

// watchReport is a report as --json prints it.
type watchReport struct {
	Kind      follow.ReportKind `json:"kind"`
	Time      time.Time         `json:"time"`
	Path      string            `json:"path,omitempty"`
	Format    capture.Format    `json:"format,omitempty"`
	SessionID string            `json:"sessionId,omitempty"`
	Events    int               `json:"events,omitempty"`
	Detail    string            `json:"detail,omitempty"`
	Error     string            `json:"error,omitempty"`
}

// watchReporter prints the watcher's reports on stdout.
func (g *globals) watchReporter(verbose bool) func(follow.Report) {
	var mu sync.Mutex
	return func(r follow.Report) {
		if r.Kind == follow.ReportPublished && !verbose {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if g.json {
			wr := watchReport{Kind: r.Kind, Time: r.Time.UTC(), Path: r.Path, Format: r.Format, SessionID: r.SessionID, Events: r.Events, Detail: r.Detail}
			if r.Err != nil {
				wr.Error = oneLine(r.Err.Error())
			}
			b, _ := json.Marshal(wr)
			fmt.Fprintf(g.stdout, "%s\n", b)
			return
		}
		printWatchReport(g.stdout, r)
	}
}

func printWatchReport(w io.Writer, r follow.Report) {
	ts := r.Time.Format("15:04:05")
	switch r.Kind {
	case follow.ReportWatching:
		fmt.Fprintf(w, "%s watching  %-16s %s (%s)\n", ts, r.Format, r.Path, r.Detail)
	case follow.ReportMissing:
		fmt.Fprintf(w, "%s missing   %-16s %s (not there yet; looked for again at every rescan)\n", ts, r.Format, r.Path)
	case follow.ReportLive:
		fmt.Fprintf(w, "%s live      %s  ← %s\n", ts, r.SessionID, r.Path)
	case follow.ReportPublished:
		fmt.Fprintf(w, "%s +%-8d %s\n", ts, r.Events, r.SessionID)
	case follow.ReportIdle:
		fmt.Fprintf(w, "%s idle      %s\n", ts, r.SessionID)
	case follow.ReportNotice:
		fmt.Fprintf(w, "%s note      %s: %s\n", ts, orPath(r), r.Detail)
	case follow.ReportRetry:
		fmt.Fprintf(w, "%s retry     %s: %s\n", ts, orPath(r), oneLine(r.Err.Error()))
	case follow.ReportError:
		fmt.Fprintf(w, "%s error     %s: %s (retrying)\n", ts, r.Path, oneLine(r.Err.Error()))
	}
}

// importNative imports the complete lines of a deepseek-harness file as
// dshq import does (continuing what is stored).
func importNative(ctx context.Context, store *bus.Store, path string, data []byte) error {
	f := classify(path)
	if f.refused != "" {
		return errors.New(f.refused)
	}
	hdr, events, err := parseLog(f, data, importOptions{})
	if err != nil {
		return err
	}
	_, err = store.Import(ctx, hdr, events)
	return err
}

// orPath names a report's session, else its file.
func orPath(r follow.Report) string {
	if r.SessionID != "" {
		return r.SessionID
	}
	return r.Path
}
