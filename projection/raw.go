package projection

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"

	"github.com/dshq/dshq/record"
)

// An event value's tail holds its raw record and semantic text, which are
// most of its bytes and already in the stream: the uvarint length of the
// text, a codec byte, then the record followed by the text in that codec.
// The text follows the record because it is mostly the record's strings, so
// that compressed together it costs a few copy codes (docs/architecture.md,
// "A versioned store layout").
const (
	// rawPlain stores the record and text as they are: for a record the
	// codec would not shrink.
	rawPlain byte = 0
	// rawS2Dict1 is an s2 block against rawDict1. Records average about
	// 220 bytes, too short for a compressor to find repeats within one: the
	// dictionary supplies the format's keys and common values.
	rawS2Dict1 byte = 1
)

// rawDict1Bytes is the dictionary of rawS2Dict1: the repository's fixture
// logs (testdata/logs), concatenated. A stored value names its dictionary,
// so this file never changes: a new dictionary is a new codec.
//
//go:embed rawdict1.jsonl
var rawDict1Bytes []byte

// rawDict1 is rawDict1Bytes as an s2 dictionary; a Dict is safe for
// concurrent use and builds its match tables once, on first encode.
var rawDict1 = sync.OnceValue(func() *s2.Dict {
	return s2.MakeDict(rawDict1Bytes, []byte(`{"type":"`))
})

// maxRawTailBytes bounds the decoded tail a stored value may claim, so a
// corrupt length allocates no more than the largest record and its text.
const maxRawTailBytes = 2 * record.DefaultMaxRecordBytes

// rawTail returns the tail encoding of text and raw.
func rawTail(text string, raw []byte) []byte {
	plain := make([]byte, 0, len(raw)+len(text))
	plain = append(append(plain, raw...), text...)
	head := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+1), uint64(len(text)))
	n := len(head) + 1
	tail := make([]byte, n, n+s2.MaxEncodedLen(len(plain)))
	copy(tail, head)
	packed := rawDict1().Encode(tail[n:], plain)
	if len(packed) >= len(plain) {
		tail[n-1] = rawPlain
		return append(tail[:n], plain...)
	}
	tail[n-1] = rawS2Dict1
	return append(tail[:n], packed...) // packed is tail[n:], unless Encode grew it
}

// decodeRawTail returns the text and raw record of a tail. A tail that does
// not decode is errCorruptEvent.
func decodeRawTail(tail []byte) (text string, raw []byte, err error) {
	n, k := binary.Uvarint(tail)
	if k <= 0 || len(tail) == k {
		return "", nil, errCorruptEvent
	}
	codec, body := tail[k], tail[k+1:]
	var plain []byte
	switch codec {
	case rawPlain:
		plain = append([]byte(nil), body...)
	case rawS2Dict1:
		size, err := s2.DecodedLen(body)
		if err != nil || size > maxRawTailBytes {
			return "", nil, fmt.Errorf("%w: raw record block claims %d bytes (%v)", errCorruptEvent, size, err)
		}
		if plain, err = rawDict1().Decode(nil, body); err != nil {
			return "", nil, fmt.Errorf("%w: raw record block: %v", errCorruptEvent, err)
		}
	default:
		return "", nil, fmt.Errorf("%w: unknown raw record codec %d", errCorruptEvent, codec)
	}
	if uint64(len(plain)) < n {
		return "", nil, fmt.Errorf("%w: text of %d bytes in a tail of %d", errCorruptEvent, n, len(plain))
	}
	r := len(plain) - int(n)
	return string(plain[r:]), plain[:r:r], nil
}
