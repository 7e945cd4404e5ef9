// Package capturetest checks what every harness converter must do, for the
// tests and fuzz targets of capture/claudecode and capture/codex: valid
// records that fold under the harness SDK's strict rules and the
// projector's lenient ones, the source written back byte for byte, the same
// logs whether a file is converted whole, line by line or in chunks of any
// size, and a conversion resumed from a stored log that continues it
// exactly.
package capturetest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/record"
)

// New returns a fresh converter for the file under test, with cfg's Own
// (and everything else fixed by the test).
type New func(cfg capture.Config) capture.Converter

// For returns the New of a converter package (claudecode.New, codex.New)
// for the file at path, its events bounded at maxEvent (0: the default).
func For[C capture.Converter](newConv func(capture.Config) C, path string, maxEvent int) New {
	return func(cfg capture.Config) capture.Converter {
		cfg.Path, cfg.MaxEventBytes = path, maxEvent
		return newConv(cfg)
	}
}

// HeadLines returns the first n lines of data (all of it when it has
// fewer): a fuzz seed cut from a fixture.
func HeadLines(data []byte, n int) []byte {
	off := 0
	for i := 0; i < n; i++ {
		j := bytes.IndexByte(data[off:], '\n')
		if j < 0 {
			return data
		}
		off += j + 1
	}
	return data[:off]
}

// Above largeFile bytes Check tries fewer chunk sizes and resume points,
// and above hugeFile fewer still: each is a whole conversion more, and
// under the race detector a conversion of the corpus's largest file costs
// seconds. Smaller files cover every size and point.
const (
	largeFile = 64 << 10
	hugeFile  = 512 << 10
)

// Check converts data in every way and fails t on any broken rule; the
// converters newConv returns bound their events to maxEvent bytes (0 =
// capture.DefaultMaxEventBytes). It returns the logs of the whole
// conversion and the converter's stats.
func Check(t testing.TB, newConv New, data []byte, maxEvent int) ([]capture.Log, capture.Stats) {
	t.Helper()
	maxEvent = capture.Config{MaxEventBytes: maxEvent}.MaxEvent()
	conv := newConv(capture.Config{})
	logs := convert(t, conv, data)
	stats := conv.Stats()
	for _, l := range logs {
		checkLog(t, l, maxEvent)
	}
	checkSource(t, logs, data)
	if raceEnabled && len(data) > hugeFile {
		// The converters start no goroutines, so the race detector finds
		// nothing here; it only makes these conversions cost CPU that the
		// packages tested beside this one need. Every smaller file runs
		// them under -race, and this file without it.
		return logs, stats
	}
	checkChunked(t, newConv, data, logs)
	checkResumed(t, newConv, data, logs, maxEvent)
	return logs, stats
}

func convert(t testing.TB, c capture.Converter, data []byte) []capture.Log {
	t.Helper()
	ups, err := capture.Convert(c, data)
	if err != nil {
		t.Fatalf("Convert: %v", err)
	}
	logs, err := capture.Collect(ups)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return logs
}

// Quick is Check for a fuzz target: the same rules, with one chunk size
// and one resume point (chosen from the input) instead of all of them, so
// that the fuzzer runs many inputs a second.
func Quick(t testing.TB, newConv New, data []byte, maxEvent int) {
	t.Helper()
	maxEvent = capture.Config{MaxEventBytes: maxEvent}.MaxEvent()
	logs := convert(t, newConv(capture.Config{}), data)
	for _, l := range logs {
		checkLog(t, l, maxEvent)
	}
	checkSource(t, logs, data)
	checkChunks(t, newConv, data, logs, 1+len(data)%61)
	if len(data) > 1 {
		resume(t, newConv, data, len(data)*2/3, logs, maxEvent)
	}
}

// checkLog verifies one log's records: the header and every event read back
// by record exactly as written, no event over the bound, every type the
// original vocabulary lacks ignorable, and the fold at both levels.
func checkLog(t testing.TB, l capture.Log, maxEvent int) {
	t.Helper()
	back, err := record.ParseHeader(l.Header.Raw)
	if err != nil {
		t.Fatalf("session %s: header %s: %v", l.Header.Header.ID, l.Header.Raw, err)
	}
	back.Raw = l.Header.Raw
	if !reflect.DeepEqual(back, l.Header) {
		t.Fatalf("session %s: header reads back as %+v, not %+v", l.Header.Header.ID, back, l.Header)
	}
	if enc, _ := record.EncodeHeader(l.Header); !bytes.Equal(enc, l.Header.Raw) {
		t.Fatalf("session %s: header %s is not what the SDK writes (%s)", l.Header.Header.ID, l.Header.Raw, enc)
	}
	for _, e := range l.Events {
		got, err := record.ParseEvent(e.Raw)
		if err != nil {
			t.Fatalf("session %s: event %s: %v", l.Header.Header.ID, abbrev(e.Raw), err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("session %s: event %d reads back as %+v, not %+v", l.Header.Header.ID, e.Seq, got, e)
		}
		if len(e.Raw) > maxEvent {
			t.Fatalf("session %s: event %d is %d bytes, over the bound of %d", l.Header.Header.ID, e.Seq, len(e.Raw), maxEvent)
		}
		if !fold.KnownType(e.Type) && !e.Ignorable {
			t.Fatalf("session %s: event %d of type %q is not ignorable", l.Header.Header.ID, e.Seq, e.Type)
		}
	}
	for _, level := range []fold.Level{fold.Strict, fold.Lenient} {
		if _, err := fold.Fold(l.Header, l.Events, level); err != nil {
			var ve *fold.ValidationError
			seq := int64(-1)
			if errors.As(err, &ve) {
				seq = ve.Seq
			}
			raw := []byte(nil)
			if seq >= 0 && seq < int64(len(l.Events)) {
				raw = l.Events[seq].Raw
			}
			t.Fatalf("session %s: fold (level %d): %v\nevent: %s", l.Header.Header.ID, level, err, abbrev(raw))
		}
	}
}

// checkSource verifies that exactly one log holds the file's lines and
// that it writes the file back byte for byte; the others point at it.
func checkSource(t testing.TB, logs []capture.Log, data []byte) {
	t.Helper()
	if len(logs) == 0 {
		if len(data) > 0 {
			t.Fatalf("%d bytes gave no session", len(data))
		}
		return
	}
	src, err := capture.Source(logs[0].Events)
	if err != nil {
		t.Fatalf("session %s: Source: %v", logs[0].Header.Header.ID, err)
	}
	if !bytes.Equal(src, data) {
		t.Fatalf("session %s: Source differs from the file at byte %d", logs[0].Header.Header.ID, firstDiff(src, data))
	}
	for _, l := range logs[1:] {
		_, err := capture.SourceLines(l.Events)
		if err == nil || !strings.Contains(err.Error(), logs[0].Header.Header.ID) {
			t.Fatalf("child session %s: SourceLines = %v, want it to name %s as the holder", l.Header.Header.ID, err, logs[0].Header.Header.ID)
		}
	}
}

// checkChunked converts data line by line and through capture.Lines in
// chunks of several sizes, and wants exactly the whole conversion.
func checkChunked(t testing.TB, newConv New, data []byte, whole []capture.Log) {
	t.Helper()
	sizes := []int{1, 7, 64, 4093, len(data) + 1}
	switch {
	case len(data) > hugeFile:
		sizes = []int{4093}
	case len(data) > largeFile:
		sizes = []int{7, 4093}
	}
	for _, size := range sizes {
		checkChunks(t, newConv, data, whole, size)
	}
}

// checkChunks converts data through capture.Lines in chunks of size bytes
// and wants exactly the whole conversion.
func checkChunks(t testing.TB, newConv New, data []byte, whole []capture.Log, size int) {
	t.Helper()
	c := newConv(capture.Config{})
	var s capture.Lines
	var ups []capture.Update
	for off := 0; off < len(data); off += size {
		for _, l := range s.Write(data[off:min(off+size, len(data))]) {
			u, err := c.Feed(l)
			if err != nil {
				t.Fatalf("Feed: %v", err)
			}
			ups = append(ups, u...)
		}
	}
	if l, ok := s.Finish(); ok {
		u, err := c.Feed(l)
		if err != nil {
			t.Fatalf("Feed: %v", err)
		}
		ups = append(ups, u...)
	}
	ups = append(ups, c.Finish()...)
	got, err := capture.Collect(ups)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if d := diffLogs(got, whole); d != "" {
		t.Fatalf("in chunks of %d bytes: %s", size, d)
	}
}

// checkResumed converts a prefix of the file (cut at a line boundary and
// in the middle of a line), finishes it as an import of a file still being
// written would, and resumes from the stored log the way a restarted
// watcher does: a converter told the stored header, fed the stored lines
// (which must re-derive exactly the stored events), then the rest of the
// file as new lines. The result must be a valid log whose source is the
// whole file, and equal to the whole conversion when the prefix's header
// was not forced.
func checkResumed(t testing.TB, newConv New, data []byte, whole []capture.Log, maxEvent int) {
	t.Helper()
	lines := capture.SplitLines(data)
	var cuts []int
	at := []int{1, len(lines) / 3, len(lines) / 2, len(lines) - 1}
	if len(data) > largeFile {
		at = []int{len(lines) / 2}
	}
	for _, n := range at {
		if n > 0 && n < len(lines) && (len(cuts) == 0 || cuts[len(cuts)-1] != n) {
			cuts = append(cuts, n)
		}
	}
	for _, n := range cuts {
		var off int
		for _, l := range lines[:n] {
			off += int(l.Len())
		}
		for _, cut := range []int{off, off + int(lines[n].Len())/2} {
			if cut == off && (len(data) > hugeFile || cut > 0 && lines[n-1].EOL == "") {
				continue // a huge file is resumed mid-line only
			}
			resume(t, newConv, data, cut, whole, maxEvent)
		}
	}
}

func resume(t testing.TB, newConv New, data []byte, cut int, whole []capture.Log, maxEvent int) {
	t.Helper()
	stored := convert(t, newConv(capture.Config{}), data[:cut])
	if len(stored) == 0 {
		return
	}
	own := stored[0]
	held, err := capture.SourceLines(own.Events)
	if err != nil {
		t.Fatalf("cut at %d: SourceLines: %v", cut, err)
	}
	c := newConv(capture.Config{Own: &own.Header})
	var again []capture.Update
	for _, l := range held {
		u, err := c.Feed(l)
		if err != nil {
			t.Fatalf("cut at %d: Feed: %v", cut, err)
		}
		again = append(again, u...)
	}
	if got := eventsOf(again, own.Header.Header.ID); !sameEvents(got, own.Events) {
		t.Fatalf("cut at %d: re-feeding the stored lines gave %d events, not the %d stored (or other ones)", cut, len(got), len(own.Events))
	}
	rest := capture.NewLines(int64(len(held))+1, int64(cut))
	var more []capture.Update
	for _, l := range rest.Write(data[cut:]) {
		u, err := c.Feed(l)
		if err != nil {
			t.Fatalf("cut at %d: Feed: %v", cut, err)
		}
		more = append(more, u...)
	}
	if l, ok := rest.Finish(); ok {
		u, _ := c.Feed(l)
		more = append(more, u...)
	}
	more = append(more, c.Finish()...)
	resumed := capture.Log{Header: own.Header, Events: append(append([]dshq.Event(nil), own.Events...), eventsOf(more, own.Header.Header.ID)...)}
	if bytes.Equal(own.Header.Raw, whole[0].Header.Raw) && cutAtLine(data, cut) {
		// Continued exactly: what holds for the whole conversion holds.
		if !sameEvents(resumed.Events, whole[0].Events) {
			t.Fatalf("cut at %d: the resumed log differs from the whole conversion", cut)
		}
		return
	}
	checkLog(t, resumed, maxEvent)
	src, err := capture.Source(resumed.Events)
	if err != nil || !bytes.Equal(src, data) {
		t.Fatalf("cut at %d: the resumed log's source differs from the file (%v)", cut, err)
	}
}

// cutAtLine reports whether data[:cut] ends at a line boundary.
func cutAtLine(data []byte, cut int) bool { return cut == 0 || data[cut-1] == '\n' }

func eventsOf(ups []capture.Update, id string) []dshq.Event {
	var out []dshq.Event
	for _, u := range ups {
		if u.SessionID == id {
			out = append(out, u.Events...)
		}
	}
	return out
}

func sameEvents(a, b []dshq.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Raw, b[i].Raw) {
			return false
		}
	}
	return true
}

// diffLogs describes the first difference between two conversions, "" when
// they are the same.
func diffLogs(got, want []capture.Log) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d sessions, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !bytes.Equal(g.Header.Raw, w.Header.Raw) {
			return fmt.Sprintf("session %d header %s, want %s", i, g.Header.Raw, w.Header.Raw)
		}
		if len(g.Events) != len(w.Events) {
			return fmt.Sprintf("session %s has %d events, want %d", w.Header.Header.ID, len(g.Events), len(w.Events))
		}
		for j := range g.Events {
			if !bytes.Equal(g.Events[j].Raw, w.Events[j].Raw) {
				return fmt.Sprintf("session %s event %d:\n%s\nwant\n%s", w.Header.Header.ID, j, abbrev(g.Events[j].Raw), abbrev(w.Events[j].Raw))
			}
		}
		if !reflect.DeepEqual(g.Notices, w.Notices) {
			return fmt.Sprintf("session %s notices %q, want %q", w.Header.Header.ID, g.Notices, w.Notices)
		}
	}
	return ""
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func abbrev(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// Render writes logs for a golden file: per session its notices (as
// "# notice: …" lines), its header record, then each event's surface
// (folded at the lenient level) and record, a blank line after each
// session.
func Render(t testing.TB, logs []capture.Log) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, l := range logs {
		for _, n := range l.Notices {
			fmt.Fprintf(&b, "# notice: %s\n", n)
		}
		b.Write(l.Header.Raw)
		b.WriteByte('\n')
		res, err := fold.Fold(l.Header, l.Events, fold.Lenient)
		if err != nil {
			t.Fatalf("fold %s: %v", l.Header.Header.ID, err)
		}
		for i, e := range l.Events {
			fmt.Fprintf(&b, "%-8s %s\n", res.Records[i].Surface, e.Raw)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}
