package record

import (
	"bytes"
	"io"

	"github.com/dshq/dshq"
	"github.com/klauspost/compress/zstd"
)

// WriterOption configures a Writer.
type WriterOption func(*Writer)

// WithPacking turns packing of assistant/chunk delta runs into rows
// (docs/file-format.md#when-the-writer-packs) on or off. It is on by default,
// as upstream.
func WithPacking(on bool) WriterOption { return func(w *Writer) { w.pack = on } }

// WithZstd writes .jsonl.zstd (docs/file-format.md#zstandard-framing): the
// header line in a frame of its own, then one frame per Flush, each a standard
// frame with the content checksum on.
func WithZstd() WriterOption { return func(w *Writer) { w.zstd = true } }

// Writer writes a session log in the upstream JSONL layout: the header
// line, then one compact record per line, each event's Raw written as is
// (so every JSON value is kept byte for byte). With packing on, runs of at
// least MinRun packable assistant/chunk deltas are written as packed rows;
// a run ends at any other event, at a change of kind or block, and at
// Flush, so the batches a Writer is flushed in play the role of upstream's
// append batches. Writing the events of a file read by Reader in one batch
// reproduces an upstream file whose runs are maximal byte for byte.
//
// A Writer is not safe for concurrent use. Errors are sticky.
type Writer struct {
	w    io.Writer
	pack bool
	zstd bool
	enc  *zstd.Encoder

	wroteHeader bool
	buf         bytes.Buffer // the current batch's lines
	run         []delta      // the packable run being collected
	err         error
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer, opts ...WriterOption) *Writer {
	wr := &Writer{w: w, pack: true}
	for _, o := range opts {
		o(wr)
	}
	return wr
}

// WriteHeader writes the header line: rec.Raw when it is set (so a version
// 0 header is exported exactly as received; it must pass ParseHeader), else
// EncodeHeader(rec). It must be called once, first.
func (w *Writer) WriteHeader(rec dshq.HeaderRecord) error {
	if w.err != nil {
		return w.err
	}
	if w.wroteHeader {
		return w.fail(recErr(RuleHeader, "header already written"))
	}
	line := rec.Raw
	if len(line) == 0 {
		var err error
		if line, err = EncodeHeader(rec); err != nil {
			return w.fail(err)
		}
	} else if _, err := ParseHeader(line); err != nil {
		return w.fail(err)
	} else if bytes.IndexByte(line, '\n') >= 0 {
		return w.fail(recErr(RuleHeader, "header Raw spans more than one line"))
	}
	w.wroteHeader = true
	w.buf.Write(line)
	w.buf.WriteByte('\n')
	// The header is a batch (and a zstd frame) of its own.
	return w.emit()
}

// WriteEvent adds one event to the current batch. Its Raw must be a record
// as ParseEvent returns it (compact JSON); only its being one line is
// checked here.
func (w *Writer) WriteEvent(ev dshq.Event) error {
	if w.err != nil {
		return w.err
	}
	if !w.wroteHeader {
		return w.fail(recErr(RuleInvalidEvent, "event %d written before the header", ev.Seq))
	}
	if len(ev.Raw) == 0 || bytes.IndexByte(ev.Raw, '\n') >= 0 {
		return w.fail(recErr(RuleInvalidEvent, "event %d has no single-line Raw record", ev.Seq))
	}
	if w.pack {
		if d, ok := packable(ev); ok {
			if n := len(w.run); n > 0 && !d.continues(&w.run[n-1]) {
				w.endRun()
			}
			w.run = append(w.run, d)
			return nil
		}
		w.endRun()
	}
	w.buf.Write(ev.Raw)
	w.buf.WriteByte('\n')
	return nil
}

// endRun writes the collected run: one row when it has at least MinRun
// members, else its events verbatim.
func (w *Writer) endRun() {
	if len(w.run) >= MinRun {
		packRow(&w.buf, w.run)
		w.buf.WriteByte('\n')
	} else {
		for i := range w.run {
			w.buf.Write(w.run[i].raw())
			w.buf.WriteByte('\n')
		}
	}
	w.run = w.run[:0]
}

// Flush ends the current batch: it ends any run and writes the batch (one
// zstd frame with WithZstd).
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.endRun()
	return w.emit()
}

// Close flushes. It does not close the underlying writer.
func (w *Writer) Close() error {
	err := w.Flush()
	if w.enc != nil {
		w.enc.Close()
		w.enc = nil
	}
	return err
}

func (w *Writer) emit() error {
	if w.buf.Len() == 0 {
		return nil
	}
	out := w.buf.Bytes()
	if w.zstd {
		if w.enc == nil {
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(true), zstd.WithLowerEncoderMem(true))
			if err != nil {
				return w.fail(err)
			}
			w.enc = enc
		}
		out = w.enc.EncodeAll(out, nil)
	}
	if _, err := w.w.Write(out); err != nil {
		return w.fail(err)
	}
	w.buf.Reset()
	return nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}
