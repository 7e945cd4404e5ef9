package feedcommit

import (
	"cmp"
	"slices"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/record"
)

// Source is what Rederive reads; projection.Snapshot implements it.
type Source interface {
	Lookup
	Epoch() string
	SessionsByCreated(afterKey []byte, fn func(dshq.SessionInfo) bool) error
	Event(id string, seq int64) (dshq.StoredEvent, bool)
	Events(id string, fromSeq int64, fn func(dshq.StoredEvent) bool) error
	Quarantined(afterSeq uint64, fn func(projection.QuarantineRecord) bool) error
}

var _ Source = projection.Snapshot(nil)

// Rederive rebuilds, from a projection snapshot at generation through or
// later, the commit of the session stream records after generation
// `after` up to `through`, as one commit at generation through: the
// projector's start-up repair of the feed (see feed.Publisher.Checkpoint).
// FromCommit of the result yields the messages the original commits
// yielded, with the same message ids, except that
//
//   - lease changes are not re-derived (publish the live set instead);
//   - of several titles a session got in the range only the latest is
//     re-derived;
//   - contents reflect the snapshot: an event's surface, a session's live.
//
// It reads every session's summary (the sessions untouched since `after`
// are skipped without reading their events).
func Rederive(src Source, after, through uint64) (projection.Commit, error) {
	c := projection.Commit{Generation: through, Epoch: src.Epoch()}
	var failed error
	err := src.SessionsByCreated(nil, func(s dshq.SessionInfo) bool {
		if s.HeaderSeq > after && s.HeaderSeq <= through {
			c.Sessions = append(c.Sessions, s)
		}
		if s.UpdatedAt <= after {
			return true
		}
		failed = rederiveEvents(src, s, after, through, &c)
		return failed == nil
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		return projection.Commit{}, err
	}
	err = src.Quarantined(after, func(q projection.QuarantineRecord) bool {
		if q.StreamSeq > through {
			return false
		}
		c.Quarantined = append(c.Quarantined, q)
		return true
	})
	if err != nil {
		return projection.Commit{}, err
	}
	slices.SortStableFunc(c.Sessions, func(x, y dshq.SessionInfo) int { return cmp.Compare(x.HeaderSeq, y.HeaderSeq) })
	slices.SortStableFunc(c.Events, func(x, y projection.CommittedEvent) int { return cmp.Compare(x.StreamSeq, y.StreamSeq) })
	return c, nil
}

// rederiveEvents adds a session's events in range, the reclassifications
// they caused and its title if set in range.
func rederiveEvents(src Source, s dshq.SessionInfo, after, through uint64, c *projection.Commit) error {
	id := s.Header.Header.ID
	tok := s.Token
	if tok == "" {
		var err error
		if tok, err = record.SubjectToken(id); err != nil {
			return err
		}
	}
	ws := record.WorkspaceKey(s.Header.Header.Cwd)
	from := firstAfter(src, s, after)
	return src.Events(id, from, func(e dshq.StoredEvent) bool {
		if e.StreamSeq > through {
			return false
		}
		rec := e.Record
		rec.SessionID = id
		c.Events = append(c.Events, projection.CommittedEvent{
			SearchDocument: dshq.SearchDocument{EventRecord: rec, Text: e.Text},
			Token:          tok, Workspace: ws, Invalid: e.Invalid, Raw: e.Raw, StreamSeq: e.StreamSeq,
		})
		for _, x := range e.ReplacedEventSeqs {
			by := rec.Seq
			c.Reclassified = append(c.Reclassified, projection.Reclassification{SessionID: id, Seq: x, Surface: dshq.SurfaceShadowed, ReplacedBy: &by})
		}
		if s.Title != nil && s.Title.EventSeq == rec.Seq {
			c.Titles = append(c.Titles, projection.TitleChange{SessionID: id, Title: *s.Title})
		}
		return true
	})
}

// firstAfter returns the seq of the session's first event whose stream
// sequence is after `after` (events are stored in stream order).
func firstAfter(src Source, s dshq.SessionInfo, after uint64) int64 {
	lo, hi := int64(0), s.EventCount
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, ok := src.Event(s.Header.Header.ID, mid)
		if !ok || e.StreamSeq > after {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
