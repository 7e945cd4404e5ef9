package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/record"
)

// ImportResult is the outcome of Store.Import. Counts are records: the
// header record counts as one.
type ImportResult struct {
	// Stored is how many records this call published.
	Stored int
	// AlreadyPresent is how many of the log's records were found stored
	// already (a prefix of the log, header record first).
	AlreadyPresent int
	// Continued reports that an earlier partial import (a stored proper
	// prefix) was completed by this call.
	Continued bool
	// LastSeq is the stream sequence of the last record this call stored,
	// 0 when it stored none.
	LastSeq uint64
}

// Import publishes a complete log written elsewhere — a JSONL file of the
// original harness, another deployment's export — as session hdr's
// records: the header record, then events with seq contiguous from 0.
//
// It is liberal where Append is strict: strict in what we write, liberal in
// what a shared corpus reads
// (docs/events-and-surfaces.md#strict-and-lenient-validation). The log is
// validated with the lenient fold the projector reads with, so older message
// shapes of real logs are taken and exactly what the projector would quarantine
// is refused. Records are stored as given (hdr.Raw and each event's Raw;
// encoded from the fields when Raw is empty).
//
// A log whose every record is stored already is present: nothing is
// published, not even a lease (the session does not turn live). Otherwise
// Import holds the session's write lease while it compares and publishes,
// so no harness can append in between, and compares the subject's stored
// records with the log again: all of them equal means already present; a stored proper prefix is continued after its last record;
// anything else is a conflict. The rest goes through the Store's publisher,
// as Append does: the same msg ids, expected-last-subject-sequence chaining,
// atomic batches from WithAtomicMin records, and bounded retries of
// transient failures whose ambiguous outcomes are settled by checking what
// is stored. When the retries run out the outcome of the last records is
// unknown; importing the same log again settles it (the stored prefix is
// continued, nothing is stored twice).
//
// Errors: ErrInvalidArgument (bad header or event; a fold refusal wraps its
// *fold.ValidationError, which names the seq and rule; nothing was stored),
// ErrAlreadyOwned (a writer holds the session's lease), ErrLogConflict (the
// stored records are not a prefix of the log; nothing was stored),
// ErrOwnershipLost (another writer changed the log during the import, past
// the lease), bus failures. The result counts what was stored even on failure.
func (s *Store) Import(ctx context.Context, hdr dshq.HeaderRecord, events []dshq.Event) (ImportResult, error) {
	id, recs, err := s.importRecords(hdr, events)
	if err != nil {
		return ImportResult{}, err
	}
	tok, _ := record.SubjectToken(id) // validated by importRecords
	subject := s.subjectOf(tok)
	// A log stored whole already is present without taking the lease:
	// storing nothing writes nothing, so the session does not turn live
	// for a moment in the feed.
	if stored, err := s.records(ctx, subject); err != nil {
		return ImportResult{}, fmt.Errorf("import session %q: %w", id, err)
	} else if n, conflict := storedPrefix(stored, recs); conflict == "" && n == len(recs) {
		return ImportResult{AlreadyPresent: n}, nil
	}
	l, err := s.acquire(ctx, id, tok)
	if err != nil {
		return ImportResult{}, err
	}
	defer func() {
		// A release that fails leaves the key to age out after its TTL.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultCloseTimeout)
		defer cancel()
		_ = l.release(rctx)
	}()
	stored, err := s.records(ctx, subject)
	if err != nil {
		return ImportResult{}, fmt.Errorf("import session %q: %w", id, err)
	}
	n, conflict := storedPrefix(stored, recs)
	if conflict != "" {
		return ImportResult{}, errorf(ErrLogConflict, id, "session %q is already stored with different content (%s)", id, conflict)
	}
	res := ImportResult{AlreadyPresent: n}
	if n == len(recs) {
		return res, nil
	}
	var prev uint64
	if n > 0 {
		prev = stored[n-1].Seq
	}
	err = s.pub.publish(ctx, subject, prev, recs[n:], s.opts.atomicMin, func(i int, seq uint64) {
		res.Stored = i + 1
		if seq != 0 {
			res.LastSeq = seq
		}
	})
	res.Continued = n > 0 && res.Stored > 0
	switch {
	case err != nil && errors.Is(err, ErrMsgIDInUse):
		return res, wrapf(ErrMsgIDInUse, id, err, "import session %q: %v", id, err)
	case err != nil && isConflict(err):
		l.markLost()
		return res, wrapf(ErrOwnershipLost, id, err,
			"session %q was written by someone else during the import; import again to reconcile", id)
	case err != nil:
		return res, fmt.Errorf("import session %q: %w (importing again settles what was stored)", id, err)
	}
	return res, nil
}

// importRecords checks an imported log with the lenient fold and returns its
// session id and the records to publish, header record first.
func (s *Store) importRecords(hdr dshq.HeaderRecord, events []dshq.Event) (string, []outRecord, error) {
	raw := hdr.Raw
	if len(raw) == 0 {
		enc, err := record.EncodeHeader(hdr)
		if err != nil {
			return "", nil, wrapf(ErrInvalidArgument, hdr.Header.ID, err, "import session %q: %v", hdr.Header.ID, err)
		}
		raw = enc
	}
	back, err := record.ParseHeader(raw)
	if err != nil {
		return "", nil, wrapf(ErrInvalidArgument, hdr.Header.ID, err, "import session %q: header record: %v", hdr.Header.ID, err)
	}
	id := back.Header.ID
	if hdr.Header.ID != "" && hdr.Header.ID != id {
		return "", nil, errorf(ErrInvalidArgument, id,
			"import session %q: the header record has id %q", hdr.Header.ID, id)
	}
	tok, err := record.SubjectToken(id)
	if err != nil {
		return "", nil, wrapf(ErrInvalidArgument, id, err, "import session: %v", err)
	}
	if max := s.nc.MaxPayload(); int64(len(raw))+recordHeaderRoom > max {
		return "", nil, errorf(ErrInvalidArgument, id,
			"import session %q: the header record is %d bytes, over the bus's maximum payload of %d bytes", id, len(raw), max-recordHeaderRoom)
	}
	back.Raw = raw
	st := fold.New(back, fold.Lenient)
	recs := make([]outRecord, 0, len(events)+1)
	recs = append(recs, outRecord{msgID: headerMsgID(s.logKey(tok)), data: raw})
	for i, e := range events {
		ev, err := s.checkEvent(st, id, "import", i, e, int64(i))
		if err != nil {
			return "", nil, err
		}
		recs = append(recs, outRecord{msgID: eventMsgID(s.logKey(tok), ev.Seq), data: ev.Raw})
	}
	return id, recs, nil
}

// storedPrefix compares a subject's stored records with the log's and
// returns how many of the log's are stored, or why the stored records are
// not a prefix of the log's.
func storedPrefix(stored []Record, recs []outRecord) (int, string) {
	if len(stored) > len(recs) {
		return 0, fmt.Sprintf("%d events stored, %d in the log", len(stored)-1, len(recs)-1)
	}
	for i, r := range stored {
		if bytes.Equal(r.Data, recs[i].data) {
			continue
		}
		if i == 0 {
			return 0, "different header"
		}
		return 0, fmt.Sprintf("event %d differs", i-1)
	}
	return len(stored), ""
}
