package projection

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
)

// contractPublisher publishes records as
// docs/protocol.md#2-the-session-log-stream says (Nats-Msg-Id and the expected
// last subject sequence) and raw copies without either, in pipelined rounds:
// within a round each subject gets records whose expected sequence the previous
// round's acks settled.
type contractPublisher struct {
	t       testing.TB
	js      jetstream.JetStream
	last    map[string]uint64 // subject token → its last stream sequence
	pending []pendingPub
}

type pendingPub struct {
	tok      string
	future   jetstream.PubAckFuture
	wantDupe bool
}

func newContractPublisher(e *env) *contractPublisher {
	return &contractPublisher{t: e.t, js: e.js, last: map[string]uint64{}}
}

func msgID(tok string, n int) string {
	if n < 0 {
		return tok + ":h"
	}
	return fmt.Sprintf("%s:%d", tok, n)
}

// record publishes the n-th record of a subject (n = -1 for the header) with
// its msg id and the expected sequence; at most one per subject and round.
func (c *contractPublisher) record(tok string, n int, data []byte) {
	c.publish(tok, data, false, jetstream.WithMsgID(msgID(tok, n)), jetstream.WithExpectLastSequencePerSubject(c.last[tok]))
}

// again re-publishes the n-th record with its msg id: the server must drop it.
func (c *contractPublisher) again(tok string, n int, data []byte) {
	c.publish(tok, data, true, jetstream.WithMsgID(msgID(tok, n)))
}

// raw publishes data on a subject with no msg id and no expected sequence.
func (c *contractPublisher) raw(tok string, data []byte) { c.publish(tok, data, false) }

func (c *contractPublisher) publish(tok string, data []byte, wantDupe bool, opts ...jetstream.PublishOpt) {
	c.t.Helper()
	f, err := c.js.PublishAsync(dshq.LogSubjectPrefix+tok, data, opts...)
	if err != nil {
		c.t.Fatalf("publish on %s: %v", tok, err)
	}
	c.pending = append(c.pending, pendingPub{tok, f, wantDupe})
}

// settle waits for the round's acks and returns their stream sequences in
// publish order (0 for a dropped duplicate).
func (c *contractPublisher) settle() []uint64 {
	c.t.Helper()
	seqs := make([]uint64, len(c.pending))
	for i, p := range c.pending {
		select {
		case ack := <-p.future.Ok():
			if ack.Duplicate != p.wantDupe {
				c.t.Fatalf("publish on %s: duplicate %t, want %t", p.tok, ack.Duplicate, p.wantDupe)
			}
			if !ack.Duplicate {
				c.last[p.tok], seqs[i] = ack.Sequence, ack.Sequence
			}
		case err := <-p.future.Err():
			c.t.Fatalf("publish on %s: %v", p.tok, err)
		case <-time.After(30 * time.Second):
			c.t.Fatal("publish ack timed out")
		}
	}
	c.pending = c.pending[:0]
	return seqs
}

// projectAndDump runs a projector over everything published to e (through
// stream sequence last), stops it and returns the dump of its directory.
func projectAndDump(t *testing.T, e *env, last uint64) []DumpEntry {
	t.Helper()
	dir := t.TempDir()
	r := e.start(dir)
	waitGenWithin(t, r.p, last, 90*time.Second)
	if err := r.stop(); err != nil {
		t.Fatalf("projector: %v", err)
	}
	entries, err := DumpEntries(dir)
	if err != nil {
		t.Fatalf("dump: %v", err)
	}
	return entries
}

// bySession groups dump entries by session, leaving out the quarantine
// section (compared on its own).
func bySession(entries []DumpEntry) map[string][]string {
	out := map[string][]string{}
	for _, e := range entries {
		if e.Section != string(bucketQuarantine) && e.Section != string(bucketBadSubjects) {
			out[e.Session] = append(out[e.Session], e.String())
		}
	}
	return out
}

func quarantined(entries []DumpEntry) []QuarantineRecord {
	var out []QuarantineRecord
	for _, e := range entries {
		if e.Section == string(bucketQuarantine) {
			var q QuarantineRecord
			if err := json.Unmarshal([]byte(e.Value), &q); err != nil {
				panic(err)
			}
			out = append(out, q)
		}
	}
	return out
}

// TestProjector_DuplicatesReplaysAndAPoisonRecordLeaveOtherSessionsExact
// projects 1,000 sessions interleaved record by record twice: once with
// duplicates (same msg ids, which the server drops; raw re-publishes with no
// msg id, which land as extra stream records, replayed out of order) and one
// poison record in one session, once without them. A filler record on a
// refused subject stands in the clean stream for each bad record that
// landed, so every good record has the same stream sequence in both.
func TestProjector_DuplicatesReplaysAndAPoisonRecordLeaveOtherSessionsExact(t *testing.T) {
	const sessions, poisoned, poisonAt = 1000, 500, 9
	base := readLines(t, "upstream-2.5.jsonl")
	logs := make([][][]byte, sessions)
	toks := make([]string, sessions)
	for i := range logs {
		id := fmt.Sprintf("dump-%04d", i)
		if i%10 == 3 {
			id = fmt.Sprintf("会话 %04d/dump", i) // a base64url subject token
		}
		logs[i], toks[i] = withID(t, base, id), token(t, id)
		if i%10 != 0 {
			// Most sessions stop after the first tool call (the race
			// detector's cost bounds the corpus); every tenth one and
			// the poisoned one go on through a compaction.
			logs[i] = logs[i][:8]
		}
	}
	dirty, clean := newEnv(t), newEnv(t)
	pd, pc := newContractPublisher(dirty), newContractPublisher(clean)
	const filler = "filler"
	fill := func() { pc.raw(filler, []byte(`{"not":"a header"}`)) }

	dupes, dropped := 0, 0
	var last uint64
	for round := range len(base) {
		for i, l := range logs {
			if round >= len(l) {
				continue
			}
			pd.record(toks[i], round-1, l[round])
			pc.record(toks[i], round-1, l[round])
			if i == poisoned && round == poisonAt {
				pd.raw(toks[i], []byte(`{"type":"turn/start","seq":99,"time":1,"data":{"turn":9}}`))
				fill()
			}
			if i%97 != 5 || round < 3 {
				continue
			}
			// The same msg id again: dropped by the server's duplicate window.
			pd.again(toks[i], round-2, l[round-1])
			dropped++
			// Raw copies of applied records, newest first, and of the header.
			for _, j := range []int{round - 1, round - 3, 0} {
				pd.raw(toks[i], l[j])
				fill()
				dupes++
			}
		}
		sd, sc := slices.DeleteFunc(pd.settle(), func(s uint64) bool { return s == 0 }), pc.settle()
		if !slices.Equal(sd, sc) {
			t.Fatalf("round %d: stream sequences of the two streams diverged", round)
		}
		last = sd[len(sd)-1]
	}
	t.Logf("%d raw duplicates, %d same-msg-id duplicates dropped, 1 poison; last stream sequence %d", dupes, dropped, last)

	var got, want []DumpEntry
	t.Run("both streams project", func(t *testing.T) {
		t.Run("with the bad records", func(t *testing.T) { t.Parallel(); got = projectAndDump(t, dirty, last) })
		t.Run("without them", func(t *testing.T) { t.Parallel(); want = projectAndDump(t, clean, last) })
	})
	if got == nil || want == nil {
		t.FailNow()
	}
	gotBy, wantBy := bySession(got), bySession(want)
	poisonID := func() string { var h struct{ ID string }; mustUnmarshal(t, logs[poisoned][0], &h); return h.ID }()

	t.Run("every other session's projection is exact", func(t *testing.T) {
		n := 0
		for id, lines := range wantBy {
			if id == poisonID {
				continue
			}
			if !slices.Equal(gotBy[id], lines) {
				t.Errorf("session %q differs from the clean run:\n%s", id, dumpDiff(gotBy[id], lines))
				if n++; n > 3 {
					t.FailNow()
				}
			}
		}
		if len(gotBy) != len(wantBy) {
			t.Errorf("%d sessions in the dump, want %d", len(gotBy), len(wantBy))
		}
	})

	t.Run("the poisoned session is invalid from the poison's seq and left the index", func(t *testing.T) {
		var v sessionValue
		for _, e := range got {
			switch {
			case e.Session != poisonID:
			case e.Section == string(bucketSessions):
				mustUnmarshal(t, []byte(e.Value), &v)
			case e.Section == "index":
				t.Errorf("index doc of the invalid session: %s", e)
			case e.Section == string(bucketEvents):
				var seq int
				fmt.Sscanf(e.Key, "seq %d", &seq)
				if inv := strings.Contains(e.Value, "invalid=true"); inv != (seq >= poisonAt) {
					t.Errorf("event %d invalid=%t", seq, inv)
				}
			}
		}
		if v.InvalidFrom != poisonAt || !strings.Contains(v.InvalidReason, "99") {
			t.Errorf("invalid from %d (%q), want %d", v.InvalidFrom, v.InvalidReason, poisonAt)
		}
		if v.EventCount != int64(len(base)) {
			t.Errorf("%d events stored, want %d (the poison and every later record, raw)", v.EventCount, len(base))
		}
	})

	t.Run("every bad record is quarantined with its reason and session", func(t *testing.T) {
		var dup, poison int
		for _, q := range quarantined(got) {
			switch {
			case q.SessionID == poisonID && strings.Contains(q.Reason, fmt.Sprintf("event at seq %d", poisonAt)):
				poison++
			case q.SessionID != "" && strings.Contains(q.Reason, "duplicate of the"):
				dup++
			default:
				t.Fatalf("unexpected quarantine at %d of %q: %s: %s", q.StreamSeq, q.SessionID, q.Reason, q.Raw)
			}
		}
		if dup != dupes || poison != 1 {
			t.Errorf("%d duplicates and %d poison records quarantined, want %d and 1", dup, poison, dupes)
		}
		for _, q := range quarantined(want) {
			if q.Subject != dshq.LogSubjectPrefix+filler {
				t.Fatalf("clean run quarantined stream sequence %d of %q: %s: %s", q.StreamSeq, q.SessionID, q.Reason, q.Raw)
			}
		}
	})
}

// TestDump covers Dump's contract: deterministic, read-only, and a clear
// error for every directory that holds no readable projection.
func TestDump(t *testing.T) {
	e := newEnv(t)
	pub := newContractPublisher(e)
	var last uint64
	for i, l := range withID(t, readLines(t, "upstream-2.5.jsonl"), "dump-one") {
		pub.record(token(t, "dump-one"), i-1, l)
		last = pub.settle()[0]
	}
	dir := t.TempDir()
	r := e.start(dir)
	waitGen(t, r.p, last)

	t.Run("a directory a running projector holds is refused", func(t *testing.T) {
		if err := Dump(dir, new(bytes.Buffer)); err == nil {
			t.Fatal("dump of a directory in use succeeded")
		}
	})
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}

	before := treeHash(t, dir)
	var first, second bytes.Buffer
	if err := Dump(dir, &first); err != nil {
		t.Fatal(err)
	}
	if err := Dump(dir, &second); err != nil {
		t.Fatal(err)
	}
	t.Run("two dumps of one directory are identical", func(t *testing.T) {
		if first.String() != second.String() {
			t.Fatal("dumps differ")
		}
	})
	t.Run("dumping modifies nothing in the directory", func(t *testing.T) {
		if after := treeHash(t, dir); after != before {
			t.Fatalf("directory changed:\n%s\n%s", before, after)
		}
	})
	t.Run("the dump holds the checkpoint, every bucket's entries and the index docs", func(t *testing.T) {
		out := first.String()
		for _, want := range []string{
			`"meta"	""	"checkpoint"	"` + fmt.Sprint(last) + `"`,
			`"index-meta"	""	"dshq.generation"	"` + fmt.Sprint(last) + `"`,
			`"events"	"dump-one"	"seq 17"`, `"surface"	"dump-one"`, `"replaced"	"dump-one"`,
			`"index"	"dump-one"	"seq 1"`, `cgen=ok`, `"tokens"	"dump-one"`, `"states"	"dump-one"`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("dump lacks %s", want)
			}
		}
		if strings.Contains(out, `"epoch"`) {
			t.Error("dump holds the random epoch")
		}
	})

	cur, err := currentInstanceDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, d string)
		is    error
	}{
		{"a directory without CURRENT is refused", func(t *testing.T, d string) { os.Remove(filepath.Join(d, currentFile)) }, fs.ErrNotExist},
		{"a CURRENT naming something else is refused", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, currentFile), []byte("../etc\n"), 0o600)
		}, nil},
		{"a missing store is refused without creating one", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, filepath.Base(cur), "projection.db"))
		}, fs.ErrNotExist},
		{"a garbled store is refused as corrupt", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, filepath.Base(cur), "projection.db"), bytes.Repeat([]byte{7}, 8192), 0o600)
		}, ErrCorruptStore},
		{"a missing index is refused", func(t *testing.T, d string) {
			os.RemoveAll(filepath.Join(d, filepath.Base(cur), "index"))
		}, fs.ErrNotExist},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			c.setup(t, d)
			err := Dump(d, new(bytes.Buffer))
			if err == nil || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("Dump: %v, want an error wrapping %v", err, c.is)
			}
			if _, serr := os.Stat(filepath.Join(d, filepath.Base(cur), "projection.db")); c.name == "a missing store is refused without creating one" && serr == nil {
				t.Error("Dump created the store")
			}
		})
	}
}

// treeHash hashes every file's path, size and content under dir.
func treeHash(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// dumpDiff shows the first lines where two dumps differ.
func dumpDiff(got, want []string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < max(len(got), len(want)) && n < 6; i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			fmt.Fprintf(&b, "line %d:\n  got  %s\n  want %s\n", i, g, w)
			n++
		}
	}
	return b.String()
}
