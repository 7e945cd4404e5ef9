package projection

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"

	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/internal/corpus"
)

// rawCodec is one candidate encoding of a stored event's raw record and text.
type rawCodec struct {
	name   string
	encode func(dst, src []byte) []byte
	decode func(dst, src []byte) ([]byte, error)
}

func rawCodecs(tb testing.TB) []rawCodec {
	tb.Helper()
	var out []rawCodec
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true), zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false))
		if err != nil {
			tb.Fatal(err)
		}
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, rawCodec{"zstd-" + lvl.String(), func(dst, src []byte) []byte { return enc.EncodeAll(src, dst) }, func(dst, src []byte) ([]byte, error) { return dec.DecodeAll(src, dst) }})
	}
	dict := rawDict1Bytes // the fixture logs (raw.go)
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true), zstd.WithEncoderCRC(false), zstd.WithEncoderDictRaw(1, dict))
		if err != nil {
			tb.Fatal(err)
		}
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderDictRaw(1, dict))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, rawCodec{"zstd-dict-" + lvl.String(), func(dst, src []byte) []byte { return enc.EncodeAll(src, dst) }, func(dst, src []byte) ([]byte, error) { return dec.DecodeAll(src, dst) }})
	}
	sd := rawDict1() // what the store uses
	out = append(out,
		rawCodec{"s2-dict", sd.Encode, sd.Decode},
		rawCodec{"s2-dict-better", sd.EncodeBetter, sd.Decode},
		rawCodec{"s2", s2.Encode, s2.Decode},
		rawCodec{"s2-better", s2.EncodeBetter, s2.Decode},
		rawCodec{"snappy", snappy.Encode, snappy.Decode},
	)
	return out
}

// corpusRecords returns the deepseek-harness corpus's event records, each
// with its semantic text appended (what the store keeps beside it).
func corpusRecords(tb testing.TB) (raws, withText [][]byte) {
	for _, l := range readCorpus(tb, corpus.Require(tb)) {
		for _, ev := range l.events {
			raws = append(raws, ev.Raw)
			withText = append(withText, append(append([]byte(nil), ev.Raw...), fold.Text(ev)...))
		}
	}
	return raws, withText
}

// BenchmarkRawCodecs compares per-record encodings of the stored raw
// record on the deepseek-harness corpus: the stored size beside the raw
// bytes, and the cost of one decode (what every read of an event pays).
// Run it with: go test -run '^$' -bench RawCodecs ./projection
func BenchmarkRawCodecs(b *testing.B) {
	raws, withText := corpusRecords(b)
	for _, set := range []struct {
		name string
		recs [][]byte
	}{{"raw", raws}, {"raw+text", withText}} {
		for _, c := range rawCodecs(b) {
			var plain, packed int
			enc := make([][]byte, len(set.recs))
			for i, r := range set.recs {
				enc[i] = c.encode(nil, r)
				plain += len(r)
				packed += len(enc[i])
			}
			b.Run(set.name+"/"+c.name+"/decode", func(b *testing.B) {
				var buf []byte
				for i := range b.N {
					j := i % len(enc)
					out, err := c.decode(buf[:0], enc[j])
					if err != nil || !bytes.Equal(out, set.recs[j]) {
						b.Fatalf("decode %d: %v", j, err)
					}
					buf = out
				}
				b.ReportMetric(float64(packed)/float64(plain), "size-ratio")
				b.ReportMetric(float64(plain)/float64(len(set.recs)), "raw-B/rec")
			})
			b.Run(set.name+"/"+c.name+"/encode", func(b *testing.B) {
				var buf []byte
				for i := range b.N {
					buf = c.encode(buf[:0], set.recs[i%len(set.recs)])
				}
			})
		}
	}
}
