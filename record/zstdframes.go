package record

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// MaxZstdFrameBytes is the largest compressed zstd frame a Reader holds in
// memory; a larger one is refused (RuleZstd).
const MaxZstdFrameBytes = 256 << 20

// errFrameEnd is returned by frameReader at the end of each complete frame,
// so that the line reader sees frame boundaries.
var errFrameEnd = errors.New("end of zstd frame")

// errTornFrame is returned by frameReader (upstream mode only) after the
// bytes recovered from a torn final frame.
var errTornFrame = errors.New("torn zstd frame")

// frameReader yields the plaintext of a .jsonl.zstd stream frame by frame
// (docs/file-format.md#zstandard-framing): each frame is first scanned
// structurally (magic, reserved bits, block headers), then decompressed with
// its checksum verified. A stream that ends inside a frame is torn: an error,
// or with upstream set, whatever the decoder recovers from the available bytes,
// followed by errTornFrame.
type frameReader struct {
	src      *bufio.Reader
	dec      *zstd.Decoder
	upstream bool

	offset int64     // bytes of src consumed
	frame  []byte    // the current frame's compressed bytes
	out    io.Reader // the current frame's plaintext; nil between frames
	frames int       // complete frames read
	torn   bool      // the current frame is the torn final one
	done   bool
}

func (f *frameReader) Read(p []byte) (int, error) {
	if f.out == nil {
		if f.done {
			return 0, io.EOF
		}
		if err := f.next(); err != nil {
			f.done = true
			return 0, err
		}
	}
	n, err := f.out.Read(p)
	switch {
	case err == nil:
		return n, nil
	case f.torn:
		// Recovery of a torn frame ignores the decoder's failure.
		f.out, f.done = nil, true
		return n, errTornFrame
	case err == io.EOF:
		f.out = nil
		f.frames++
		return n, errFrameEnd
	default:
		f.out, f.done = nil, true
		return n, &RecordError{Rule: RuleZstd, Msg: fmt.Sprintf("zstd frame %d does not decompress: %v", f.frames+1, err), Err: err}
	}
}

// next scans the next frame and starts decompressing it. It returns io.EOF
// at a clean end of the stream.
func (f *frameReader) next() error {
	start := f.offset
	f.frame = f.frame[:0]
	complete, err := f.scan()
	if err != nil {
		return err
	}
	if !complete {
		if len(f.frame) == 0 {
			return io.EOF
		}
		if !f.upstream {
			return &RecordError{Rule: RuleTornTail, Msg: fmt.Sprintf("the final zstd frame (at byte %d) is torn", start)}
		}
		f.torn = true
	}
	if err := f.dec.Reset(bytes.NewReader(f.frame)); err != nil {
		if f.torn {
			return errTornFrame
		}
		return &RecordError{Rule: RuleZstd, Msg: fmt.Sprintf("zstd frame at byte %d: %v", start, err), Err: err}
	}
	f.out = f.dec
	return nil
}

// take appends the next n bytes of src to the frame; it reports false when
// the stream ends first.
func (f *frameReader) take(n int) (bool, error) {
	if len(f.frame)+n > MaxZstdFrameBytes {
		return false, recErr(RuleZstd, "zstd frame at byte %d is larger than %d bytes", f.offset-int64(len(f.frame)), MaxZstdFrameBytes)
	}
	l := len(f.frame)
	f.frame = append(f.frame, make([]byte, n)...)
	k, err := io.ReadFull(f.src, f.frame[l:])
	f.offset += int64(k)
	f.frame = f.frame[:l+k]
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return false, nil
	default:
		return false, fmt.Errorf("read: %w", err)
	}
}

// scan reads one frame's bytes, checking its structure; it reports whether
// the frame is complete.
func (f *frameReader) scan() (bool, error) {
	start := f.offset
	if ok, err := f.take(4); !ok || err != nil {
		return false, err
	}
	if !bytes.Equal(f.frame[:4], zstdMagic) {
		return false, recErr(RuleZstd, "invalid frame magic at byte %d", start)
	}
	if ok, err := f.take(1); !ok || err != nil {
		return false, err
	}
	fhd := f.frame[4]
	if fhd&0x18 != 0 {
		return false, recErr(RuleZstd, "zstd frame at byte %d has reserved header bits set", start)
	}
	single := fhd&0x20 != 0
	header := 0
	if !single {
		header++ // window descriptor
	}
	header += [4]int{0, 1, 2, 4}[fhd&3]
	fcs := [4]int{0, 2, 4, 8}[fhd>>6]
	if fhd>>6 == 0 && single {
		fcs = 1
	}
	header += fcs
	if ok, err := f.take(header); !ok || err != nil {
		return false, err
	}
	for {
		if ok, err := f.take(3); !ok || err != nil {
			return false, err
		}
		b := f.frame[len(f.frame)-3:]
		bh := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		last, typ, size := bh&1 == 1, (bh>>1)&3, bh>>3
		switch typ {
		case 1: // RLE
			size = 1
		case 3:
			return false, recErr(RuleZstd, "zstd frame at byte %d has a block of the reserved type", start)
		}
		if ok, err := f.take(size); !ok || err != nil {
			return false, err
		}
		if last {
			break
		}
	}
	if fhd&0x04 != 0 {
		return f.take(4)
	}
	return true, nil
}
