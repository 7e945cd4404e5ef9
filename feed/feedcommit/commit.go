// Package feedcommit turns the projector's commits into live feed messages
// (package feed), re-derives the commit of a range of records from a projection
// snapshot (Rederive), and publishes a projector's commits without a gap or a
// repeat across restarts and rebuilds (Feeder,
// docs/protocol.md#55-publishing-and-the-projectors-rule). It is separate from
// feed so that a subscriber links only NATS and the vocabulary, not the
// projector's stores.
package feedcommit

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/record"
)

// DefaultMaxMessageBytes bounds the JSON of one feed message: NATS's
// default maximum payload (1 MiB) less room for the headers.
const DefaultMaxMessageBytes = 1<<20 - 4<<10

// Lookup is what FromCommit needs to know beyond a Commit: the sessions a
// commit names without their header (reclassifications, titles, leases,
// quarantined records), and whether a new session is live.
// projection.Snapshot implements it; FromCommit runs on a snapshot taken
// at the commit's generation.
type Lookup interface {
	Session(id string) (dshq.SessionInfo, bool)
	IsLive(id string) bool
}

var _ Lookup = projection.Snapshot(nil)

// FromCommitOption configures FromCommit.
type FromCommitOption func(*fromConfig)

type fromConfig struct {
	maxBytes int
}

// WithMaxMessageBytes sets the largest message FromCommit produces
// (DefaultMaxMessageBytes). Set it to the connection's maximum payload less
// 4 KiB when that is not 1 MiB.
func WithMaxMessageBytes(n int) FromCommitOption {
	return func(c *fromConfig) { c.maxBytes = n }
}

// FromCommit turns one projector commit into its feed messages, in the
// order they are published: the commit's records in stream order (session
// headers, events, quarantined records), then surface changes, title
// changes and lease changes. Every message carries c.Generation and
// c.Epoch. A commit that changed nothing (the empty commit of a rebuild
// swap) has no messages; the next message carries the new epoch.
//
// An event message larger than the size limit first loses its raw record
// (rawOmitted; read it with events.read), then has its text cut
// (textTruncated). A quarantine message carries only a capped excerpt of
// the refused record. A lease change of a subject with no projected
// session is not published: the session message carries live when its
// header arrives. A surface or title change of a session the commit and
// look do not know is an error (the projector's state is inconsistent).
func FromCommit(c projection.Commit, look Lookup, opts ...FromCommitOption) ([]feed.Message, error) {
	cfg := fromConfig{maxBytes: DefaultMaxMessageBytes}
	for _, o := range opts {
		o(&cfg)
	}
	b := &builder{c: c, look: look, cfg: cfg, where: map[string]address{}}
	for _, s := range c.Sessions {
		b.where[s.Header.Header.ID] = address{ws: record.WorkspaceKey(s.Header.Header.Cwd), tok: s.Token}
	}
	for _, e := range c.Events {
		if _, ok := b.where[e.SessionID]; !ok {
			b.where[e.SessionID] = address{ws: e.Workspace, tok: e.Token}
		}
	}
	steps := []func() error{b.records, b.surfaces, b.titles, b.leases}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return b.out, nil
}

type address struct{ ws, tok string }

type builder struct {
	c     projection.Commit
	look  Lookup
	cfg   fromConfig
	where map[string]address
	out   []feed.Message
}

// resolve returns the address of a session id.
func (b *builder) resolve(id string) (address, bool) {
	if a, ok := b.where[id]; ok {
		return a, true
	}
	if b.look == nil {
		return address{}, false
	}
	info, ok := b.look.Session(id)
	if !ok {
		return address{}, false
	}
	tok := info.Token
	if tok == "" {
		tok, _ = record.SubjectToken(id)
	}
	a := address{ws: record.WorkspaceKey(info.Header.Header.Cwd), tok: tok}
	b.where[id] = a
	return a, true
}

func (b *builder) message(k feed.Kind, a address, id string) feed.Message {
	return feed.Message{V: feed.Version, Kind: k, Generation: b.c.Generation, Workspace: a.ws, Token: a.tok, SessionID: id, Epoch: b.c.Epoch}
}

// records emits the session, event and quarantine messages in stream order.
func (b *builder) records() error {
	type rec struct {
		seq  uint64
		emit func() error
	}
	var recs []rec
	for _, s := range b.c.Sessions {
		recs = append(recs, rec{s.HeaderSeq, func() error { return b.session(s) }})
	}
	for _, e := range b.c.Events {
		recs = append(recs, rec{e.StreamSeq, func() error { return b.event(e) }})
	}
	for _, q := range b.c.Quarantined {
		recs = append(recs, rec{q.StreamSeq, func() error { return b.quarantine(q) }})
	}
	slices.SortStableFunc(recs, func(x, y rec) int { return cmp.Compare(x.seq, y.seq) })
	for _, r := range recs {
		if err := r.emit(); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) session(s dshq.SessionInfo) error {
	h := s.Header.Header
	h.Version = dshq.FormatVersion2
	a := b.where[h.ID]
	if a.tok == "" {
		tok, err := record.SubjectToken(h.ID)
		if err != nil {
			return err
		}
		a.tok = tok
		b.where[h.ID] = a
	}
	m := b.message(feed.KindSession, a, h.ID)
	live := b.look != nil && b.look.IsLive(h.ID)
	m.Session = &feed.SessionBody{
		SessionRecord:       dshq.SessionRecord{Header: h, Live: live, Persisted: true},
		InheritedEventCount: s.Header.InheritedEventCount,
	}
	return b.emit(m)
}

func (b *builder) event(e projection.CommittedEvent) error {
	a := address{ws: e.Workspace, tok: e.Token}
	if a.tok == "" {
		tok, err := record.SubjectToken(e.SessionID)
		if err != nil {
			return err
		}
		a.tok = tok
	}
	m := b.message(feed.KindEvent, a, e.SessionID)
	m.Event = &feed.EventBody{EventRecord: e.EventRecord, Text: e.Text, Invalid: e.Invalid, RawBytes: len(e.Raw)}
	if json.Valid(e.Raw) {
		m.Event.Raw = json.RawMessage(e.Raw)
	} else {
		m.Event.RawOmitted = true
	}
	if err := fitEvent(&m, b.cfg.maxBytes); err != nil {
		return err
	}
	return b.emit(m)
}

func (b *builder) quarantine(q projection.QuarantineRecord) error {
	var m feed.Message
	if a, ok := b.resolve(q.SessionID); q.SessionID != "" && ok {
		m = b.message(feed.KindQuarantine, a, q.SessionID)
	} else if tok, err := record.SubjectToken(q.SessionID); q.SessionID != "" && err == nil {
		m = b.message(feed.KindQuarantine, address{ws: feed.QuarantineWorkspace, tok: tok}, q.SessionID)
	} else {
		m = b.message(feed.KindQuarantine, address{ws: feed.QuarantineWorkspace, tok: quarantineToken(q.Subject)}, "")
	}
	m.Quarantine = &feed.QuarantineBody{
		StreamSeq:    q.StreamSeq,
		Subject:      capText(q.Subject, feed.MaxSubjectBytes),
		Reason:       capText(q.Reason, feed.MaxReasonBytes),
		Excerpt:      capText(string(q.Raw[:min(len(q.Raw), 4*feed.MaxExcerptBytes)]), feed.MaxExcerptBytes),
		RawBytes:     len(q.Raw),
		RawTruncated: q.Truncated,
	}
	return b.emit(m)
}

func (b *builder) surfaces() error {
	for _, r := range b.c.Reclassified {
		a, ok := b.resolve(r.SessionID)
		if !ok {
			return dshq.Errorf(dshq.CodeSessionNotFound, "feed: surface change of event %d of unknown session %q", r.Seq, r.SessionID)
		}
		m := b.message(feed.KindSurface, a, r.SessionID)
		body := &feed.SurfaceBody{Seq: r.Seq, To: string(r.Surface), ReplacedBy: r.ReplacedBy}
		switch r.Surface {
		case "":
			body.To = feed.SurfaceInvalid
		case dshq.SurfaceShadowed:
			// Only current surface nodes can be replaced
			// (docs/events-and-surfaces.md#replacing-a-range).
			body.From = string(dshq.SurfaceCurrent)
		}
		m.Surface = body
		if err := b.emit(m); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) titles() error {
	for _, t := range b.c.Titles {
		a, ok := b.resolve(t.SessionID)
		if !ok {
			return dshq.Errorf(dshq.CodeSessionNotFound, "feed: title change of unknown session %q", t.SessionID)
		}
		m := b.message(feed.KindTitle, a, t.SessionID)
		title := t.Title
		m.Title = &title
		if err := b.emit(m); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) leases() error {
	for _, l := range b.c.Leases {
		if l.SessionID == "" {
			continue
		}
		a, ok := b.resolve(l.SessionID)
		if !ok {
			continue // a leased subject whose header is not (validly) projected
		}
		m := b.message(feed.KindLease, a, l.SessionID)
		m.Lease = &feed.LeaseBody{Live: l.Live}
		if err := b.emit(m); err != nil {
			return err
		}
	}
	return nil
}

// emit validates m and appends it.
func (b *builder) emit(m feed.Message) error {
	if err := m.Validate(); err != nil {
		return err
	}
	b.out = append(b.out, m)
	return nil
}

// fitEvent keeps an event message within max bytes: first without its raw
// record, then with the longest prefix of its text that fits.
func fitEvent(m *feed.Message, max int) error {
	if eventBound(m) <= max {
		return nil // the common case, without encoding the message to measure it
	}
	size := func() (int, error) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as feed.Encode
		err := enc.Encode(m)
		return buf.Len() - 1, err
	}
	n, err := size()
	if err != nil || n <= max {
		return err
	}
	m.Event.Raw, m.Event.RawOmitted = nil, true
	if n, err = size(); err != nil || n <= max {
		return err
	}
	text := m.Event.Text
	m.Event.Text, m.Event.TextTruncated = "", true
	if n, err = size(); err != nil {
		return err
	}
	if n > max {
		return dshq.Errorf(dshq.CodeReplyTooLarge, "feed: event %d of %q does not fit in %d bytes even without its raw record and text", m.Event.Seq, m.SessionID, max)
	}
	// Binary search for the longest prefix that fits (escaping makes the
	// JSON of a text longer than the text, by a varying factor).
	lo, hi := 0, len(text) // the prefix of length lo fits; hi does not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		m.Event.Text = capText(text, mid)
		if n, err = size(); err != nil {
			return err
		}
		if n <= max {
			lo = mid
		} else {
			hi = mid
		}
	}
	m.Event.Text = capText(text, lo)
	return nil
}

// eventBound is an upper bound of the JSON size of an event message: every
// string at most 6 bytes per byte (\u00XX), the raw record as it is, and a
// fixed allowance for the member names, numbers and punctuation.
func eventBound(m *feed.Message) int {
	e := m.Event
	strs := len(m.Workspace) + len(m.Token) + len(m.SessionID) + len(m.Epoch) +
		len(e.SessionID) + len(e.Type) + len(e.Surface) + len(e.Text)
	return 6*strs + len(e.Raw) + 512
}

// capText returns s as valid UTF-8 (invalid bytes replaced by U+FFFD), cut
// at a rune boundary to at most max bytes.
func capText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// quarantineToken returns the feed token for a refused record of no known
// session: the log subject's token (dsh.log.<token> or
// dsh.log.<tenant>.<token>) when the subject is a valid log subject (so
// dsh.feed.*.<token>.> still covers it), else feed.UnknownToken.
func quarantineToken(logSubject string) string {
	rest, ok := strings.CutPrefix(logSubject, dshq.LogSubjectPrefix)
	if !ok {
		return feed.UnknownToken
	}
	_, tok, err := record.SplitLogKey(rest)
	if err != nil {
		return feed.UnknownToken
	}
	return tok
}
