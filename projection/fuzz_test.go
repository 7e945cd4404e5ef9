package projection

import (
	"bytes"
	"slices"
	"testing"

	"github.com/dshq/dshq"
)

func FuzzEventValue(f *testing.F) {
	f.Add([]byte{}, "user/message", int64(5), "hello", []byte(`{"a":1}`))
	f.Add([]byte{0, 9, 200}, "", int64(-1), "", []byte(nil))
	// Tails: an s2 block against the dictionary, a cut one, a plain one.
	f.Add([]byte{0, 1, 0, 0, 0, 0, 2, rawS2Dict1, 40, 0xfe, 0xff, 0xff}, "tool/result", int64(9), "retry budget",
		[]byte(`{"type":"tool/result","seq":9,"time":1,"data":{"content":[{"type":"text","text":"retry budget"}]}}`))
	f.Add(rawTail("x", []byte(`{"type":"user/message"}`))[:5], "", int64(0), "", bytes.Repeat([]byte(`{"a":"b"}`), 10000))
	f.Add([]byte{3, rawPlain, 'a'}, "", int64(0), "", []byte{0xff, 0})
	f.Fuzz(func(t *testing.T, junk []byte, typ string, n int64, text string, raw []byte) {
		// Arbitrary bytes are an error or a value, never a panic.
		_, _ = unmarshalEvent(junk)
		_, _, _ = decodeRawTail(junk)
		_, _ = decodeSeqs(junk)
		_ = checkBoltMetaBytes(junk)

		v := eventValue{Type: typ, Time: n, Surface: dshq.SurfaceShadowed, Invalid: n%2 == 0,
			StreamSeq: uint64(n), OrderKey: -n, Text: text, Raw: raw}
		got, err := unmarshalEvent(v.marshal())
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if got.Type != v.Type || got.Time != v.Time || got.Surface != v.Surface || got.Invalid != v.Invalid ||
			got.StreamSeq != v.StreamSeq || got.OrderKey != v.OrderKey || got.Text != v.Text || !bytes.Equal(got.Raw, v.Raw) {
			t.Fatalf("round trip: %+v != %+v", got, v)
		}
		seqs := []int64{n, -n, 0, n / 3}
		back, err := decodeSeqs(encodeSeqs(seqs))
		if err != nil || !slices.Equal(back, seqs) {
			t.Fatalf("seqs round trip: %v %v", back, err)
		}
	})
}

// checkBoltMetaBytes runs the meta-page reader over arbitrary bytes.
func checkBoltMetaBytes(b []byte) error {
	_, err := readBoltMeta(bytes.NewReader(b), 0)
	return err
}
