package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/claudecode"
	"github.com/dshq/dshq/capture/codex"
	"github.com/dshq/dshq/record"
)

// Harness reports whether f is a format this package converts (Claude Code
// or Codex; deepseek-harness files are session logs already).
func Harness(f capture.Format) bool {
	return f == capture.FormatClaudeCode || f == capture.FormatCodex
}

// NewConverter returns the converter of format f for the file at path,
// resumed under own when it is set (capture.Config.Own). It panics on a
// format Harness does not accept: the callers detect first.
func NewConverter(f capture.Format, path string, own *dshq.HeaderRecord) capture.Converter {
	cfg := capture.Config{Path: path, Own: own}
	switch f {
	case capture.FormatClaudeCode:
		return claudecode.New(cfg)
	case capture.FormatCodex:
		return codex.New(cfg)
	}
	panic(fmt.Sprintf("follow: no converter for format %q", f))
}

// Records reads a session's stored records, header record first
// (bus.Store.Records); a session that is not stored is bus.ErrNotFound.
type Records interface {
	Records(ctx context.Context, id string) ([]bus.Record, error)
}

// ChangedError is the refusal of a file whose stored session does not
// match it: the file does not begin with the bytes its session holds
// (another file claims the session, or this one was rewritten or
// truncated), or the lines it holds convert to other events than the
// stored ones. Nothing is published for such a file. Its message does not
// name the file (Path): the callers' reports do.
type ChangedError struct {
	Path      string
	SessionID string
	Why       string
	// OtherFile is set when the file and the stored session part ways
	// within the stored lines (not merely a shorter file): two files claim
	// one session — a copy, a resumed or forked transcript stating the id of
	// one already stored — or one file was rewritten.
	OtherFile bool
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("session %s: %s", e.SessionID, e.Why)
}

// Resumed is a file's conversion continued from what the stream holds: the
// converter has been fed the lines the file's stored session holds, and
// Lines continues after them.
type Resumed struct {
	// Format is the file's format.
	Format capture.Format
	// OwnID is the id of the file's own session (the one that holds its
	// lines), "" while the lines have not decided it.
	OwnID string
	// Conv is the converter, fed the stored lines.
	Conv capture.Converter
	// Lines cuts the file's bytes after the stored ones (Offset is where
	// the next read starts).
	Lines *capture.Lines
	// Headers are the stored header records of the sessions the stored
	// lines give (the file's own and its inline children).
	Headers map[string]dshq.HeaderRecord
	// Stored is the number of events stored per session (its next seq).
	Stored map[string]int64
	// Prefix is everything the stored lines convert to, the file's own
	// header first: the log a one-shot import of them gives.
	Prefix []capture.Update
	// Replay is what re-converting the stored lines gave that is not
	// stored yet: the updates a crash between two sessions' appends left
	// unpublished, to publish first.
	Replay []capture.Update
	// Remapped is set for a file restored elsewhere (dshq restore --cwd):
	// each stored working directory and the one the file has instead.
	Remapped map[string]string
}

// Resume prepares the conversion of the file at path whose current content
// is data: it
// finds the file's own session by the id its first lines give (or its
// name), reads what the stream holds of it, checks that the file still
// begins with the stored bytes, and re-derives the stored lines, checking
// that every session they give holds exactly the re-derived prefix. A file
// whose session is not stored resumes from its first line.
//
// Errors: *ChangedError, or the store's.
func Resume(ctx context.Context, st Records, f capture.Format, path string, data []byte) (*Resumed, error) {
	return ResumeOn(ctx, st, f, path, data, "")
}

// ResumeOn is Resume for a file captured on machine: the headers of the
// sessions it creates name it ("" names none; machine.go).
func ResumeOn(ctx context.Context, st Records, f capture.Format, path string, data []byte, machine string) (*Resumed, error) {
	return ResumeFrom(ctx, st, f, path, bytes.NewReader(data), int64(len(data)), machine)
}

// ResumeFrom is ResumeOn reading the file's first size bytes from src as it
// goes, a line at a time: what it holds of the file at once is bounded by
// the file's longest line, never the whole file (dshq watch resumes a large
// transcript this way). The stored session's records are held as the
// stream gives them. Lines.Offset of the result is where the caller reads
// on.
func ResumeFrom(ctx context.Context, st Records, f capture.Format, path string, src io.ReaderAt, size int64, machine string) (*Resumed, error) {
	if machine != "" && !record.ValidMachine(machine) {
		return nil, fmt.Errorf("machine %q is not a machine name (1 to %d bytes of UTF-8 without control characters)", machine, record.MaxMachineBytes)
	}
	id, err := probeID(f, path, src, size)
	if err != nil {
		return nil, err
	}
	r := &Resumed{Format: f, Headers: map[string]dshq.HeaderRecord{}, Stored: map[string]int64{}}
	if id == "" {
		r.Conv, r.Lines = withMachine(NewConverter(f, path, nil), machine), &capture.Lines{}
		return r, nil
	}
	stored, err := st.Records(ctx, id)
	if errors.Is(err, bus.ErrNotFound) {
		r.Conv, r.Lines = withMachine(NewConverter(f, path, nil), machine), &capture.Lines{}
		return r, nil
	}
	if err != nil {
		return nil, err
	}
	changed := func(format string, args ...any) error {
		return &ChangedError{Path: path, SessionID: id, Why: fmt.Sprintf(format, args...)}
	}
	hdr, events, err := parseStored(stored)
	if err != nil {
		return nil, changed("%v", err)
	}
	if hdr.Header.Harness != string(f) {
		return nil, changed("the stored session is not a %s session (harness %q)", f, hdr.Header.Harness)
	}
	// A session stored with no event yet (an import stopped right after
	// its header record) holds no line: the file continues from its first.
	var lines []capture.Line
	if len(events) > 0 {
		if lines, err = capture.SourceLines(events); err != nil {
			return nil, changed("%v", err)
		}
	}
	n, remapped, ok, err := storedPrefix(f, lines, &lineReader{src: src, size: size})
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, departs(path, id, lines, src, size)
	}
	r.Remapped = remapped
	r.OwnID = id
	r.Headers[id] = hdr
	r.Stored[id] = int64(len(events))
	// The file's sessions keep the machine that first captured it: a
	// file continued elsewhere (restored on another machine) is the same file.
	r.Conv = withMachine(NewConverter(f, path, &hdr), hdr.Header.Machine)
	ups := []capture.Update{{SessionID: id, Header: &hdr}}
	for _, l := range lines {
		u, err := r.Conv.Feed(l)
		if err != nil {
			return nil, err
		}
		ups = append(ups, u...)
	}
	r.Lines = capture.NewLines(int64(len(lines))+1, n)
	r.Prefix = ups
	// Every session the stored lines give must hold exactly what they give,
	// or a prefix of it (the rest is replayed).
	logs := map[string][]bus.Record{id: stored}
	for _, u := range ups[1:] {
		recs, ok := logs[u.SessionID]
		if !ok {
			recs, err = st.Records(ctx, u.SessionID)
			switch {
			case errors.Is(err, bus.ErrNotFound):
				recs = nil
			case err != nil:
				return nil, err
			}
			logs[u.SessionID] = recs
			if len(recs) > 0 {
				h, _, err := parseStored(recs[:1])
				if err != nil {
					return nil, changed("session %s: %v", u.SessionID, err)
				}
				r.Headers[u.SessionID] = h
				r.Stored[u.SessionID] = int64(len(recs) - 1)
			}
		}
		if u.Header != nil && len(recs) > 0 && !bytes.Equal(u.Header.Raw, recs[0].Data) {
			return nil, changed("session %s is stored with another header", u.SessionID)
		}
		next := r.Stored[u.SessionID]
		var rest []dshq.Event
		for _, e := range u.Events {
			if e.Seq < next {
				if !bytes.Equal(e.Raw, recs[e.Seq+1].Data) {
					return nil, changed("session %s: event %d converts differently from the stored one", u.SessionID, e.Seq)
				}
				continue
			}
			rest = append(rest, e)
		}
		if u.Header != nil && len(recs) > 0 {
			u.Header = nil
		}
		if u.Header != nil || len(rest) > 0 {
			u.Events = rest
			r.Replay = append(r.Replay, u)
		}
	}
	return r, nil
}

// departs is the refusal of a file that does not begin with the stored
// lines: a truncated file when it is shorter than them and their start,
// else a second file claiming the session (or this one rewritten), named
// by the first stored line it departs from.
// The file (size bytes of src) is read a stored line at a time.
func departs(path, id string, lines []capture.Line, src io.ReaderAt, size int64) error {
	var n int64    // where the stored line starts
	differs := 0   // the first stored line the file does not hold (1-based)
	prefix := true // the file so far is a prefix of the stored bytes
	for i, l := range lines {
		want := append(append(make([]byte, 0, l.Len()), l.Text...), l.EOL...)
		got := make([]byte, max(0, min(l.Len(), size-n)))
		if _, err := src.ReadAt(got, n); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if differs == 0 && !bytes.Equal(got, want) {
			differs = i + 1
		}
		prefix = prefix && bytes.HasPrefix(want, got)
		n += l.Len()
	}
	if prefix && size <= n {
		return &ChangedError{Path: path, SessionID: id, Why: fmt.Sprintf(
			"the file holds %d bytes, fewer than the %d (%d lines) its session holds: it was truncated", size, n, len(lines))}
	}
	return &ChangedError{Path: path, SessionID: id, OtherFile: true, Why: fmt.Sprintf(
		"two files claim this session: it is stored from a file of %d lines that this one departs from at line %d (another file states the same session id, or this one was rewritten); this file is not stored over it", len(lines), max(differs, 1))}
}

// probeID returns the id of the file's own session (the first size bytes
// of src, read a piece at a time) as its lines (then its name) decide it,
// "" when the file gives none yet (no line at all).
func probeID(f capture.Format, path string, src io.ReaderAt, size int64) (string, error) {
	c := NewConverter(f, path, nil)
	var s capture.Lines
	chunk := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size; {
		n, err := src.ReadAt(chunk[:min(int64(len(chunk)), size-off)], off)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		if n == 0 {
			break
		}
		off += int64(n)
		for _, l := range s.Write(chunk[:n]) {
			ups, err := c.Feed(l)
			if err != nil {
				return "", nil
			}
			if id := firstHeader(ups); id != "" {
				return id, nil
			}
		}
	}
	if l, ok := s.Finish(); ok {
		if ups, err := c.Feed(l); err == nil {
			if id := firstHeader(ups); id != "" {
				return id, nil
			}
		}
	}
	return firstHeader(c.Finish()), nil
}

func firstHeader(ups []capture.Update) string {
	for _, u := range ups {
		if u.Header != nil {
			return u.SessionID
		}
	}
	return ""
}

// parseStored decodes stored records: the header record (Raw kept) and the
// events.
func parseStored(recs []bus.Record) (dshq.HeaderRecord, []dshq.Event, error) {
	if len(recs) == 0 {
		return dshq.HeaderRecord{}, nil, errors.New("no header record stored")
	}
	hdr, err := record.ParseHeader(recs[0].Data)
	if err != nil {
		return dshq.HeaderRecord{}, nil, fmt.Errorf("stored header: %w", err)
	}
	hdr.Raw = recs[0].Data
	events := make([]dshq.Event, 0, len(recs)-1)
	for i, rec := range recs[1:] {
		e, err := record.ParseEvent(rec.Data)
		if err != nil {
			return hdr, nil, fmt.Errorf("stored event %d: %w", i, err)
		}
		events = append(events, e)
	}
	return hdr, events, nil
}
