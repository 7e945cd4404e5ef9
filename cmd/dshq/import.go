package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/record"
)

// importOptions are the import command's flags.
type importOptions struct {
	fixtureCwd       string
	fixtureSessionID string
	renameOnConflict bool
	stream           string
	wait             time.Duration
	verbose          bool
	machine          string // the header's machine of converted sessions (machine.go)
}

// importResult is the outcome of one file.
type importResult struct {
	File string `json:"file"`
	// SessionID is the id the session is stored under ("" when refused
	// before it was known).
	SessionID string `json:"sessionId,omitempty"`
	// RenamedFrom is the file's own id when --rename-on-conflict stored it
	// under a derived id.
	RenamedFrom string `json:"renamedFrom,omitempty"`
	// Events is the number of events in the file.
	Events int `json:"events"`
	// Published is the number of records this run stored (0 when already
	// present); Continued is true when an earlier partial import was
	// completed.
	Published int  `json:"published"`
	Continued bool `json:"continued,omitempty"`
	// Reason says why the file was refused.
	Reason string `json:"reason,omitempty"`
	// Format is the file's format: deepseek-harness, claude-code or codex.
	Format capture.Format `json:"format,omitempty"`
	// Harness is what converting a Claude Code or Codex file gave: its
	// sessions (its own first, then inline children) and its counts.
	Harness *follow.FileResult `json:"harness,omitempty"`
}

// harnessTotals are the counts of the Claude Code or Codex files of one
// format an import met (imported, present or refused alike).
type harnessTotals struct {
	Files         int   `json:"files"`
	Sessions      int   `json:"sessions"`
	ChildSessions int   `json:"childSessions"`
	Events        int64 `json:"events"`
	LogOnly       int64 `json:"logOnly"`
	InvalidLines  int64 `json:"invalidLines"`
	Lines         int64 `json:"lines"`
	Bytes         int64 `json:"bytes"`
}

// importSummary is the import command's report (--json prints it).
type importSummary struct {
	Imported []importResult `json:"imported"`
	Present  []importResult `json:"present"`
	Refused  []importResult `json:"refused"`
	// Skipped lists the files a directory walk passed over (not session
	// logs), each with its reason.
	Skipped []importResult `json:"skipped"`
	// Generation is the stream sequence of the last record this run stored
	// (0 when none): pass it as --min-generation to read the import back.
	Generation uint64 `json:"generation"`
	// Harnesses counts the Claude Code and Codex files converted, by
	// format (absent when there were none).
	Harnesses map[capture.Format]*harnessTotals `json:"harnesses,omitempty"`
}

func newImportCmd(g *globals) *cobra.Command {
	var o importOptions
	cmd := &cobra.Command{
		Use:   "import [PATH...]",
		Short: "Import session logs: deepseek-harness, Claude Code and Codex files or roots",
		Long: `import publishes session files to the session stream: .jsonl files,
zstd-compressed .jsonl.zst and .jsonl.zstd files, or directories walked
recursively. Each file's format is told from its first lines:

  deepseek-harness  the original harness's session logs (a session root
                    <root>/--<project>--/<id>/session.jsonl[.zstd], any zstd
                    stream as the zstd tool writes it, or the harness's framing)
  claude-code       Claude Code transcripts (~/.claude/projects), subagent
                    files and inline sidechains becoming child sessions
  codex             Codex rollouts (~/.codex/sessions, ~/.codex/archived_sessions)

A Claude Code or Codex file is converted as docs/harnesses.md describes:
every line is kept verbatim (export --source writes the file back byte for
byte), a line that is not JSON is kept as an invalid-line event and counted,
never a refused file. With no PATH, import reads the harnesses' own roots that
exist: $CLAUDE_CONFIG_DIR/projects (default ~/.claude/projects),
$CODEX_HOME/sessions and $CODEX_HOME/archived_sessions (default ~/.codex/…).
Other files a walk meets are skipped: the summary counts them and -v lists
them.

Import is idempotent: a session whose stored records equal the file's is
reported as already present, and a partial earlier import is completed. A
stored session with the same id and different content is refused, unless
--rename-on-conflict stores the file under a derived id (<id>~<hash>, the same
for the same content, so a repeated import finds it present). A session a
harness (or dshq watch) is writing — it holds the session's write lease — is
refused; import it again once the writer is done. A Claude Code or Codex file
that grew since it was imported is continued: its stored lines convert as they
did, the new ones are appended. One that does not begin with the lines its
session holds (another file stating the same session, a rewritten or
truncated file) is refused, saying which. Logs are checked as the projector reads them,
so older message shapes of real logs are taken and nothing imported is
quarantined.

Upstream test fixtures hold {{cwd}} and {{sessionId}} placeholders: --fixture-cwd
substitutes them as the original's web seeder does ({{sessionId}} becomes
--fixture-session-id, by default an id derived from the file's content).

When NATS goes away (a server restart, a stream's leader election) import says
on stderr that it waits, rides through it as the SDK does, and gives up after
--wait with exit 1; run it again to continue where it stopped.

A progress bar is shown on stderr when it is a terminal. The exit status is 1
when any file was refused.`,
		Example: `  dshq import
  dshq import ~/.claude/projects ~/.codex/sessions
  dshq import ~/.dsh/sessions
  dshq import session.jsonl other.jsonl.zst
  dshq import --fixture-cwd /tmp/ws --rename-on-conflict corpus/logs --json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				var err error
				if args, err = g.harnessRoots(); err != nil {
					return err
				}
			}
			if o.fixtureCwd != "" {
				abs, err := filepath.Abs(o.fixtureCwd)
				if err != nil {
					return usageErrorf("--fixture-cwd: %w", err)
				}
				o.fixtureCwd = abs
			}
			if o.fixtureSessionID != "" {
				if o.fixtureCwd == "" {
					return usageErrorf("--fixture-session-id needs --fixture-cwd")
				}
				if err := record.ValidateSessionID(o.fixtureSessionID); err != nil {
					return usageErrorf("--fixture-session-id: %w", err)
				}
			}
			files, skipped, err := discover(args)
			if err != nil {
				return err
			}
			if len(files) == 0 {
				return fmt.Errorf("no .jsonl, .jsonl.zst or .jsonl.zstd files under %s (%d other files skipped)", strings.Join(args, " "), len(skipped))
			}
			if o.wait <= 0 || o.wait > maxImportWait {
				return usageErrorf("--wait must be more than 0 and at most %v (a retried write must stay within the stream's duplicate window)", maxImportWait)
			}
			nc, err := g.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			// Waiting for NATS (a restart, a leader election) is said on
			// stderr and bounded by --wait; a run that gave up is continued
			// by the next (import is idempotent).
			ctx, waiter, stopWaiting := g.waitForNATS(cmd.Context(), nc, o.wait)
			defer stopWaiting()
			writer, release := g.importWriter()
			defer release()
			store, err := openStore(ctx, nc, o.stream, g.tenant, bus.WithRetryNotice(waiter.notice), bus.WithRetryMaxElapsed(o.wait),
				bus.WithWriter(writer))
			if err != nil {
				if gu := waiter.gaveUp(ctx, err); gu != nil {
					return &codedError{code: CodeUnavailable, err: gu}
				}
				return err
			}
			sum, err := runImport(ctx, store, files, o, g.progress(len(files), "importing"))
			if gu := waiter.gaveUp(ctx, err); gu != nil {
				done := len(sum.Imported) + len(sum.Present) + len(sum.Refused) + len(sum.Skipped)
				sum.Skipped = append(skipped, sum.Skipped...)
				_ = g.printImport(sum, o.verbose)
				return &codedError{code: CodeUnavailable, err: fmt.Errorf("%w (%d of %d files done)", gu, done, len(files))}
			}
			if err != nil {
				return err
			}
			sum.Skipped = append(skipped, sum.Skipped...)
			if err := g.printImport(sum, o.verbose); err != nil {
				return err
			}
			if n := len(sum.Refused); n > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d of %d files refused", n, len(files)), errCode: CodeRefused}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.fixtureCwd, "fixture-cwd", "", "substitute the {{cwd}} and {{sessionId}} placeholders of upstream test fixtures, {{cwd}} with this directory")
	f.StringVar(&o.fixtureSessionID, "fixture-session-id", "", "the id {{sessionId}} becomes (default: fixture-<hash of the file>)")
	f.BoolVar(&o.renameOnConflict, "rename-on-conflict", false, "store a file whose id is taken by a different session under a derived id")
	f.StringVar(&o.stream, "stream", dshq.SessionStream, "session log stream")
	f.DurationVar(&o.wait, "wait", defaultImportWait, "how long to wait for NATS (a server restart, a leader election) before giving up")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "list every imported and present file, not only refused ones")
	addMachineFlag(f, &o.machine)
	return cmd
}

// importWriter returns the writer identity of dshq import on this machine
// (bus.WithWriter), held for the life of the process: an import run again
// after one that was killed, or that gave up waiting for NATS, takes back
// at once the leases it left. While another import runs on the machine, it
// is "" (no identity): the two never take leases from each other.
//
// release gives the identity up (at the command's end).
func (g *globals) importWriter() (name string, release func()) {
	host, err := os.Hostname()
	if err != nil {
		return "", func() {}
	}
	lock, err := g.lockWriter("dshq-import@" + host)
	if err != nil {
		return "", func() {} // another import holds it, or no lock here
	}
	return lock.Name, func() { _ = lock.Unlock() }
}

// harnessRoots returns the harnesses' own roots that exist, or an error
// naming where it looked.
func (g *globals) harnessRoots() ([]string, error) {
	home, err := g.home()
	if err != nil {
		return nil, err
	}
	var dirs, looked []string
	for _, r := range follow.DefaultRoots(g.getenv, home) {
		looked = append(looked, r.Dir)
		if follow.Exists(r.Dir) {
			dirs = append(dirs, r.Dir)
		}
	}
	if len(dirs) == 0 {
		return nil, usageErrorf("no harness root to import: looked for %s, and none exists; name the files or directories to import", strings.Join(looked, ", "))
	}
	return dirs, nil
}

// home returns the user's home directory ($HOME, else the system's idea).
func (g *globals) home() (string, error) {
	if h := g.getenv("HOME"); h != "" {
		return h, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("home directory: %w", err)
	}
	return h, nil
}

// progress returns a progress bar on stderr when stderr is a terminal and
// not --json, else a no-op.
func (g *globals) progress(total int, what string) progressFunc {
	f, ok := g.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return func(int, string) {}
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	return func(n int, desc string) {
		if desc != "" {
			bar.Describe(desc)
		}
		_ = bar.Add(n)
		if bar.IsFinished() {
			_ = bar.Finish()
		}
	}
}

// progressFunc advances a progress display by n and describes the current
// item ("" keeps the description).
type progressFunc func(n int, desc string)

// runImport imports files one by one. Only a failure to talk to the server
// (the context ending, or a transient failure the store's retries ran out
// on) stops it; every problem with a file refuses that file.
func runImport(ctx context.Context, store *bus.Store, files []importFile, o importOptions, progress progressFunc) (importSummary, error) {
	sum := importSummary{Imported: []importResult{}, Present: []importResult{}, Refused: []importResult{}, Skipped: []importResult{}}
	for _, f := range files {
		progress(0, filepath.Base(f.path))
		res, gen, err := importOne(ctx, store, f, o)
		progress(1, "")
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
		if err != nil && failover.Transient(err) {
			return sum, err // the server, not the file: nothing to refuse
		}
		if h := res.Harness; h != nil {
			if sum.Harnesses == nil {
				sum.Harnesses = map[capture.Format]*harnessTotals{}
			}
			t := sum.Harnesses[h.Format]
			if t == nil {
				t = &harnessTotals{}
				sum.Harnesses[h.Format] = t
			}
			t.Files++
			t.Sessions += len(h.Sessions)
			t.ChildSessions += h.Children
			t.Events += h.Events
			t.LogOnly += h.LogOnly
			t.InvalidLines += h.InvalidLines
			t.Lines += h.Lines
			t.Bytes += h.Bytes
		}
		switch {
		case errors.Is(err, errEmptyFile):
			res.Reason = err.Error()
			sum.Skipped = append(sum.Skipped, res)
		case err != nil:
			res.Reason = oneLine(err.Error())
			sum.Refused = append(sum.Refused, res)
		case res.Published == 0:
			sum.Present = append(sum.Present, res)
		default:
			sum.Imported = append(sum.Imported, res)
		}
		sum.Generation = max(sum.Generation, gen)
	}
	return sum, nil
}

// importOne reads and stores one file through the Store (which checks it
// as the projector reads it, so that nothing imported is quarantined); it
// returns the stream sequence of the last record it stored (0 when none).
func importOne(ctx context.Context, store *bus.Store, f importFile, o importOptions) (importResult, uint64, error) {
	res := importResult{File: f.path}
	if f.refused != "" {
		return res, 0, errors.New(f.refused)
	}
	format, err := fileFormat(f)
	if err != nil {
		return res, 0, err
	}
	res.Format = format
	if follow.Harness(format) {
		return importHarness(ctx, store, f.path, format, res, o.machine)
	}
	hdr, events, err := readLog(f, o)
	if err != nil {
		return res, 0, err
	}
	res.SessionID, res.Events = hdr.Header.ID, len(events)
	out, err := store.Import(ctx, hdr, events)
	if errors.Is(err, bus.ErrLogConflict) && o.renameOnConflict {
		newID := derivedID(hdr.Header.ID, logRecords(hdr, events))
		if hdr.Raw, err = withHeaderID(hdr.Raw, newID); err != nil {
			return res, 0, err
		}
		hdr.Header.ID = newID
		res.RenamedFrom, res.SessionID = res.SessionID, newID
		out, err = store.Import(ctx, hdr, events)
	}
	res.Published, res.Continued = out.Stored, out.Continued
	switch {
	case errors.Is(err, bus.ErrLogConflict) && !o.renameOnConflict:
		return res, 0, fmt.Errorf("%w; --rename-on-conflict stores it under a derived id", err)
	case err != nil:
		return res, out.LastSeq, err
	}
	return res, out.LastSeq, nil
}

// fileFormat tells a file's format from its name and first lines
// (capture.Detect); a file in a deepseek-harness session root is one, and
// a file of a harness's own root whose lines say nothing (every line torn or
// not JSON) is that harness's.
func fileFormat(f importFile) (capture.Format, error) {
	if f.inRoot {
		return capture.FormatDeepseek, nil
	}
	if strings.HasSuffix(f.path, ".zst") || strings.HasSuffix(f.path, ".zstd") {
		return capture.FormatDeepseek, nil
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return "", unwrapPathError(err)
	}
	defer fh.Close()
	head := make([]byte, 256<<10)
	n, err := io.ReadFull(fh, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", unwrapPathError(err)
	}
	format := capture.Detect(f.path, head[:n])
	if format == capture.FormatUnknown {
		format = f.hint
	}
	if format == capture.FormatUnknown {
		format = capture.FormatDeepseek // the original's reader says what is wrong with it
	}
	return format, nil
}

// errEmptyFile is a harness file with no line yet: skipped, not refused
// (a harness creates its file before it writes).
var errEmptyFile = errors.New("an empty file (no line yet)")

// importHarness converts and stores one Claude Code or Codex file.
func importHarness(ctx context.Context, store *bus.Store, path string, format capture.Format, res importResult, machine string) (importResult, uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return res, 0, unwrapPathError(err)
	}
	fr, err := follow.ImportOn(ctx, store, format, path, data, machine)
	res.Harness = &fr
	if len(fr.Sessions) > 0 {
		res.SessionID = fr.Sessions[0].ID
		res.Events = fr.Sessions[0].Events
	}
	for _, s := range fr.Sessions {
		res.Published += s.Stored
		res.Continued = res.Continued || s.Continued
	}
	if err == nil && len(fr.Sessions) == 0 {
		err = errEmptyFile
	}
	return res, fr.LastSeq, err
}

// readLog reads a file: the header as written, then every event (packed
// rows expanded), with placeholders substituted when asked.
func readLog(f importFile, o importOptions) (dshq.HeaderRecord, []dshq.Event, error) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return dshq.HeaderRecord{}, nil, unwrapPathError(err)
	}
	return parseLog(f, data, o)
}

// parseLog reads a file's content data as readLog does.
func parseLog(f importFile, data []byte, o importOptions) (dshq.HeaderRecord, []dshq.Event, error) {
	if f.inRoot {
		if err := checkPlace(f.path, data); err != nil {
			return dshq.HeaderRecord{}, nil, err
		}
	}
	// Any zstd stream: a file the zstd tool compressed reads as the harness's
	// framed files do (the records are the same). The summary names the file.
	opts := []record.Option{record.WithStandardZstd(), record.WithoutPlaceholders()}
	if o.fixtureCwd != "" {
		id := o.fixtureSessionID
		if id == "" {
			sum := sha256.Sum256(data)
			id = "fixture-" + hex.EncodeToString(sum[:8])
		}
		opts = append(opts, record.WithFixturePlaceholders(o.fixtureCwd, id))
	}
	hdr, events, err := record.ReadAll(bytes.NewReader(data), opts...)
	if record.RuleOf(err) == record.RulePlaceholder {
		return hdr, nil, fmt.Errorf("%w; %s", err, placeholderHint(o))
	}
	if err != nil {
		return hdr, nil, err
	}
	return hdr, events, nil
}

// placeholderHint says what to do about a header placeholder: substitute
// the fixture's, or leave a template that is not a session.
func placeholderHint(o importOptions) string {
	if o.fixtureCwd == "" {
		return "an upstream test fixture: give --fixture-cwd DIR to substitute {{cwd}} and {{sessionId}}"
	}
	return "--fixture-cwd substitutes only {{cwd}} and {{sessionId}}: this file is a template, not a session"
}

// logRecords returns a log's records as written, header record first.
func logRecords(hdr dshq.HeaderRecord, events []dshq.Event) [][]byte {
	recs := make([][]byte, 0, len(events)+1)
	recs = append(recs, hdr.Raw)
	for _, e := range events {
		recs = append(recs, e.Raw)
	}
	return recs
}

// checkPlace checks that a file in a session root sits where its header
// (as written, before any placeholder substitution) says.
func checkPlace(path string, data []byte) error {
	r := record.NewReader(bytes.NewReader(data))
	defer r.Close()
	hdr, err := r.Header()
	if err != nil {
		return err
	}
	idDir := filepath.Base(filepath.Dir(path))
	projDir := filepath.Base(filepath.Dir(filepath.Dir(path)))
	if want := encodeSegment(hdr.Header.ID); idDir != want {
		return fmt.Errorf("header id %q belongs in directory %q, not %q", hdr.Header.ID, want, idDir)
	}
	if want := projectDir(hdr.Header.Cwd); projDir != want {
		return fmt.Errorf("header cwd belongs in project directory %q, not %q", want, projDir)
	}
	return nil
}

// derivedID is the id a conflicting file is stored under: its own id and a
// hash of its records, so the same content always gets the same id.
func derivedID(id string, recs [][]byte) string {
	h := sha256.New()
	for _, r := range recs {
		h.Write(r)
		h.Write([]byte{'\n'})
	}
	suffix := "~" + hex.EncodeToString(h.Sum(nil)[:6])
	for len(id)+len(suffix) > record.MaxSessionIDBytes {
		_, size := utf8.DecodeLastRuneInString(id)
		id = id[:len(id)-size]
	}
	return id + suffix
}

// withHeaderID returns the header record raw with its id replaced, every
// other member kept byte for byte and in order.
func withHeaderID(raw []byte, id string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("header record is not a JSON object")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; dec.More(); i++ {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header record: %w", err)
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("header record: %w", err)
		}
		if key == "id" {
			if v, err = marshalNoEscape(id); err != nil {
				return nil, err
			}
		}
		k, err := marshalNoEscape(key)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	if _, err := record.ParseHeader(b.Bytes()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// marshalNoEscape marshals v as JSON without HTML escaping, as the original
// writer does.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// printImport prints the summary: JSON, or counts and the refused files.
func (g *globals) printImport(sum importSummary, verbose bool) error {
	if g.json {
		return writeJSON(g.stdout, sum)
	}
	sessions := func(rs []importResult) (n, events int) {
		for _, r := range rs {
			if r.Harness == nil {
				n, events = n+1, events+r.Events
				continue
			}
			for _, s := range r.Harness.Sessions {
				n, events = n+1, events+s.Events
			}
		}
		return n, events
	}
	imported, events := sessions(sum.Imported)
	present, _ := sessions(sum.Present)
	w := g.stdout
	fmt.Fprintf(w, "imported  %s (%s)\n", count(imported, "session"), count(events, "event"))
	fmt.Fprintf(w, "present   %s (already stored, nothing written)\n", count(present, "session"))
	fmt.Fprintf(w, "refused   %s\n", count(len(sum.Refused), "file"))
	if n := len(sum.Skipped); n > 0 {
		note := ""
		if !verbose {
			note = "; -v lists them"
		}
		fmt.Fprintf(w, "skipped   %s (not session logs%s)\n", count(n, "file"), note)
	}
	for _, f := range []capture.Format{capture.FormatClaudeCode, capture.FormatCodex} {
		t := sum.Harnesses[f]
		if t == nil {
			continue
		}
		fmt.Fprintf(w, "%-11s %s, %s (%s, %d log-only), %s, %s\n", f, count(t.Files, "file"), count(t.Sessions, "session"),
			count(int(t.Events), "event"), t.LogOnly, count(int(t.InvalidLines), "invalid line"), count(t.ChildSessions, "child session"))
	}
	if sum.Generation > 0 {
		fmt.Fprintf(w, "generation %d (read it back with --min-generation %d)\n", sum.Generation, sum.Generation)
	}
	if verbose {
		for _, r := range sum.Imported {
			note := ""
			if r.Continued {
				note = " (continued a partial import)"
			}
			if r.RenamedFrom != "" {
				note += fmt.Sprintf(" (renamed from %q)", r.RenamedFrom)
			}
			fmt.Fprintf(w, "  imported %s → %s%s\n", r.File, r.SessionID, note)
			printChildren(w, r)
		}
		for _, r := range sum.Present {
			fmt.Fprintf(w, "  present  %s → %s\n", r.File, r.SessionID)
			printChildren(w, r)
		}
		for _, r := range sum.Skipped {
			fmt.Fprintf(w, "  skipped  %s: %s\n", r.File, r.Reason)
		}
	}
	for _, rs := range [][]importResult{sum.Imported, sum.Present} {
		for _, r := range rs {
			if r.Harness != nil && r.Harness.Held > 0 {
				fmt.Fprintf(w, "  held     %s: its last %s are an unfinished line (a write in progress), stored once the line ends\n", r.File, count(int(r.Harness.Held), "byte"))
			}
		}
	}
	for _, r := range sum.Refused {
		fmt.Fprintf(w, "  refused  %s: %s\n", r.File, r.Reason)
	}
	return nil
}

// printChildren lists the inline child sessions of a harness file, and
// what the converter said about its sessions.
func printChildren(w io.Writer, r importResult) {
	if r.Harness == nil {
		return
	}
	for _, s := range r.Harness.Sessions[1:] {
		fmt.Fprintf(w, "             + %s (child of %s, %s)\n", s.ID, s.Parent, count(s.Events, "event"))
	}
	for _, n := range r.Harness.Notices {
		fmt.Fprintf(w, "             note: %s\n", n)
	}
}

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
