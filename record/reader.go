package record

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/dshq/dshq"
	"github.com/klauspost/compress/zstd"
)

// zstdMagic starts every standard zstd frame.
var zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

// MaxZstdWindow is the largest zstd window a Reader accepts, which bounds the
// decoder's memory whatever the input claims.
const MaxZstdWindow = 128 << 20

// Option configures a Reader.
type Option func(*Reader)

// WithName names the input in errors (usually its path).
func WithName(name string) Option { return func(r *Reader) { r.name = name } }

// WithMaxRecordBytes sets the longest record (one line) the Reader accepts;
// a longer one is refused with RuleTooLarge after reading at most n bytes of
// it. The default is DefaultMaxRecordBytes, which n <= 0 also selects.
func WithMaxRecordBytes(n int) Option {
	return func(r *Reader) {
		if n > 0 {
			r.max = n
		}
	}
}

// WithPlaceholders substitutes every "{{name}}" whose name is a key of vars
// in each line before it is parsed (see Substitute).
func WithPlaceholders(vars map[string]string) Option {
	return func(r *Reader) { r.vars = vars }
}

// WithFixturePlaceholders realizes an upstream test fixture the way the web
// seeder does (docs/file-format.md#test-fixtures-and-placeholders): {{cwd}}
// becomes cwd (an absolute path) and {{sessionId}} becomes sessionID in every
// line, and when the header's cwd is "{{cwd}}/workspace" every
// "{{cwd}}/workspace" becomes cwd itself. Other placeholders stay literal.
func WithFixturePlaceholders(cwd, sessionID string) Option {
	return func(r *Reader) { r.fixture = &fixture{cwd: cwd, sessionID: sessionID} }
}

// WithoutPlaceholders refuses a log whose header id, parentSession or cwd
// still holds a "{{name}}" template placeholder once any substitution is
// done (RulePlaceholder at line 1): an upstream test fixture is a template,
// not a session, and a session stored under an id like "{{sessionId}}"
// could never be taken back out of an append-only stream. An import wants
// it.
func WithoutPlaceholders() Option { return func(r *Reader) { r.noPlaceholders = true } }

// WithStandardZstd reads a zstd input the way the standard zstd tool does:
// one stream of concatenated frames (skippable frames skipped) whose
// plaintext is JSONL, with lines free to span frames and the header free to
// share its frame; each frame's checksum is verified and its window bounded
// by MaxZstdWindow. Without it the Reader holds a zstd input to the
// original harness's framing (the first frame holds the header line alone,
// each later frame whole lines), which upstream-tail reading relies on to
// recover a torn final frame. A stream that ends inside a frame is
// RuleTornTail; one that does not decompress, RuleZstd. An import wants it:
// in strict reading the framing changes nothing but what is refused.
func WithStandardZstd() Option { return func(r *Reader) { r.standardZstd = true } }

// WithUpstreamTail reads damage at the end of a log as the original does
// (docs/file-format.md#reading-and-torn-lines) instead of refusing it: final
// bytes without a newline (or a torn final zstd frame) are dropped, and the
// first unparsable line, malformed row or seq gap ends the log as a crash tail,
// unless a later parseable line (or the damaged row itself) is a turn/end, in
// which case it is returned as the error. Tail reports what was dropped.
// Without this option every such damage is an error, which is what an import
// wants.
func WithUpstreamTail() Option { return func(r *Reader) { r.upstreamTail = true } }

// Reader reads a session log file in the upstream JSONL layout
// (docs/file-format.md): a header line, then one record per line, packed chunk
// rows expanded into their assistant/chunk events, seqs checked contiguous from
// 0. It reads plain JSONL and .jsonl.zstd (concatenated zstd frames) alike,
// telling them apart by the zstd magic number.
//
// Every error is a *RecordError naming the file (WithName), the physical
// line (the header is line 1) and the rule. Errors are sticky.
type Reader struct {
	name         string
	max          int
	vars         map[string]string
	fixture      *fixture
	upstreamTail bool
	// standardZstd reads zstd as one stream (WithStandardZstd).
	standardZstd bool
	// noPlaceholders refuses a header holding a placeholder
	// (WithoutPlaceholders).
	noPlaceholders bool

	src     io.Reader
	in      *bufio.Reader
	dec     *zstd.Decoder // nil for plain JSONL
	frames  *frameReader  // nil for plain JSONL
	line    int
	buf     []byte
	header  *dshq.HeaderRecord
	pending []dshq.Event // expanded row members not yet returned
	next    int64        // the seq the next event must have
	err     error        // sticky
	tail    *RecordError // the damage WithUpstreamTail tolerated
	// zstdTorn is set when WithUpstreamTail met a torn final zstd frame.
	zstdTorn bool
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader, opts ...Option) *Reader {
	rd := &Reader{max: DefaultMaxRecordBytes, src: r}
	for _, o := range opts {
		o(rd)
	}
	return rd
}

// Close releases the zstd decoder, if any. It does not close the
// underlying reader.
func (r *Reader) Close() error {
	if r.dec != nil {
		r.dec.Close()
		r.dec = nil
	}
	return nil
}

// Tail returns the damage at the end of the log that WithUpstreamTail
// dropped, or nil. It is meaningful once Next has returned io.EOF.
func (r *Reader) Tail() *RecordError { return r.tail }

// Line returns the physical line of the last record read.
func (r *Reader) Line() int { return r.line }

// fail records err, stamped with the file and line, as the sticky error.
func (r *Reader) fail(err error) error {
	var re *RecordError
	if errors.As(err, &re) {
		c := *re
		if c.File == "" {
			c.File = r.name
		}
		if c.Line == 0 {
			c.Line = r.line
		}
		err = &c
	}
	r.err = err
	return err
}

func (r *Reader) open() error {
	br := bufio.NewReaderSize(r.src, 64<<10)
	magic, _ := br.Peek(len(zstdMagic))
	if !bytes.Equal(magic, zstdMagic) && !(r.standardZstd && isSkippableMagic(magic)) {
		r.in = br
		return nil
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(MaxZstdWindow), zstd.WithDecoderLowmem(true))
	if err != nil {
		return recErr(RuleZstd, "open zstd stream: %v", err)
	}
	r.dec = dec
	if r.standardZstd {
		if err := dec.Reset(br); err != nil {
			return recErr(RuleZstd, "zstd stream: %v", err)
		}
		r.in = bufio.NewReaderSize(zstdStream{dec}, 64<<10)
		return nil
	}
	r.frames = &frameReader{src: br, dec: dec, upstream: r.upstreamTail}
	r.in = bufio.NewReaderSize(r.frames, 64<<10)
	return nil
}

// isSkippableMagic reports the magic of a zstd skippable frame
// (0x184D2A50 to 0x184D2A5F, little-endian).
func isSkippableMagic(m []byte) bool {
	return len(m) == 4 && m[0]&0xF0 == 0x50 && m[1] == 0x2A && m[2] == 0x4D && m[3] == 0x18
}

// zstdStream is the plaintext of a standard zstd stream, its errors made
// *RecordError: RuleTornTail when the stream ends inside a frame, else
// RuleZstd.
type zstdStream struct{ dec *zstd.Decoder }

func (z zstdStream) Read(p []byte) (int, error) {
	n, err := z.dec.Read(p)
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, io.ErrUnexpectedEOF):
		return n, recErr(RuleTornTail, "the zstd stream ends inside a frame")
	default:
		return n, &RecordError{Rule: RuleZstd, Msg: fmt.Sprintf("the zstd stream does not decompress: %v", err), Err: err}
	}
}

// errTorn marks final bytes without a newline.
var errTorn = errors.New("torn")

// readLine returns the next line without its newline. It returns io.EOF at
// a clean end, errTorn for final bytes without a newline, and a
// RuleTooLarge error once a line passes the limit (without reading more of
// it). The line is valid until the next call.
func (r *Reader) readLine() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		chunk, err := r.in.ReadSlice('\n')
		if len(r.buf)+len(chunk) > r.max+1 || (len(r.buf)+len(chunk) > r.max && (err != nil || chunk[len(chunk)-1] != '\n')) {
			r.line++
			return nil, recErr(RuleTooLarge, "record is longer than the limit of %d bytes", r.max)
		}
		r.buf = r.grow(len(chunk))
		r.buf = append(r.buf, chunk...)
		if errors.Is(err, errTornFrame) {
			// A torn final zstd frame ends the input
			// (docs/file-format.md#zstandard-framing).
			r.zstdTorn = true
			err = io.EOF
		}
		switch {
		case err == nil:
			r.line++
			return r.buf[:len(r.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, errFrameEnd):
			if err := r.frameEnd(); err != nil {
				return nil, err
			}
		case errors.Is(err, io.EOF):
			if len(r.buf) == 0 {
				return nil, io.EOF
			}
			r.line++
			return r.buf, errTorn
		default:
			r.line++
			return nil, r.readErr(err)
		}
	}
}

// grow makes room for n more bytes in r.buf, doubling (never past the
// limit) so that a long line costs about twice its length in allocations.
func (r *Reader) grow(n int) []byte {
	need := len(r.buf) + n
	if need <= cap(r.buf) {
		return r.buf
	}
	c := max(2*cap(r.buf), need, 4<<10)
	c = min(c, max(r.max+1, need))
	b := make([]byte, len(r.buf), c)
	copy(b, r.buf)
	return b
}

// frameEnd checks a zstd frame boundary (docs/file-format.md#zstandard-framing):
// no line may span two frames, and the first frame holds the header line
// alone.
func (r *Reader) frameEnd() error {
	if r.header == nil {
		r.line++
		return recErr(RuleZstd, "first frame is not exactly one header line")
	}
	if len(r.buf) > 0 {
		r.line++
		return recErr(RuleZstd, "complete frame contains a torn JSONL record")
	}
	return nil
}

// readErr classifies an error of the underlying stream.
func (r *Reader) readErr(err error) error {
	var re *RecordError
	if errors.As(err, &re) {
		return re
	}
	return fmt.Errorf("read: %w", err)
}

// Header reads and returns the header record; Next calls it when needed.
func (r *Reader) Header() (dshq.HeaderRecord, error) {
	if r.header != nil {
		return *r.header, nil
	}
	if r.err != nil {
		return dshq.HeaderRecord{}, r.err
	}
	if err := r.open(); err != nil {
		return dshq.HeaderRecord{}, r.fail(err)
	}
	line, err := r.readLine()
	switch {
	case err == io.EOF:
		return dshq.HeaderRecord{}, r.fail(recErr(RuleMissingHeader, "empty or header-less session log"))
	case err == errTorn:
		return dshq.HeaderRecord{}, r.fail(recErr(RuleMissingHeader, "the header line has no newline"))
	case RuleOf(err) == RuleTornTail:
		return dshq.HeaderRecord{}, r.fail(recErr(RuleMissingHeader, "empty or header-less Zstandard session log (the first frame is torn)"))
	case err != nil:
		return dshq.HeaderRecord{}, r.fail(err)
	}
	if r.frames != nil {
		if rest, err := r.in.ReadSlice('\n'); len(rest) > 0 || !errors.Is(err, errFrameEnd) {
			return dshq.HeaderRecord{}, r.fail(recErr(RuleZstd, "first frame is not exactly one header line"))
		}
	}
	if r.fixture != nil {
		r.fixture.collapse = bytes.Contains(line, []byte(`"cwd":"{{cwd}}/workspace"`))
	}
	h, err := ParseHeader(r.substitute(line))
	if err == nil && r.noPlaceholders {
		err = headerPlaceholder(h.Header)
	}
	if err != nil {
		return dshq.HeaderRecord{}, r.fail(err)
	}
	r.header = &h
	return h, nil
}

func (r *Reader) substitute(line []byte) []byte {
	if r.fixture != nil {
		line = r.fixture.apply(line)
	}
	return Substitute(line, r.vars)
}

// Next returns the next event, or io.EOF after the last one.
func (r *Reader) Next() (dshq.Event, error) {
	if _, err := r.Header(); err != nil {
		return dshq.Event{}, err
	}
	for len(r.pending) == 0 {
		if r.err != nil {
			return dshq.Event{}, r.err
		}
		evs, err := r.readRecord()
		if err == io.EOF {
			if r.zstdTorn {
				r.tail = &RecordError{File: r.name, Line: r.line + 1, Rule: RuleTornTail, Msg: "the final zstd frame is torn"}
			}
			r.err = io.EOF
			return dshq.Event{}, io.EOF
		}
		if err != nil {
			return dshq.Event{}, r.damage(err, evs)
		}
		r.pending = evs
	}
	ev := r.pending[0]
	r.pending = r.pending[1:]
	return ev, nil
}

// readRecord reads one line and returns its events, seq-checked. On a seq
// gap it returns the line's events with the error.
func (r *Reader) readRecord() ([]dshq.Event, error) {
	line, err := r.readLine()
	if err == errTorn {
		return nil, recErr(RuleTornTail, "the final line has no newline (%d bytes)", len(line))
	}
	if err != nil {
		return nil, err
	}
	evs, err := decodeLine(r.substitute(line))
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		if ev.Seq != r.next {
			return evs, recErr(RuleSeqGap, "seq gap (expected %d, got %d)", r.next, ev.Seq)
		}
		r.next++
	}
	return evs, nil
}

// decodeLine decodes one storage record: an event, or a packed chunk row
// expanded into its events.
func decodeLine(line []byte) ([]dshq.Event, error) {
	out, top, err := compactObject(line)
	if err != nil {
		return nil, err
	}
	for _, m := range top {
		if m.key != "type" {
			continue
		}
		tag, ok := isRowType(out[m.start:m.end])
		if !ok {
			break
		}
		deltas, err := expandRow(tag, out, top)
		if err != nil {
			return nil, err
		}
		evs := make([]dshq.Event, len(deltas))
		for i := range deltas {
			if evs[i], err = deltas[i].event(); err != nil {
				return nil, rowErr(tag, "member %d: %v", i, err)
			}
		}
		return evs, nil
	}
	ev, err := eventFromMembers(out, top)
	if err != nil {
		return nil, err
	}
	return []dshq.Event{ev}, nil
}

// damage handles the first damaged record: an error, or with
// WithUpstreamTail a tolerated crash tail unless a turn/end follows.
func (r *Reader) damage(err error, evs []dshq.Event) error {
	var re *RecordError
	if !r.upstreamTail || !errors.As(err, &re) || re.Rule == RuleTooLarge || re.Rule == RuleZstd {
		return r.fail(err)
	}
	if r.frames != nil && !r.frames.torn {
		// Inside a complete zstd frame any damage is fatal.
		return r.fail(err)
	}
	issue := r.fail(err).(*RecordError)
	if hasTurnEnd(evs) {
		return issue
	}
	for {
		line, lerr := r.readLine()
		if lerr == io.EOF || lerr == errTorn {
			break
		}
		var lre *RecordError
		if errors.As(lerr, &lre) && lre.Rule == RuleTornTail {
			break
		}
		if lerr != nil {
			return r.fail(lerr)
		}
		if later, derr := decodeLine(r.substitute(line)); derr == nil && hasTurnEnd(later) {
			return issue
		}
	}
	r.tail = issue
	r.err = io.EOF
	return io.EOF
}

func hasTurnEnd(evs []dshq.Event) bool {
	for _, ev := range evs {
		if ev.Type == "turn/end" {
			return true
		}
	}
	return false
}

// ReadAll reads a whole log: its header and every event.
func ReadAll(r io.Reader, opts ...Option) (dshq.HeaderRecord, []dshq.Event, error) {
	rd := NewReader(r, opts...)
	defer rd.Close()
	h, err := rd.Header()
	if err != nil {
		return dshq.HeaderRecord{}, nil, err
	}
	var evs []dshq.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return h, evs, nil
		}
		if err != nil {
			return dshq.HeaderRecord{}, nil, err
		}
		evs = append(evs, ev)
	}
}
