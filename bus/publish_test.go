package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// A publish whose acknowledgement was lost is retried: the retry must find
// the records already stored and store nothing twice, whether they went as
// one record or as an atomic batch.
func TestPublisher_ReplayIsRecognisedAsStored(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("a replay of %d record(s) returns the stored sequence", n), func(t *testing.T) {
			subject := fmt.Sprintf("%sreplay-%d", dshq.LogSubjectPrefix, n)
			recs := make([]outRecord, n)
			for i := range recs {
				recs[i] = outRecord{msgID: fmt.Sprintf("replay-%d:%d", n, i), data: []byte(fmt.Sprintf(`{"n":%d}`, i))}
			}
			first, err := s.pub.publishChunk(ctx, subject, 0, recs)
			if err != nil {
				t.Fatal(err)
			}
			before := streamMsgs(t, s)
			again, err := s.pub.publishChunk(ctx, subject, 0, recs)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if again != first {
				t.Fatalf("replay returned %d, first publish %d", again, first)
			}
			if got := streamMsgs(t, s); got != before {
				t.Fatalf("replay stored records: %d → %d", before, got)
			}
		})
	}
	t.Run("a different record at the same position is a permanent conflict", func(t *testing.T) {
		subject := dshq.LogSubjectPrefix + "clash"
		if _, err := s.pub.publishChunk(ctx, subject, 0, []outRecord{{msgID: "clash:0", data: []byte(`{"a":1}`)}}); err != nil {
			t.Fatal(err)
		}
		_, err := s.pub.publishChunk(ctx, subject, 0, []outRecord{{msgID: "clash:0x", data: []byte(`{"b":2}`)}})
		if !isConflict(err) {
			t.Fatalf("got %v, want a conflict", err)
		}
	})
}

// An append whose outcome was unknown is settled by the next write: the
// records the server did store are kept, nothing is published twice.
func TestHandle_UnknownOutcomeIsSettled(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	for _, stored := range []int{0, 2, 3} {
		t.Run(fmt.Sprintf("with %d of 3 records stored the handle continues after them", stored), func(t *testing.T) {
			id := fmt.Sprintf("unsure-%d", stored)
			h, err := s.Create(ctx, header(id))
			if err != nil {
				t.Fatal(err)
			}
			defer mustClose(t, h)
			evs := cmds(t, 0, 3)
			recs := []outRecord{{msgID: id + ":h", data: h.headerRaw}}
			for _, e := range evs {
				recs = append(recs, outRecord{msgID: fmt.Sprintf("%s:%d", id, e.Seq), data: e.Raw})
			}
			// The server stores a prefix; the writer never hears back.
			if stored > 0 {
				if err := s.pub.publish(ctx, h.subject, 0, recs[:stored+1], 0, func(int, uint64) {}); err != nil {
					t.Fatal(err)
				}
			}
			h.unsure = &pendingAppend{recs: recs, events: evs, off: 1}
			if h.NextSeq() != 0 {
				t.Fatal("books moved before settling")
			}
			if _, err := h.Append(ctx, cmds(t, int64(stored), 1)); err != nil {
				t.Fatalf("append after settling: %v", err)
			}
			got, err := h.Read(ctx, 0, -1)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != stored+1 {
				t.Fatalf("read %d events, want %d", len(got), stored+1)
			}
		})
	}
	t.Run("a log that ends with another writer's record is ownership lost", func(t *testing.T) {
		h, err := s.Create(ctx, header("unsure-foreign"))
		if err != nil {
			t.Fatal(err)
		}
		defer mustClose(t, h)
		if err := h.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		foreign := cmds(t, 0, 1)[0]
		if err := s.pub.publish(ctx, h.subject, h.lastStreamSeq, []outRecord{{msgID: "unsure-foreign:0", data: []byte(`{"type":"command/run","seq":0,"time":5,"data":{}}`)}}, 0, func(int, uint64) {}); err != nil {
			t.Fatal(err)
		}
		h.unsure = &pendingAppend{recs: []outRecord{{msgID: "unsure-foreign:0", data: foreign.Raw}}, events: []dshq.Event{foreign}, off: 0}
		_, err = h.Append(ctx, cmds(t, 0, 1))
		wantKind(t, err, ErrOwnershipLost, "ownership lost")
	})
}

func TestStoreFlush_NamesFailingSessions(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	ok, err := s.Create(ctx, header("flush-ok"))
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, ok)
	bad, err := s.Create(ctx, header("flush-bad"))
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, bad)
	bad.lease.markLost()
	err = s.Flush(ctx)
	var fe *FlushError
	if !errors.As(err, &fe) || len(fe.Failed) != 1 || !errors.Is(err, ErrOwnershipLost) || !strings.Contains(err.Error(), `"flush-bad"`) {
		t.Fatalf("got %v, want a flush error naming flush-bad", err)
	}
	if snap, err := newStore(t, e).Stat(context.Background(), "flush-ok"); err != nil || snap == nil {
		t.Fatalf("the healthy handle was not flushed: %v %v", snap, err)
	}
}

// A replicated stream's leader refuses a publish with the constant wrong
// last sequence (10164) while another message of the subject is in flight
// between its proposal and its application, which includes the writer's own
// previous record for a moment after its acknowledgement: that is retried,
// not taken for another writer's record (which is the 10071 refusal).
func TestPublisher_InFlightRefusalIsRetriedNotAConflict(t *testing.T) {
	refused := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Description: "wrong last sequence"}
	if isConflict(refused) || !isTransient(refused) {
		t.Errorf("10164: conflict %v, transient %v; want a transient failure", isConflict(refused), isTransient(refused))
	}
	wrong := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence: 7"}
	if !isConflict(wrong) || isTransient(wrong) {
		t.Errorf("10071: conflict %v, transient %v; want a conflict", isConflict(wrong), isTransient(wrong))
	}
	if isWrongLastSequence(refused) || !inFlight(refused) {
		t.Errorf("a lease write refused as in flight is not a held key")
	}
}

// What a conflict says of the subject's last sequence on the leader bounds
// what a confirming lookup must see: a wrong last sequence refusal names it
// (a duplicate acknowledgement names the record holding the msg id, maybe
// on another subject: no bound). A lookup behind it (a tenant's read from a
// replica that lags) is retried, not believed.
func TestPublisher_ConflictNamesTheLeadersLastSequence(t *testing.T) {
	for _, c := range []struct {
		err  error
		want uint64
	}{
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence: 4182"}, 4182},
		{fmt.Errorf("publish: %w", &duplicateAck{seq: 77}), 0},
		{&jetstream.APIError{Code: 400, ErrorCode: errCodeBatchDuplicate, Description: "batch duplicate"}, 0},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Description: "wrong last sequence"}, 0},
	} {
		if got := leaderLast(c.err); got != c.want {
			t.Errorf("leaderLast(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if !isConflict(&duplicateAck{seq: 1}) || !errors.Is(&duplicateAck{seq: 1}, errDuplicateAck) {
		t.Error("a duplicate acknowledgement is not a conflict")
	}
	if !isTransient(fmt.Errorf("%w: behind", errStaleReplica)) {
		t.Error("a stale replica's answer is not retried")
	}
}

// A refusal that says the subject ends before this writer's own
// acknowledged records cannot be the stream's: it comes from a former leader
// that resumed after a pause and still takes itself for the leader. It is
// retried (errStaleReplica), never reported as a conflict (which a handle
// takes for lost ownership); a refusal at or after them still is one. The
// real server here refuses as such a leader would: the writer believes its
// records reach further than the server holds.
func TestPublisher_RefusalBehindTheWritersOwnRecordsIsRetriedNotAConflict(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e, WithRetryMaxElapsed(200*time.Millisecond))
	subject := dshq.LogSubjectPrefix + "stale-leader"
	recs := []outRecord{{msgID: "stale-leader:h", data: []byte(`{"h":1}`)}}
	last, err := s.pub.publishChunk(ctx, subject, 0, recs)
	if err != nil {
		t.Fatal(err)
	}
	before := streamMsgs(t, s)
	next := []outRecord{{msgID: "stale-leader:0", data: []byte(`{"e":0}`)}}
	_, err = s.pub.publishChunk(ctx, subject, last+3, next)
	if isConflict(err) || !errors.Is(err, errStaleReplica) {
		t.Fatalf("a refusal behind the writer's records: %v; want a retried stale answer, not a conflict", err)
	}
	if got := streamMsgs(t, s); got != before {
		t.Fatalf("stored %d records", got-before)
	}
	if _, err := s.pub.publishChunk(ctx, subject, 0, next); !isConflict(err) {
		t.Fatalf("a refusal after the writer's records: %v; want a conflict", err)
	}
}

// Past the stream's duplicate window the server no longer knows a record's
// msg id (DefaultDuplicates is only four times the retries' bound): a replay
// is then refused by its expected last subject sequence, and still
// recognised as stored, never stored twice.
func TestPublisher_ReplayPastTheDuplicateWindowIsRecognisedAsStored(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	const window = 100 * time.Millisecond // the server's minimum
	s := newStore(t, e, WithStreamConfig(StreamConfig{Name: "DSH_SHORT_WINDOW", Duplicates: window}))
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d record(s)", n), func(t *testing.T) {
			subject := fmt.Sprintf("%swindow-%d", dshq.LogSubjectPrefix, n)
			recs := make([]outRecord, n)
			for i := range recs {
				recs[i] = outRecord{msgID: fmt.Sprintf("window-%d:%d", n, i), data: []byte(fmt.Sprintf(`{"n":%d}`, i))}
			}
			first, err := s.pub.publishChunk(ctx, subject, 0, recs)
			if err != nil {
				t.Fatal(err)
			}
			// The window has passed once the server stores a probe
			// again under the msg id it deduplicated before.
			probe := func() bool {
				m := &nats.Msg{Subject: dshq.LogSubjectPrefix + "probe", Header: nats.Header{}, Data: []byte(`{}`)}
				m.Header.Set(hdrMsgID, fmt.Sprintf("probe-%d", n))
				ack, err := s.js.PublishMsg(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				return !ack.Duplicate
			}
			probe()
			deadline := time.Now().Add(30 * time.Second)
			for !probe() {
				if time.Now().After(deadline) {
					t.Fatal("the duplicate window never passed")
				}
			}
			before := streamMsgs(t, s)
			again, err := s.pub.publishChunk(ctx, subject, 0, recs)
			if err != nil {
				t.Fatalf("replay past the window: %v", err)
			}
			if again != first {
				t.Fatalf("replay returned %d, first publish %d", again, first)
			}
			if got := streamMsgs(t, s); got != before {
				t.Fatalf("replay stored records: %d → %d", before, got)
			}
		})
	}
}
