package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/record"
)

// importLog returns the header record of id (as a file would hold it: Raw
// set) and n command/run events.
func importLog(t testing.TB, id string, n int) (dshq.HeaderRecord, []dshq.Event) {
	t.Helper()
	hrec, raw, err := buildHeader(header(id), createOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hrec.Raw = raw
	return hrec, cmds(t, 0, n)
}

// wantRecords fails unless session id's stored records are exactly hdr and
// events, with the contract's msg ids, and the subject holds nothing else.
func wantRecords(t testing.TB, s *Store, hdr dshq.HeaderRecord, events []dshq.Event) {
	t.Helper()
	id := hdr.Header.ID
	got, err := s.Records(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events)+1 {
		t.Fatalf("session %s: %d records stored, want %d", id, len(got), len(events)+1)
	}
	tok, _ := record.SubjectToken(id)
	if string(got[0].Data) != string(hdr.Raw) || got[0].MsgID != tok+":h" {
		t.Errorf("header stored as %s %s", got[0].MsgID, got[0].Data)
	}
	for i, e := range events {
		r := got[i+1]
		if string(r.Data) != string(e.Raw) || r.MsgID != fmt.Sprintf("%s:%d", tok, i) || r.Seq <= got[i].Seq {
			t.Fatalf("event %d stored as %s at %d: %s", i, r.MsgID, r.Seq, r.Data)
		}
	}
	snap, err := s.Stat(context.Background(), id)
	if err != nil || snap == nil || snap.EventCount != int64(len(events)) || snap.Live {
		t.Fatalf("stat %+v, %v; want %d events, not live (a duplicate would be counted)", snap, err, len(events))
	}
}

func TestImport_Outcomes(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)

	for _, c := range []struct {
		name      string
		atomicMin int
		events    int
	}{
		{"a fresh log of a few events is stored record by record", DefaultAtomicMin, 5},
		{"a fresh log of many events is stored in atomic batches", DefaultAtomicMin, 2*MaxAtomicBatch + 10},
		{"a fresh log of many events is stored record by record when batches are off", 0, 40},
		{"a header-only log is stored as its header record", DefaultAtomicMin, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t, e, WithAtomicMin(c.atomicMin))
			hdr, events := importLog(t, fmt.Sprintf("fresh-%d-%d", c.atomicMin, c.events), c.events)
			res, err := st.Import(ctx, hdr, events)
			if err != nil {
				t.Fatal(err)
			}
			if res.Stored != c.events+1 || res.AlreadyPresent != 0 || res.Continued || res.LastSeq == 0 {
				t.Fatalf("result %+v", res)
			}
			wantRecords(t, st, hdr, events)
			last, err := st.lastSeq(ctx, dshq.LogSubjectPrefix+hdr.Header.ID)
			if err != nil || last != res.LastSeq {
				t.Errorf("LastSeq %d, the subject ends at %d (%v)", res.LastSeq, last, err)
			}
		})
	}

	t.Run("a log stored already is reported present and nothing is stored", func(t *testing.T) {
		hdr, events := importLog(t, "present", 7)
		if _, err := s.Import(ctx, hdr, events); err != nil {
			t.Fatal(err)
		}
		before := streamMsgs(t, s)
		res, err := s.Import(ctx, hdr, events)
		if err != nil || res != (ImportResult{AlreadyPresent: 8}) {
			t.Fatalf("result %+v, %v", res, err)
		}
		if got := streamMsgs(t, s); got != before {
			t.Errorf("stream grew from %d to %d records", before, got)
		}
	})

	t.Run("a stored prefix is continued after its last record", func(t *testing.T) {
		for _, stored := range []int{0, 1, 4} {
			hdr, events := importLog(t, fmt.Sprintf("partial-%d", stored), 6)
			if _, err := s.Import(ctx, hdr, events[:stored]); err != nil {
				t.Fatal(err)
			}
			res, err := s.Import(ctx, hdr, events)
			if err != nil || res.Stored != 6-stored || res.AlreadyPresent != stored+1 || !res.Continued {
				t.Fatalf("after %d events: result %+v, %v", stored, res, err)
			}
			wantRecords(t, s, hdr, events)
		}
	})

	t.Run("a session created by a harness is continued by an import of its longer log", func(t *testing.T) {
		hdr, events := importLog(t, "harness-then-import", 5)
		h, err := s.Create(ctx, hdr.Header)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Append(ctx, events[:2]); err != nil {
			t.Fatal(err)
		}
		mustClose(t, h)
		res, err := s.Import(ctx, hdr, events)
		if err != nil || res.Stored != 3 || !res.Continued {
			t.Fatalf("result %+v, %v", res, err)
		}
		wantRecords(t, s, hdr, events)
	})

	for _, c := range []struct {
		name   string
		mutate func(hdr dshq.HeaderRecord, events []dshq.Event) (dshq.HeaderRecord, []dshq.Event)
		detail string
	}{
		{"a stored log with a different event is a conflict", func(h dshq.HeaderRecord, evs []dshq.Event) (dshq.HeaderRecord, []dshq.Event) {
			evs[2] = ev(t, 2, "command/run", map[string]any{"command": "something else"})
			return h, evs
		}, "(event 2 differs)"},
		{"a stored log with a different header is a conflict", func(h dshq.HeaderRecord, evs []dshq.Event) (dshq.HeaderRecord, []dshq.Event) {
			h.Header.CreatedAt++
			raw, err := record.EncodeHeader(h)
			if err != nil {
				t.Fatal(err)
			}
			h.Raw = raw
			return h, evs
		}, "(different header)"},
		{"a stored log longer than the imported one is a conflict", func(h dshq.HeaderRecord, evs []dshq.Event) (dshq.HeaderRecord, []dshq.Event) {
			return h, evs[:2]
		}, "(4 events stored, 2 in the log)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("conflict-%d", len(c.detail))
			hdr, events := importLog(t, id, 4)
			if _, err := s.Import(ctx, hdr, events); err != nil {
				t.Fatal(err)
			}
			before := streamMsgs(t, s)
			h2, evs2 := c.mutate(hdr, append([]dshq.Event(nil), events...))
			res, err := s.Import(ctx, h2, evs2)
			wantKind(t, err, ErrLogConflict, fmt.Sprintf("session %q is already stored with different content %s", id, c.detail))
			if res != (ImportResult{}) || streamMsgs(t, s) != before {
				t.Errorf("result %+v; stream grew from %d to %d records", res, before, streamMsgs(t, s))
			}
			wantRecords(t, s, hdr, events)
		})
	}

	t.Run("a session whose lease a harness holds is refused, and imported once it is closed", func(t *testing.T) {
		hdr, events := importLog(t, "leased", 4)
		h, err := s.Create(ctx, hdr.Header)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Append(ctx, events[:1]); err != nil {
			t.Fatal(err)
		}
		other := newStore(t, e)
		res, err := other.Import(ctx, hdr, events)
		wantKind(t, err, ErrAlreadyOwned, `session "leased" is already owned by another writer`)
		if res != (ImportResult{}) {
			t.Errorf("result %+v", res)
		}
		mustClose(t, h)
		if res, err = other.Import(ctx, hdr, events); err != nil || res.Stored != 3 {
			t.Fatalf("after close: %+v, %v", res, err)
		}
		wantRecords(t, s, hdr, events)
	})

	t.Run("an import releases its lease, so a harness can open the session for writing", func(t *testing.T) {
		hdr, events := importLog(t, "released", 2)
		if _, err := s.Import(ctx, hdr, events); err != nil {
			t.Fatal(err)
		}
		h, err := s.Open(ctx, "released", Write)
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, h)
		if h.NextSeq() != 2 {
			t.Errorf("next seq %d, want 2", h.NextSeq())
		}
	})
}

// userMessageOld is a user/message in an older shape found in real logs: no
// id and no role. The projector reads it; a harness may not append it.
const userMessageOld = `{"source":{"kind":"user"},"content":[{"type":"text","text":"hello"}]}`

func TestImport_Validation(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)

	// Accepted by the lenient fold, refused by the strict one (Append).
	for _, c := range []struct {
		name, raw, rule string
	}{
		{"a user message without id and role is imported", `{"type":"user/message","seq":0,"time":1,"data":` + userMessageOld + `,"surfaceOp":"append"}`, fold.RuleMessageShape},
		{"a title with malformed messageSeqs is imported", `{"type":"session/title","seq":0,"time":1,"data":{"title":"t","messageSeqs":[-1],"source":{"kind":"user"}}}`, fold.RuleTitle},
	} {
		t.Run(c.name+" though a harness may not append it", func(t *testing.T) {
			id := "lenient-" + c.rule
			hdr, _ := importLog(t, id, 0)
			events := []dshq.Event{rawEvent(t, c.raw)}
			h, err := s.Create(ctx, hdr.Header)
			if err != nil {
				t.Fatal(err)
			}
			_, err = h.Append(ctx, events)
			mustClose(t, h)
			var verr *fold.ValidationError
			if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &verr) || verr.Rule != c.rule {
				t.Fatalf("strict append: %v, want rule %s", err, c.rule)
			}
			res, err := s.Import(ctx, hdr, events)
			if err != nil || res.Stored != 2 {
				t.Fatalf("import: %+v, %v", res, err)
			}
			wantRecords(t, s, hdr, events)
		})
	}

	t.Run("a version 0 header is imported as written", func(t *testing.T) {
		raw := `{"type":"session","version":0,"id":"v0-log","createdAt":1700000000000,"cwd":"/work/v0"}`
		hdr, err := record.ParseHeader([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		hdr.Raw = []byte(raw)
		events := cmds(t, 0, 3)
		if res, err := s.Import(ctx, hdr, events); err != nil || res.Stored != 4 {
			t.Fatalf("import: %+v, %v", res, err)
		}
		got, err := s.Records(ctx, "v0-log")
		if err != nil || string(got[0].Data) != raw {
			t.Fatalf("header stored as %q (%v)", got[0].Data, err)
		}
	})

	// Refused by the lenient fold too: the projector would quarantine them.
	for _, c := range []struct {
		name   string
		events func(t testing.TB) []dshq.Event
		seq    int64
		rule   string
	}{
		{"a gap in the seqs is refused", func(t testing.TB) []dshq.Event {
			evs := cmds(t, 0, 4)
			return append(evs[:2], evs[3])
		}, 3, fold.RuleSeq},
		{"a replace that cites no current node is refused", func(t testing.TB) []dshq.Event {
			return []dshq.Event{
				rawEvent(t, `{"type":"user/message","seq":0,"time":1,"data":`+userMessageOld+`,"surfaceOp":"append"}`),
				rawEvent(t, `{"type":"user/message","seq":1,"time":2,"data":`+userMessageOld+`,"surfaceOp":{"op":"replace","start":"0","end":0},"sourceEventSeqs":[0]}`),
			}
		}, 1, fold.RuleSurfaceOp},
	} {
		t.Run(c.name+" with the seq and rule, and nothing is stored", func(t *testing.T) {
			id := "refused-" + c.rule
			hdr, _ := importLog(t, id, 0)
			before := streamMsgs(t, s)
			res, err := s.Import(ctx, hdr, c.events(t))
			var verr *fold.ValidationError
			if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &verr) || verr.Rule != c.rule || verr.Seq != c.seq {
				t.Fatalf("got %v, want rule %s at seq %d", err, c.rule, c.seq)
			}
			if res != (ImportResult{}) || streamMsgs(t, s) != before {
				t.Errorf("result %+v, stream %d → %d records", res, before, streamMsgs(t, s))
			}
			if _, err := s.Records(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("records of a refused log: %v", err)
			}
		})
	}

	for _, c := range []struct {
		name string
		hdr  func() dshq.HeaderRecord
		msg  string
	}{
		{"a header record that is not a header is refused", func() dshq.HeaderRecord {
			return dshq.HeaderRecord{Header: dshq.Header{ID: "bad"}, Raw: []byte(`{"type":"session"}`)}
		}, `import session "bad": header record:`},
		{"a header whose fields name another id than its record is refused", func() dshq.HeaderRecord {
			h, _ := importLog(t, "record-id", 0)
			h.Header.ID = "field-id"
			return h
		}, `import session "field-id": the header record has id "record-id"`},
		{"an event whose fields disagree with its record is refused", func() dshq.HeaderRecord {
			h, _ := importLog(t, "disagree", 0)
			return h
		}, `raw record (type "command/run", seq 0) differs from its fields`},
	} {
		t.Run(c.name, func(t *testing.T) {
			events := cmds(t, 0, 1)
			events[0].Type = "other/type"
			if !strings.Contains(c.name, "event") {
				events = nil
			}
			_, err := s.Import(ctx, c.hdr(), events)
			wantKind(t, err, ErrInvalidArgument, c.msg)
		})
	}
}

// An import is cut by a server restart: the Store's publisher retries over
// the outage and the log ends up stored exactly once; importing it again
// finds it present.
func TestImport_SurvivesServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	for _, c := range []struct {
		name      string
		atomicMin int
		events    int
	}{
		{"record by record", 0, 4000},
		{"in atomic batches", 2, 6 * MaxAtomicBatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			srv, err := startFaultServer(dir, "0")
			if err != nil {
				t.Fatal(err)
			}
			url, port := srv.ClientURL(), faultPort(srv)
			defer func() { _ = srv.Shutdown(context.Background()) }()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()

			nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.ReconnectBufSize(64<<20))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			// Attempts shorter than the outage, so the restart makes the
			// publisher retry instead of waiting it out in one request.
			s, err := NewStore(ctx, nc, WithAtomicMin(c.atomicMin), WithAttemptTimeout(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			hdr, events := importLog(t, "restarted", c.events)
			type outcome struct {
				res ImportResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := s.Import(ctx, hdr, events)
				done <- outcome{res, err}
			}()

			// Restart once some records are stored and the import is still going.
			probe, err := srv.InProcessConn()
			if err != nil {
				t.Fatal(err)
			}
			defer probe.Close()
			ps, err := NewStore(ctx, probe)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "the import to store records", func() bool {
				last, err := ps.lastSeq(ctx, dshq.LogSubjectPrefix+"restarted")
				return err == nil && last > 1
			})
			select {
			case out := <-done:
				t.Fatalf("the import ended before the restart: %+v, %v", out.res, out.err)
			default:
			}
			if err := srv.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			// Keep the server down until the outage has made the publisher
			// retry, so the retry path is what the test checks.
			waitFor(t, 30*time.Second, "a publish attempt to be retried", func() bool { return s.pub.retries.Load() > 0 })
			srv, err = startFaultServer(dir, port)
			if err != nil {
				t.Fatalf("restart: %v", err)
			}

			var out outcome
			select {
			case out = <-done:
			case <-ctx.Done():
				t.Fatal("the import did not end")
			}
			if out.err != nil {
				t.Fatalf("import across the restart: %v (result %+v)", out.err, out.res)
			}
			if out.res.Stored+out.res.AlreadyPresent != c.events+1 {
				t.Errorf("result %+v, want %d records in all", out.res, c.events+1)
			}
			wantRecords(t, s, hdr, events)
			// Again with the default attempt timeout: the short one was
			// for the outage, and a loaded machine can take longer than it
			// to answer a read of the whole log.
			again, err := NewStore(ctx, nc)
			if err != nil {
				t.Fatal(err)
			}
			res, err := again.Import(ctx, hdr, events)
			if err != nil || res != (ImportResult{AlreadyPresent: c.events + 1}) {
				t.Errorf("second import: %+v, %v", res, err)
			}
		})
	}
}
