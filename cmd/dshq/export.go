package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/record"
)

// exportReport is what export says it wrote (--json).
type exportReport struct {
	SessionID string `json:"sessionId"`
	Events    int    `json:"events"`
	File      string `json:"file"`
	Bytes     int64  `json:"bytes"`
	Zstd      bool   `json:"zstd"`
	// Source is true when the original harness file was written (--source).
	Source bool `json:"source,omitempty"`
}

func newExportCmd(g *globals) *cobra.Command {
	var (
		out    string
		zstd   bool
		stream string
		source bool
	)
	cmd := &cobra.Command{
		Use:   "export ID",
		Short: "Write a session's log back as upstream JSONL",
		Long: `export reads a session's records from the session stream (the source of
truth) and writes them in the original harness's JSONL format: the header record
as it was written, then one record per line, every JSON value byte for byte as
stored. A version 0 log packs its assistant/chunk runs into chunk rows as the
original writer does, so an imported upstream file exports identical.

A session of a tenant is found through the query API (its tenant is
recorded by the projection), or directly with --tenant.

It writes to stdout, or to -o FILE (atomically: a temporary file renamed into
place). --zstd (implied by a .zstd file name) writes the Zstandard framing:
one frame for the header line, one for the events.

--source writes instead the original file a Claude Code or Codex session was
converted from (dshq import or dshq watch), byte for byte: every source line
is kept in the session's events (docs/harnesses.md#source-lines), so the file
can be had back after the harness deleted it (Claude Code removes transcripts
older than 30 days by default). Give the id of the file's own session: an
inline subagent's lines are held by its parent, which the error names.`,
		Example: `  dshq export 3f2a0c1e-… > session.jsonl
  dshq export 3f2a0c1e-… -o session.jsonl.zstd
  dshq export 3f2a0c1e-… -o s.jsonl --json
  dshq export cc-258c7280-ae70-4798-800f-63464d01a85d --source -o transcript.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := checkSessionID("session", id); err != nil {
				return err
			}
			if source && zstd {
				return usageErrorf("--source writes the original file as it was; it does not go with --zstd")
			}
			zstd = !source && (zstd || strings.HasSuffix(out, ".zstd") || strings.HasSuffix(out, ".zst"))
			if zstd && out == "" && isTerminal(g.stdout) {
				return usageErrorf("refusing to write Zstandard data to a terminal: give -o FILE or redirect stdout")
			}
			nc, err := g.dial()
			if err != nil {
				return err
			}
			defer nc.Close()
			store, err := openStore(cmd.Context(), nc, stream, g.tenant)
			if err != nil {
				return err
			}
			stored, err := store.Records(cmd.Context(), id)
			if errors.Is(err, bus.ErrNotFound) && g.tenant == "" {
				// A tenant's session: the projection knows whose.
				stored, err = tenantRecords(cmd.Context(), nc, store, id, err)
			}
			if errors.Is(err, bus.ErrNotFound) {
				return dshq.Errorf(dshq.CodeSessionNotFound, "session %s was not found", dshq.Quote(id)) // the query service's words
			}
			if err != nil {
				return err
			}
			rep := exportReport{SessionID: id, Events: len(stored) - 1, File: out, Zstd: zstd, Source: source}
			write := func(w io.Writer) error { return writeLog(w, stored, zstd) }
			if source {
				data, err := sourceOf(id, stored)
				if err != nil {
					return err
				}
				write = func(w io.Writer) error { _, err := w.Write(data); return err }
			}
			if out == "" {
				rep.File = "-"
				cw := &countingWriter{w: g.stdout}
				if err := write(cw); err != nil {
					return err
				}
				rep.Bytes = cw.n
				if g.json {
					return writeJSON(g.stderr, rep)
				}
				return nil
			}
			if rep.Bytes, err = writeFileAtomic(out, write); err != nil {
				return err
			}
			if g.json {
				return writeJSON(g.stdout, rep)
			}
			fmt.Fprintf(g.stdout, "exported %s: %d events, %d bytes to %s\n", id, rep.Events, rep.Bytes, out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "write to FILE instead of stdout")
	f.BoolVar(&zstd, "zstd", false, "write the Zstandard framing (.jsonl.zstd)")
	f.StringVar(&stream, "stream", dshq.SessionStream, "session log stream")
	f.BoolVar(&source, "source", false, "write the Claude Code or Codex file the session was converted from, byte for byte")
	return cmd
}

// sourceOf returns the original file a converted session's records hold.
func sourceOf(id string, stored []bus.Record) ([]byte, error) {
	events := make([]dshq.Event, 0, len(stored)-1)
	for i, s := range stored[1:] {
		ev, err := record.ParseEvent(s.Data)
		if err != nil {
			return nil, fmt.Errorf("stored event %d (stream sequence %d): %w", i, s.Seq, err)
		}
		events = append(events, ev)
	}
	data, err := capture.Source(events)
	if err == nil {
		return data, nil
	}
	var se *capture.SourceError
	if errors.As(err, &se) && len(events) > 0 && se.Seq == 0 && strings.Contains(se.Msg, "no capture member") {
		return nil, dshq.Errorf(CodeNoSource, "session %q was not converted from a Claude Code or Codex file: it has no source file (export it without --source)", id)
	}
	return nil, dshq.Errorf(CodeNoSource, "session %q: --source: %v", id, err)
}

// writeLog writes stored records as an upstream JSONL log.
func writeLog(w io.Writer, stored []bus.Record, zstd bool) error {
	hdr, err := record.ParseHeader(stored[0].Data)
	if err != nil {
		return fmt.Errorf("stored header record: %w", err)
	}
	opts := []record.WriterOption{record.WithPacking(hdr.FormatVersion == dshq.FormatVersion0)}
	if zstd {
		opts = append(opts, record.WithZstd())
	}
	bw := bufio.NewWriter(w)
	rw := record.NewWriter(bw, opts...)
	if err := rw.WriteHeader(hdr); err != nil {
		return err
	}
	for i, s := range stored[1:] {
		ev, err := record.ParseEvent(s.Data)
		if err != nil {
			return fmt.Errorf("stored event %d (stream sequence %d): %w", i, s.Seq, err)
		}
		if err := rw.WriteEvent(ev); err != nil {
			return err
		}
	}
	if err := rw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// writeFileAtomic writes path through a temporary file in its directory,
// synced and renamed into place; it returns the bytes written.
func writeFileAtomic(path string, fn func(io.Writer) error) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", path, unwrapPathError(err))
	}
	defer os.Remove(tmp.Name())
	cw := &countingWriter{w: tmp}
	err = fn(cw)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return cw.n, nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminalFd(f.Fd())
}
