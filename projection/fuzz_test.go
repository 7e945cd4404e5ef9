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
	f.Fuzz(func(t *testing.T, junk []byte, typ string, n int64, text string, raw []byte) {
		// Arbitrary bytes are an error or a value, never a panic.
		_, _ = unmarshalEvent(junk)
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
