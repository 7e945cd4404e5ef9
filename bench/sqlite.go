package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	_ "modernc.org/sqlite" // pure-Go SQLite with FTS5, the original design's backend

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/record"
)

// FTS is the original design's search backend (docs/search.md#ranking): an FTS5
// table with the unicode61 tokenizer, one literal phrase per query,
// match-count ranking (highlight regions), sessions grouped by their best
// document. It also holds the raw logs, so that event windows and lineage
// can be read from it. It omits the original's per-search reconciliation,
// which only makes it faster than the original.
type FTS struct {
	db *sql.DB
}

const ftsSchema = `
CREATE TABLE persisted_sessions(id TEXT PRIMARY KEY, version INTEGER, created_at INTEGER, cwd TEXT,
  parent_session TEXT, seed_length INTEGER, delegation_depth INTEGER, agent_preset TEXT, header TEXT) STRICT;
CREATE INDEX sessions_by_parent ON persisted_sessions(parent_session, created_at, id);
CREATE TABLE events(session_id TEXT, seq INTEGER, raw TEXT, PRIMARY KEY(session_id, seq)) WITHOUT ROWID;
CREATE VIRTUAL TABLE persisted_docs USING fts5(text, session_id UNINDEXED, seq UNINDEXED, type UNINDEXED,
  time UNINDEXED, surface UNINDEXED, codepoint_length UNINDEXED, tokenize = 'unicode61');
`

// OpenFTS creates the baseline database at path (a new file).
func OpenFTS(ctx context.Context, path string) (*FTS, error) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite: %w", err)
	}
	db.SetMaxOpenConns(1) // the original serialises every search through one gate
	for _, stmt := range []string{"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", ftsSchema} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			db.Close()
			return nil, fmt.Errorf("sqlite schema (is FTS5 compiled in?): %w", err)
		}
	}
	return &FTS{db: db}, nil
}

// Close closes the database.
func (f *FTS) Close() error { return f.db.Close() }

// FTSSession is one session as loaded into the baseline.
type FTSSession struct {
	Header    dshq.Header
	HeaderRaw []byte
	Inherited int64
	Events    [][]byte
	Docs      []dshq.SearchDocument
	// EventCount is len(Events), kept once they are released (see
	// measureQueries).
	EventCount int
}

// Load inserts sessions, their raw events and their documents in one
// transaction.
func (f *FTS) Load(ctx context.Context, sessions []FTSSession) (err error) {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite load: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	insS, err := tx.PrepareContext(ctx, `INSERT INTO persisted_sessions VALUES(?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("sqlite load: %w", err)
	}
	insE, err := tx.PrepareContext(ctx, `INSERT INTO events VALUES(?,?,?)`)
	if err != nil {
		return fmt.Errorf("sqlite load: %w", err)
	}
	insD, err := tx.PrepareContext(ctx, `INSERT INTO persisted_docs VALUES(?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("sqlite load: %w", err)
	}
	for _, s := range sessions {
		h := s.Header
		var seed any
		if h.IsSeeded {
			seed = s.Inherited
		}
		if _, err := insS.ExecContext(ctx, h.ID, h.Version, h.CreatedAt, h.Cwd, h.ParentSession, seed, h.DelegationDepth, h.AgentPreset, string(s.HeaderRaw)); err != nil {
			return fmt.Errorf("sqlite load session %s: %w", h.ID, err)
		}
		for seq, raw := range s.Events {
			if _, err := insE.ExecContext(ctx, h.ID, seq, string(raw)); err != nil {
				return fmt.Errorf("sqlite load event %s/%d: %w", h.ID, seq, err)
			}
		}
		for _, d := range s.Docs {
			t := sanitize(d.Text)
			if _, err := insD.ExecContext(ctx, t, d.SessionID, d.Seq, d.Type, d.Time, string(d.Surface), utf8.RuneCountInString(t)); err != nil {
				return fmt.Errorf("sqlite load doc %s/%d: %w", d.SessionID, d.Seq, err)
			}
		}
	}
	return tx.Commit()
}

var markerFix = strings.NewReplacer("\x00", "\uFFFD", "\uFDD0", "\uFFFD", "\uFDD1", "\uFFFD")

func sanitize(s string) string { return markerFix.Replace(s) }

// phrase makes a query one literal FTS5 phrase
// (docs/search.md#the-query-is-a-literal-phrase).
func phrase(q string) string {
	q = sanitize(strings.Join(strings.Fields(q), " "))
	return `"` + strings.ReplaceAll(q, `"`, `""`) + `"`
}

// FTSHit is one search result of the baseline.
type FTSHit struct {
	SessionID string
	Seq       int64
	Snippet   string
}

const matchCount = `(length(h) - length(replace(h, char(64976), '')))`

// FTSFilters are the metadata predicates the baseline supports, applied
// before ranking as the original does ("" = no predicate).
type FTSFilters struct {
	Cwd     string
	Surface dshq.Surface
}

// SearchSessions is the original searchSessions: each matching session's
// best document, sessions ordered by it, one page.
func (f *FTS) SearchSessions(ctx context.Context, query string, filters FTSFilters, limit, offset int) ([]FTSHit, error) {
	where, args := "persisted_docs MATCH ?", []any{phrase(query)}
	if filters.Surface != "" {
		where += " AND surface = ?"
		args = append(args, string(filters.Surface))
	}
	if filters.Cwd != "" {
		where += " AND session_id IN (SELECT id FROM persisted_sessions WHERE cwd = ?)"
		args = append(args, filters.Cwd)
	}
	q := `WITH m AS (
  SELECT session_id, seq, time, codepoint_length AS len, h, ` + matchCount + ` AS mc FROM (
    SELECT session_id, seq, time, codepoint_length,
      highlight(persisted_docs, 0, char(64976), char(64977)) AS h
    FROM persisted_docs WHERE ` + where + `)),
r AS (SELECT *, row_number() OVER (PARTITION BY session_id ORDER BY mc DESC, len ASC, time DESC, seq DESC) AS rn FROM m)
SELECT r.session_id, r.seq, r.h, s.header FROM r JOIN persisted_sessions s ON s.id = r.session_id
WHERE rn = 1 ORDER BY mc DESC, len ASC, time DESC, r.session_id ASC, seq DESC LIMIT ? OFFSET ?`
	return f.search(ctx, q, append(args, limit+1, offset)...)
}

// SearchEvents is the original searchEvents: one session's matching
// documents, ranked, one page, after resolving the target header.
func (f *FTS) SearchEvents(ctx context.Context, sessionID, query string, limit, offset int) ([]FTSHit, error) {
	var header string
	if err := f.db.QueryRowContext(ctx, `SELECT header FROM persisted_sessions WHERE id = ?`, sessionID).Scan(&header); err != nil {
		return nil, fmt.Errorf("sqlite search events: session %q: %w", sessionID, err)
	}
	q := `SELECT session_id, seq, h, '' FROM (
    SELECT session_id, seq, time, codepoint_length AS len,
      highlight(persisted_docs, 0, char(64976), char(64977)) AS h
    FROM persisted_docs WHERE persisted_docs MATCH ? AND session_id = ?)
ORDER BY ` + matchCount + ` DESC, len ASC, time DESC, seq DESC LIMIT ? OFFSET ?`
	return f.search(ctx, q, phrase(query), sessionID, limit+1, offset)
}

func (f *FTS) search(ctx context.Context, q string, args ...any) ([]FTSHit, error) {
	rows, err := f.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite search: %w", err)
	}
	defer rows.Close()
	var out []FTSHit
	for rows.Next() {
		var h FTSHit
		var hl, header string
		if err := rows.Scan(&h.SessionID, &h.Seq, &hl, &header); err != nil {
			return nil, fmt.Errorf("sqlite search: %w", err)
		}
		h.Snippet = snippet(hl, 240)
		out = append(out, h)
	}
	return out, rows.Err()
}

// snippet is the original's snippet rule (docs/search.md#snippets) on highlighted
// text.
func snippet(hl string, limit int) string {
	matchStart := -1
	var b []rune
	space := false
	for _, r := range hl {
		switch {
		case r == '\uFDD0':
			if matchStart < 0 {
				matchStart = len(b)
			}
		case r == '\uFDD1':
		case r == ' ' || r == '\n' || r == '\t' || r == '\r':
			space = len(b) > 0
		default:
			if space {
				b = append(b, ' ')
				space = false
			}
			b = append(b, r)
		}
	}
	if len(b) <= limit {
		return string(b)
	}
	if limit == 1 {
		return "…"
	}
	idx := min(max(matchStart, 0), len(b)-1)
	start := max(0, idx-limit/3)
	prefix, suffix := "", "…"
	if start > 0 {
		prefix = "…"
	}
	content := limit - utf8.RuneCountInString(prefix) - 1
	if idx >= start+content {
		start = idx - content + 1
	}
	end := min(len(b), start+content)
	if end == len(b) {
		suffix = ""
		content = limit - utf8.RuneCountInString(prefix)
		start = max(0, end-content)
	}
	return prefix + string(b[start:min(len(b), start+content)]) + suffix
}

// ReadWindow is the original's readEvent on the stored log: the header and
// the events seq-before..seq+after, clamped.
func (f *FTS) ReadWindow(ctx context.Context, sessionID string, seq, before, after int64) (int, error) {
	var header string
	if err := f.db.QueryRowContext(ctx, `SELECT header FROM persisted_sessions WHERE id = ?`, sessionID).Scan(&header); err != nil {
		return 0, fmt.Errorf("sqlite read: session %q: %w", sessionID, err)
	}
	rows, err := f.db.QueryContext(ctx, `SELECT seq, raw FROM events WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq`, sessionID, seq-before, seq+after)
	if err != nil {
		return 0, fmt.Errorf("sqlite read: %w", err)
	}
	defer rows.Close()
	n, found := 0, false
	for rows.Next() {
		var s int64
		var raw string
		if err := rows.Scan(&s, &raw); err != nil {
			return 0, fmt.Errorf("sqlite read: %w", err)
		}
		found = found || s == seq
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("sqlite read: %w", err)
	}
	if !found {
		return 0, fmt.Errorf("sqlite read: session %q has no event at seq %d", sessionID, seq)
	}
	return n, nil
}

// Trace is the original's traceSession (docs/lineage.md#tracing-a-lineage) over
// the sessions table: ancestors nearest first, then the descendant forest,
// iteratively. It returns the number of records in the trace.
func (f *FTS) Trace(ctx context.Context, sessionID string) (int, error) {
	parentOf := func(id string) (string, bool, error) {
		var p sql.NullString
		err := f.db.QueryRowContext(ctx, `SELECT parent_session FROM persisted_sessions WHERE id = ?`, id).Scan(&p)
		if errors.Is(err, sql.ErrNoRows) {
			return "", false, nil
		}
		return p.String, err == nil, err
	}
	p, ok, err := parentOf(sessionID)
	if err != nil || !ok {
		return 0, fmt.Errorf("sqlite trace: session %q not found (%v)", sessionID, err)
	}
	n, seen := 1, map[string]bool{sessionID: true}
	for p != "" {
		if seen[p] {
			return 0, fmt.Errorf("sqlite trace: session lineage contains a cycle at %q", p)
		}
		seen[p] = true
		next, ok, err := parentOf(p)
		if err != nil {
			return 0, fmt.Errorf("sqlite trace: %w", err)
		}
		if !ok {
			break
		}
		n++
		p = next
	}
	queue := []string{sessionID}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		kids, err := f.children(ctx, id)
		if err != nil {
			return 0, err
		}
		n += len(kids)
		queue = append(queue, kids...)
	}
	return n, nil
}

func (f *FTS) children(ctx context.Context, id string) ([]string, error) {
	rows, err := f.db.QueryContext(ctx, `SELECT id, header FROM persisted_sessions WHERE parent_session = ? ORDER BY created_at, id`, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite trace: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, h string
		if err := rows.Scan(&k, &h); err != nil {
			return nil, fmt.Errorf("sqlite trace: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// foldSession is the original's read path for surface-dependent reads
// (docs/events-and-surfaces.md#event-traces): load the session's whole log
// and fold it.
func (f *FTS) foldSession(ctx context.Context, sessionID string) (*fold.Result, error) {
	var header string
	if err := f.db.QueryRowContext(ctx, `SELECT header FROM persisted_sessions WHERE id = ?`, sessionID).Scan(&header); err != nil {
		return nil, fmt.Errorf("sqlite fold: session %q: %w", sessionID, err)
	}
	h, err := record.ParseHeader([]byte(header))
	if err != nil {
		return nil, fmt.Errorf("sqlite fold: %w", err)
	}
	rows, err := f.db.QueryContext(ctx, `SELECT raw FROM events WHERE session_id = ? ORDER BY seq`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite fold: %w", err)
	}
	defer rows.Close()
	var events []dshq.Event
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("sqlite fold: %w", err)
		}
		e, err := record.ParseEvent(raw)
		if err != nil {
			return nil, fmt.Errorf("sqlite fold: %w", err)
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite fold: %w", err)
	}
	res, err := fold.Fold(h, events, fold.Strict)
	if err != nil {
		return nil, fmt.Errorf("sqlite fold: invalid session surface: %w", err)
	}
	return res, nil
}

// TraceEvent is the original's traceEvent: fold the whole log, then the
// target's replacement chain, removals, sources and derived events. It
// returns the number of seqs in the trace.
func (f *FTS) TraceEvent(ctx context.Context, sessionID string, seq int64) (int, error) {
	res, err := f.foldSession(ctx, sessionID)
	if err != nil {
		return 0, err
	}
	if seq < 0 || seq >= int64(len(res.Records)) {
		return 0, fmt.Errorf("sqlite trace event: session %q has no event at seq %d", sessionID, seq)
	}
	n := 1 + len(res.ReplacedEventSeqs[seq]) + len(res.Sources[seq]) + len(res.Derived[seq])
	for at, ok := res.ReplacedBy[seq]; ok; at, ok = res.ReplacedBy[at] {
		n++
	}
	return n, nil
}

// Surface is the original's surface read: fold the whole log and return
// the current surface's length.
func (f *FTS) Surface(ctx context.Context, sessionID string) (int, error) {
	res, err := f.foldSession(ctx, sessionID)
	if err != nil {
		return 0, err
	}
	return len(res.Surface), nil
}
