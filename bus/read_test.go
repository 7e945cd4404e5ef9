package bus

import (
	"slices"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

func TestStore_AppendAndReadBack(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	s := newStore(t, e)
	ctx := testCtx(t)
	h, err := s.Create(ctx, header("s1"))
	if err != nil {
		t.Fatal(err)
	}
	want := cmds(t, 0, 5)
	if _, err := h.Append(ctx, want[:1]); err != nil {
		t.Fatal(err)
	}
	last, err := h.Append(ctx, want[1:])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("last stream seq %d", last)
	got, err := h.Read(ctx, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rawOf(got), rawOf(want)) {
		t.Fatalf("got %v", rawOf(got))
	}
	mustClose(t, h)
	s2 := newStore(t, e)
	r, err := s2.Open(ctx, "s1", Read)
	if err != nil {
		t.Fatal(err)
	}
	got, err = r.Read(ctx, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rawOf(got), rawOf(want[2:4])) {
		t.Fatalf("got %v", rawOf(got))
	}
	w, err := s2.Open(ctx, "s1", Write)
	if err != nil {
		t.Fatal(err)
	}
	if w.NextSeq() != 5 {
		t.Fatalf("next seq %d", w.NextSeq())
	}
	mustClose(t, w)
	mustClose(t, r)
}

func TestRead_WindowsAcrossBatchesAndPages(t *testing.T) {
	e := testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed})
	s := newStore(t, e)
	ctx := testCtx(t)
	w, err := s.Create(ctx, header("pages"))
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, w)
	all := cmds(t, 0, 600)
	// One atomic batch, then records one by one, then another batch.
	for _, part := range [][]dshq.Event{all[:300], all[300:305], all[305:]} {
		if _, err := w.Append(ctx, part); err != nil {
			t.Fatal(err)
		}
	}
	r, err := newStore(t, e).Open(ctx, "pages", Read)
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, r)
	cases := []struct {
		name           string
		h              *Handle
		offset, length int64
	}{
		{"a fresh read handle reads the whole log across direct-get pages", r, 0, -1},
		{"a window inside the first batch", r, 150, 10},
		{"a window across the batch boundary", r, 295, 20},
		{"the write handle reads a window inside a batch it appended", w, 10, 5},
		{"the write handle reads the tail", w, 599, 5},
		{"an offset at the end is empty", w, 600, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.h.Read(ctx, tc.offset, tc.length)
			if err != nil {
				t.Fatal(err)
			}
			end := int64(len(all))
			if tc.length >= 0 {
				end = min(end, tc.offset+tc.length)
			}
			want := all[min(tc.offset, int64(len(all))):end]
			if !slices.Equal(rawOf(got), rawOf(want)) {
				t.Fatalf("read %d events, want %d (first %v)", len(got), len(want), rawOf(got)[:min(1, len(got))])
			}
		})
	}
}

// docs/protocol.md#2-the-session-log-stream: every record carries its
// deterministic msg id and the stream sequence of the session's previous
// record.
func TestRecords_CarryContractHeaders(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	s := newStore(t, e)
	ctx := testCtx(t)
	w, err := s.Create(ctx, header("a b")) // an encoded token
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, w)
	if _, err := w.Append(ctx, cmds(t, 0, 3)); err != nil {
		t.Fatal(err)
	}
	tok := w.token
	if tok != "~YSBi" {
		t.Fatalf("token %q", tok)
	}
	prev := uint64(0)
	for i, want := range []string{tok + ":h", tok + ":0", tok + ":1", tok + ":2"} {
		m, err := s.stream.GetMsg(ctx, prev+1, jetstream.WithGetMsgSubject(dshq.LogSubjectPrefix+tok))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get(hdrMsgID); got != want {
			t.Fatalf("record %d: msg id %q, want %q", i, got, want)
		}
		if got := m.Header.Get(hdrExpectedSubjSeq); got != strconv.FormatUint(prev, 10) {
			t.Fatalf("record %d: expected last subject sequence %q, want %d", i, got, prev)
		}
		prev = m.Sequence
	}
}

func TestAppend_EventWithoutRawIsEncodedFromItsFields(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	s := newStore(t, e)
	ctx := testCtx(t)
	w, err := s.Create(ctx, header("fields"))
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, w)
	evt := dshq.Event{Type: "command/run", Seq: 0, Time: 7, Data: []byte(`{"command": "ls"}`), Ignorable: true}
	if _, err := w.Append(ctx, []dshq.Event{evt}); err != nil {
		t.Fatal(err)
	}
	got, err := w.Read(ctx, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"command/run","seq":0,"time":7,"data":{"command":"ls"},"ignorable":true}`; string(got[0].Raw) != want {
		t.Fatalf("stored %s, want %s", got[0].Raw, want)
	}
	_, err = w.Append(ctx, []dshq.Event{{Type: "command/run", Seq: 1, Time: 1}})
	wantKind(t, err, ErrInvalidArgument, "no data")
	// Raw alone is enough: its type and seq are the event's.
	if _, err := w.Append(ctx, []dshq.Event{{Raw: []byte(`{"type":"command/run","seq":1,"time":8,"data":{}}`)}}); err != nil {
		t.Fatalf("append of a raw-only event: %v", err)
	}
	_, err = w.Append(ctx, []dshq.Event{{Raw: []byte(`{"type":"command/run","seq":1,"time":8,"data":{}}`)}})
	wantKind(t, err, ErrInvalidArgument, `append seq mismatch for "fields": expected 2 at index 0, got 1`)
}
