package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/capture/restore"
)

// CodeRestoreRefused: restore refused some sessions (the summary says
// which and why).
const CodeRestoreRefused dshq.Code = "DSHQ_RESTORE_REFUSED"

// restoreOptions are the restore command's flags.
type restoreOptions struct {
	workspace string
	since     string
	all       bool
	dryRun    bool
	cwd       string
	maps      []string
	deepseek  string
	stream    string
}

// restoreAction is what restore did, or would do, with one file.
type restoreAction string

const (
	actionWritten restoreAction = "written"
	actionUpdated restoreAction = "updated" // the file was a prefix: the rest appended
	actionPresent restoreAction = "present"
	actionRefused restoreAction = "refused"
)

// restoreItem is one session's outcome.
type restoreItem struct {
	SessionID string        `json:"sessionId"`
	Harness   string        `json:"harness"`
	File      string        `json:"file,omitempty"`
	Action    restoreAction `json:"action"`
	// DryRun: nothing was written; Action is what would be done.
	DryRun bool  `json:"dryRun,omitempty"`
	Bytes  int64 `json:"bytes,omitempty"`
	// Cwd is the directory the restored file says (after --cwd/--map).
	Cwd string `json:"cwd,omitempty"`
	// Remapped lists the directories rewritten, old → new.
	Remapped map[string]string `json:"remapped,omitempty"`
	// Continue is the command that resumes the session here.
	Continue string `json:"continue,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Parent is the parent of a subagent or spawned thread.
	Parent string `json:"parent,omitempty"`
}

// restoreSummary is the restore command's report (--json prints it).
type restoreSummary struct {
	Sessions []restoreItem `json:"sessions"`
	Written  int           `json:"written"`
	Updated  int           `json:"updated"`
	Present  int           `json:"present"`
	Refused  int           `json:"refused"`
}

func newRestoreCmd(g *globals) *cobra.Command {
	var o restoreOptions
	cmd := &cobra.Command{
		Use:   "restore [ID...]",
		Short: "Write sessions from the corpus back where Claude Code, Codex or deepseek-harness look for them, to continue them here",
		Long: `restore writes sessions from the corpus into this machine's harness
directories, exactly where each harness looks for them, and prints the command
that continues each one (docs/continue.md):

  claude-code  $CLAUDE_CONFIG_DIR/projects/<project key>/<sessionId>.jsonl
               (default ~/.claude/projects; the key is the cwd with every
               character but letters and digits turned into "-"), its
               subagent files under <sessionId>/subagents/ (beside the
               transcript for Claude Code before 2.1.2)
  codex        $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl
               (default ~/.codex; the session's start in local time)
  native       --deepseek DIR (default ~/.dsh/sessions):
               <root>/--<project>--/<id>/session.jsonl

Name sessions by id (a Claude Code session's subagent files come with it), or
select them: --workspace DIR (every session whose cwd is DIR), --since
(started since: a duration such as 72h or 7d, or a date), --all (every
session: a new laptop). A Claude Code or Codex file is written byte for byte
as the corpus holds it (dshq export --source).

--cwd NEW restores a session whose project lives elsewhere here: the working
directories the harness reads (Claude Code's cwd fields, Codex's session_meta
and turn_context cwd; docs/harnesses.md#restoring-a-session-elsewhere) are
rewritten from the session's cwd to NEW, and the project key follows. --map
OLD=NEW (repeatable) rewrites OLD and everything under it. The corpus keeps
the original bytes; dshq watch recognises the restored file as the session it
came from, so what the harness appends there is published as that session
continued.

restore never overwrites a different file: a file already in place that is
the session's bytes is present (nothing written: a second run writes
nothing); one that is a prefix of them (the session was continued elsewhere
since) is brought up to date by appending the rest; any other is refused,
naming the file and the session. A session another machine is writing now
(its write lease is held) is refused, naming the holder. --dry-run says what
would be written where. The exit status is 1 when any session was refused.`,
		Example: `  dshq restore cc-258c7280-ae70-4798-800f-63464d01a85d
  dshq restore codex-019c8bfe-ec25-79e0-97d7-bda6a9c575ff --cwd ~/src/app
  dshq restore --workspace /home/me/src/app --map /home/me/src/app=/Users/me/app
  dshq restore --all --since 7d --dry-run`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.runRestore(cmd.Context(), args, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.workspace, "workspace", "", "every session whose cwd is DIR")
	f.StringVar(&o.since, "since", "", "only sessions started since: a duration (72h, 7d) or a date (2026-02-01, RFC 3339)")
	f.BoolVar(&o.all, "all", false, "every session of the corpus")
	f.BoolVar(&o.dryRun, "dry-run", false, "say what would be written where; write nothing")
	f.StringVar(&o.cwd, "cwd", "", "restore into this directory: the session's cwd is rewritten to it")
	f.StringArrayVar(&o.maps, "map", nil, "rewrite the directory OLD (and what is under it) to NEW: OLD=NEW (repeatable)")
	f.StringVar(&o.deepseek, "deepseek", "", "the deepseek-harness session root for native sessions (default ~/.dsh/sessions)")
	f.StringVar(&o.stream, "stream", dshq.SessionStream, "session log stream")
	return cmd
}

// restoreTarget is where the harnesses of this machine look.
type restoreTarget struct {
	claudeProjects string
	codexHome      string
	deepseek       string
}

// candidate is one stored session restore considers.
type candidate struct {
	snap bus.Snapshot
	// named: given by id (its refusals are reported even when it has no
	// file of its own).
	named bool
}

func (g *globals) runRestore(ctx context.Context, ids []string, o restoreOptions) error {
	if len(ids) > 0 && (o.all || o.workspace != "") {
		return usageErrorf("name sessions by id, or select them with --workspace or --all, not both")
	}
	if len(ids) == 0 && !o.all && o.workspace == "" && o.since == "" {
		return usageErrorf("name the sessions to restore (ID...), or select them: --workspace DIR, --since, --all")
	}
	for _, id := range ids {
		if err := checkSessionID("session", id); err != nil {
			return err
		}
	}
	var since time.Time
	if o.since != "" {
		t, err := parseSince(o.since, time.Now())
		if err != nil {
			return usageErrorf("--since %q: %v", o.since, err)
		}
		since = t
	}
	var m restore.Map
	for _, s := range o.maps {
		p, err := restore.ParsePair(s)
		if err != nil {
			return usageErrorf("--map: %v", err)
		}
		m = m.Add(p)
	}
	if o.cwd != "" {
		abs, err := filepath.Abs(o.cwd)
		if err != nil {
			return usageErrorf("--cwd: %v", err)
		}
		o.cwd = abs
	}
	if o.workspace != "" {
		ws, err := workspaceArg(o.workspace)
		if err != nil {
			return usageErrorf("--workspace: %v", err)
		}
		o.workspace = ws
	}
	tgt, err := g.restoreTarget(o)
	if err != nil {
		return err
	}
	nc, err := g.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	store, err := openStore(ctx, nc, o.stream, g.tenant)
	if err != nil {
		return err
	}
	list, err := store.List(ctx)
	if err != nil {
		return err
	}
	byID := map[string]bus.Snapshot{}
	children := map[string][]string{}
	for _, s := range list {
		byID[s.Header.ID] = s
		if p := s.Header.ParentSession; p != nil {
			children[*p] = append(children[*p], s.Header.ID)
		}
	}
	var cands []candidate
	seen := map[string]bool{}
	add := func(id string, named bool) {
		if !seen[id] {
			seen[id] = true
			cands = append(cands, candidate{snap: byID[id], named: named})
		}
	}
	if len(ids) > 0 {
		for _, id := range ids {
			if _, ok := byID[id]; !ok {
				return dshq.Errorf(dshq.CodeSessionNotFound, "session %q not found", id)
			}
		}
		for _, id := range ids {
			add(id, true)
			var walk func(string)
			walk = func(p string) {
				for _, c := range children[p] {
					add(c, false)
					walk(c)
				}
			}
			walk(id)
		}
	} else {
		sort.Slice(list, func(i, j int) bool { return list[i].Header.ID < list[j].Header.ID })
		for _, s := range list {
			if o.workspace != "" {
				if cwd, _ := s.Header.CwdOrEmpty(); cwd != o.workspace {
					continue
				}
			}
			add(s.Header.ID, false)
		}
	}
	if !since.IsZero() {
		kept := cands[:0]
		for _, c := range cands {
			if c.named || time.UnixMilli(c.snap.Header.CreatedAt).After(since) || time.UnixMilli(c.snap.Header.CreatedAt).Equal(since) {
				kept = append(kept, c)
			}
		}
		cands = kept
	}
	if o.cwd != "" {
		// --cwd maps each selected session's own cwd: one cwd, or --map.
		cwds := map[string]bool{}
		for _, c := range cands {
			if cwd, _ := c.snap.Header.CwdOrEmpty(); cwd != "" && c.snap.Header.ParentSession == nil {
				cwds[cwd] = true
			}
		}
		if len(cwds) > 1 {
			return usageErrorf("--cwd: the sessions selected have %d different directories; say which goes where with --map OLD=NEW", len(cwds))
		}
		for cwd := range cwds {
			if _, mapped := m.Apply(cwd); !mapped {
				m = m.Add(restore.Pair{Old: cwd, New: o.cwd})
			}
		}
	}
	r := &restorer{g: g, ctx: ctx, store: store, tgt: tgt, m: m, newCwd: o.cwd, dry: o.dryRun, byID: byID, sources: map[string][]byte{}}
	var sum restoreSummary
	for _, c := range cands {
		it, ok := r.one(c)
		if !ok {
			continue
		}
		switch it.Action {
		case actionWritten:
			sum.Written++
		case actionUpdated:
			sum.Updated++
		case actionPresent:
			sum.Present++
		case actionRefused:
			sum.Refused++
		}
		sum.Sessions = append(sum.Sessions, it)
	}
	if sum.Sessions == nil {
		sum.Sessions = []restoreItem{}
	}
	if g.json {
		if err := writeJSON(g.stdout, sum); err != nil {
			return err
		}
	} else {
		printRestore(g.stdout, sum, o.dryRun)
	}
	if sum.Refused > 0 {
		return &exitError{code: 1, msg: fmt.Sprintf("%d of %d sessions refused", sum.Refused, len(sum.Sessions)), errCode: CodeRestoreRefused}
	}
	return nil
}

// restoreTarget resolves the harness directories of this machine.
func (g *globals) restoreTarget(o restoreOptions) (restoreTarget, error) {
	home, err := g.home()
	if err != nil {
		return restoreTarget{}, err
	}
	claude := g.getenv(follow.EnvClaudeConfigDir)
	if claude == "" {
		claude = filepath.Join(home, ".claude")
	}
	codexHome := g.getenv(follow.EnvCodexHome)
	if codexHome == "" {
		codexHome = filepath.Join(home, ".codex")
	}
	ds := o.deepseek
	if ds == "" {
		ds = filepath.Join(home, ".dsh", "sessions")
	}
	ds, err = filepath.Abs(ds)
	if err != nil {
		return restoreTarget{}, usageErrorf("--deepseek: %v", err)
	}
	return restoreTarget{claudeProjects: filepath.Join(claude, "projects"), codexHome: codexHome, deepseek: ds}, nil
}

// parseSince reads --since: a duration before now (72h, 7d) or a date.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(d, "%d", &n); err == nil && n >= 0 && fmt.Sprint(n) == d {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("want a duration (72h, 7d) or a date (2026-02-01, RFC 3339)")
}

// restorer restores one session at a time.
type restorer struct {
	g      *globals
	ctx    context.Context
	store  *bus.Store
	tgt    restoreTarget
	m      restore.Map
	newCwd string
	dry    bool
	byID   map[string]bus.Snapshot
	// sources caches the source files read (a parent's, for its children).
	sources map[string][]byte
	// rollouts are the Codex rollouts here, by thread id (rollout).
	rollouts map[string]string
}

// one restores candidate c; ok is false for a session that has nothing to
// restore and was not named (an inline child, whose lines its parent's
// file holds).
func (r *restorer) one(c candidate) (restoreItem, bool) {
	h := c.snap.Header
	it := restoreItem{SessionID: h.ID, Harness: h.Harness}
	if h.Harness == "" {
		it.Harness = "native"
	}
	if h.ParentSession != nil {
		it.Parent = *h.ParentSession
	}
	refuse := func(format string, args ...any) (restoreItem, bool) {
		it.Action, it.Reason = actionRefused, fmt.Sprintf(format, args...)
		return it, true
	}
	stored, err := r.store.Records(r.ctx, h.ID)
	if err != nil {
		return refuse("%v", err)
	}
	var data []byte
	if h.Harness == dshq.HarnessClaudeCode || h.Harness == dshq.HarnessCodex {
		data, err = sourceOf(h.ID, stored)
		if err != nil {
			if !c.named {
				return it, false
			}
			return refuse("%v", err)
		}
		r.sources[h.ID] = data
	} else {
		var b bytes.Buffer
		if err := writeLog(&b, stored, false); err != nil {
			return refuse("%v", err)
		}
		data = b.Bytes()
	}
	cwd, _ := h.CwdOrEmpty()
	newCwd := cwd
	if cwd != "" {
		newCwd, _ = r.m.Apply(cwd)
	} else if r.newCwd != "" {
		newCwd = r.newCwd
	}
	it.Cwd = newCwd
	facts := sourceFacts(data)
	switch h.Harness {
	case dshq.HarnessClaudeCode:
		if newCwd == "" || !filepath.IsAbs(newCwd) {
			return refuse("the session states no cwd Claude Code can key it by (%q): give --cwd DIR, the directory to continue it in", cwd)
		}
		sid := facts.sessionID
		if sid == "" {
			sid = strings.TrimPrefix(h.ID, "cc-")
		}
		if h.ParentSession != nil {
			agent := facts.agentID
			if agent == "" {
				_, agent, _ = strings.Cut(strings.TrimPrefix(h.ID, "cc-"), "-agent-")
			}
			version := facts.version
			if version == "" {
				version = sourceFacts(r.parentSource(*h.ParentSession)).version
			}
			it.File = restore.ClaudeSubagent(r.tgt.claudeProjects, newCwd, sid, agent, version)
		} else {
			it.File = restore.ClaudeTranscript(r.tgt.claudeProjects, newCwd, sid)
			it.Continue = restore.ClaudeContinue(newCwd, sid)
		}
	case dshq.HarnessCodex:
		tid := facts.threadID
		if tid == "" {
			tid = strings.TrimPrefix(h.ID, "codex-")
		}
		start := facts.start
		if start.IsZero() {
			start = time.UnixMilli(h.CreatedAt)
		}
		it.File = restore.CodexRollout(filepath.Join(r.tgt.codexHome, "sessions"), start.Local(), tid)
		if found := r.rollout(tid); found != "" {
			it.File = found
		}
		it.Continue = restore.CodexContinue(newCwd, tid)
	default:
		var cp *string
		if newCwd != "" {
			cp = &newCwd
		}
		if cwd != "" && newCwd != cwd {
			// A native log's header is its cwd: it is the session as stored
			// or not at all.
			return refuse("a native session's header holds its cwd (%s): it is restored as stored, without --cwd or --map", cwd)
		}
		it.File = filepath.Join(r.tgt.deepseek, projectDir(cp), encodeSegment(h.ID), sessionPlain)
	}
	if h.Harness == dshq.HarnessClaudeCode || h.Harness == dshq.HarnessCodex {
		data, it.Remapped = rewriteSource(capture.Format(h.Harness), data, r.m)
	}
	it.Bytes = int64(len(data))
	return r.place(it, data), true
}

// parentSource returns the source file of a parent session ("" when it
// has none).
func (r *restorer) parentSource(id string) []byte {
	if d, ok := r.sources[id]; ok {
		return d
	}
	stored, err := r.store.Records(r.ctx, id)
	if err != nil {
		return nil
	}
	d, _ := sourceOf(id, stored)
	r.sources[id] = d
	return d
}

// place writes data to it.File unless the file is there already: the same
// bytes are present, a prefix of them is completed, anything else refused.
func (r *restorer) place(it restoreItem, data []byte) restoreItem {
	it.DryRun = r.dry
	have, err := os.ReadFile(it.File)
	switch {
	case err == nil && bytes.Equal(have, data):
		it.Action = actionPresent
		if lease, err := r.store.Lease(r.ctx, it.SessionID); err == nil && lease != nil && lease.Holder != "" {
			it.Reason = "being written now" + lease.Describe() + ": resume it here once that writer is idle"
		}
		return it
	case err == nil && len(have) < len(data) && bytes.HasPrefix(data, have):
		it.Action = actionUpdated
	case err == nil && len(have) > len(data) && bytes.HasPrefix(have, data):
		// Continued here beyond what the corpus holds: dshq watch publishes
		// the rest.
		it.Action, it.Reason = actionPresent, fmt.Sprintf("the file holds %d bytes more than the corpus (continued here: dshq watch publishes them)", len(have)-len(data))
		return it
	case err == nil:
		it.Action, it.Reason = actionRefused, fmt.Sprintf("%s is already there and is not session %s (%d bytes, the session's file is %d): not overwritten; move it away, or restore elsewhere with --cwd", it.File, it.SessionID, len(have), len(data))
		return it
	case !errors.Is(err, os.ErrNotExist):
		it.Action, it.Reason = actionRefused, err.Error()
		return it
	default:
		it.Action = actionWritten
	}
	if lease, err := r.store.Lease(r.ctx, it.SessionID); err != nil {
		it.Action, it.Reason = actionRefused, err.Error()
		return it
	} else if lease != nil {
		who := lease.Describe()
		if who == "" {
			who = " (by a writer that does not name itself)"
		}
		it.Action, it.Reason = actionRefused, fmt.Sprintf("session %s is being written now%s: continuing it here at the same time would fork it; restore it once that writer is idle", it.SessionID, who)
		return it
	}
	if r.dry {
		return it
	}
	if err := os.MkdirAll(filepath.Dir(it.File), 0o700); err != nil {
		it.Action, it.Reason = actionRefused, err.Error()
		return it
	}
	if it.Action == actionUpdated {
		err = appendRest(it.File, have, data)
	} else {
		err = createExclusive(it.File, data)
	}
	if err != nil {
		it.Action, it.Reason = actionRefused, err.Error()
	}
	return it
}

// createExclusive writes path through a temporary file linked into place
// only if path still does not exist (a file that appeared meanwhile is
// never replaced).
func createExclusive(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s appeared while it was written: not overwritten", path)
	}
	return err
}

// appendRest appends what data has beyond have to path, if path still
// holds exactly have.
func appendRest(path string, have, data []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	now, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if !bytes.Equal(now, have) {
		return fmt.Errorf("%s changed while it was brought up to date: not written", path)
	}
	if _, err := f.Write(data[len(have):]); err != nil {
		return err
	}
	return f.Sync()
}

// rollout returns a rollout of thread id already under Codex's home
// (sessions/ or archived_sessions/, any date, any time in its name), ""
// when there is none. The homes are walked once.
func (r *restorer) rollout(id string) string {
	if r.rollouts == nil {
		r.rollouts = map[string]string{}
		for _, dir := range []string{"archived_sessions", "sessions"} {
			_ = filepath.WalkDir(filepath.Join(r.tgt.codexHome, dir), func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return nil // a home without this directory, or unreadable
				}
				n := d.Name()
				if !strings.HasPrefix(n, "rollout-") || !strings.HasSuffix(n, ".jsonl") {
					return nil
				}
				// rollout-<YYYY-MM-DDThh-mm-ss>-<id>.jsonl, or rollout-<id>.jsonl
				rest := strings.TrimSuffix(strings.TrimPrefix(n, "rollout-"), ".jsonl")
				r.rollouts[rest] = p
				if len(rest) > 20 && rest[10] == 'T' && rest[19] == '-' {
					r.rollouts[rest[20:]] = p
				}
				return nil
			})
		}
	}
	return r.rollouts[id]
}

// rewriteSource maps the working directories of every line of a source
// file; remapped lists what changed.
func rewriteSource(f capture.Format, data []byte, m restore.Map) ([]byte, map[string]string) {
	if len(m) == 0 {
		return data, nil
	}
	var out bytes.Buffer
	var lines capture.Lines
	all := lines.Write(data)
	if l, ok := lines.Finish(); ok {
		all = append(all, l)
	}
	var remapped map[string]string
	for _, l := range all {
		text, changed := restore.Rewrite(f, l.Text, m)
		if changed {
			_, m2 := restore.Equivalent(f, l.Text, text, remapped)
			remapped = m2
		}
		out.Write(text)
		out.WriteString(l.EOL)
	}
	return out.Bytes(), remapped
}

func printRestore(w io.Writer, sum restoreSummary, dry bool) {
	verb := map[restoreAction]string{actionWritten: "wrote", actionUpdated: "updated", actionPresent: "present", actionRefused: "refused"}
	if dry {
		verb[actionWritten], verb[actionUpdated] = "would write", "would update"
	}
	for _, it := range sum.Sessions {
		switch it.Action {
		case actionRefused:
			fmt.Fprintf(w, "%-12s %s: %s\n", verb[it.Action], it.SessionID, it.Reason)
			continue
		default:
			fmt.Fprintf(w, "%-12s %s → %s (%d bytes)\n", verb[it.Action], it.SessionID, it.File, it.Bytes)
		}
		for _, old := range sortedKeys(it.Remapped) {
			fmt.Fprintf(w, "%-12s   cwd %s → %s\n", "", old, it.Remapped[old])
		}
		if it.Reason != "" {
			fmt.Fprintf(w, "%-12s   %s\n", "", it.Reason)
		}
		if it.Continue != "" {
			fmt.Fprintf(w, "%-12s   continue: %s\n", "", it.Continue)
		}
	}
	what := "restored"
	if dry {
		what = "would restore (dry run)"
	}
	fmt.Fprintf(w, "%s: %d written, %d updated, %d present, %d refused\n", what, sum.Written, sum.Updated, sum.Present, sum.Refused)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
