package bus

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/record"
)

// FuzzAppendRaw appends arbitrary bytes as the next event of a session:
// each input is either refused as an invalid argument with the stream
// unchanged, or stored exactly as record.ParseEvent compacts it. Never a
// panic. On demand:
//
//	go test -run '^$' -fuzz FuzzAppendRaw -parallel=1 -fuzztime 60s ./bus
func FuzzAppendRaw(f *testing.F) {
	for _, seed := range []string{
		`{"type":"command/run","seq":0,"time":1,"data":{}}`,
		`{"type":"future/x","seq":0,"time":1,"data":[1,2,{"a":"\u00e9"}],"ignorable":true}`,
		`{"type":"command/run","seq":0,"time":1,"data":{},"data":{}}`,
		`{"type":"command/run","seq":0,"time":1,"data":-0}`,
		`{"type":"user/message","seq":0,"time":1,"data":{}}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{},"surfaceOp":{"kind":"append"}}`,
		`[`, ``, `null`, "{\"type\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	e := testnats.Start(f, embedded.Config{Sync: embedded.SyncRelaxed})
	s := newStore(f, e)
	ctx := context.Background()
	n := 0
	f.Fuzz(func(t *testing.T, raw []byte) {
		n++
		id := "fuzz-" + strconv.Itoa(n)
		w, err := s.Create(ctx, header(id))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close(ctx)
		before := streamMsgs(t, s)
		_, err = w.Append(ctx, []dshq.Event{{Seq: 0, Raw: raw, Type: typeOf(raw)}})
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("refusal of %q is not an invalid argument: %v", raw, err)
			}
			if got := streamMsgs(t, s); got != before {
				t.Fatalf("refused input %q changed the stream", raw)
			}
			return
		}
		got, err := w.Read(ctx, 0, -1)
		if err != nil {
			t.Fatalf("read back %q: %v", raw, err)
		}
		want, _ := record.ParseEvent(raw)
		if len(got) != 1 || string(got[0].Raw) != string(want.Raw) {
			t.Fatalf("stored %v, want %s", rawOf(got), want.Raw)
		}
	})
}

// typeOf returns the type the record claims, so the fields agree with Raw
// whenever Raw parses.
func typeOf(raw []byte) string {
	e, err := record.ParseEvent(raw)
	if err != nil {
		return ""
	}
	return e.Type
}
