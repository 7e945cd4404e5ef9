package projection

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/index"
	"github.com/dshq/dshq/record"
)

// snapshot implements Snapshot over one bbolt read transaction.
type snapshot struct {
	tx          *bolt.Tx
	gen         uint64
	epoch       string
	live        map[string]bool // subject tokens whose lease is held
	liveVersion uint64
	index       *index.Index
}

func (s *snapshot) Generation() uint64 { return s.gen }
func (s *snapshot) Epoch() string      { return s.epoch }

// Lineage is the lineage of the stream the snapshot's store records.
func (s *snapshot) Lineage() string {
	var id StreamIdentity
	if b := s.tx.Bucket(bucketMeta).Get(metaStream); b != nil {
		_ = json.Unmarshal(b, &id) // a garbled record fails the store's open
	}
	return lineageOf(id, s.epoch)
}
func (s *snapshot) LiveVersion() uint64 { return s.liveVersion }
func (s *snapshot) Index() *index.Index { return s.index }

func (s *snapshot) Session(id string) (dshq.SessionInfo, bool) {
	v, err := getSession(s.tx, id)
	if err != nil || v == nil {
		return dshq.SessionInfo{}, false
	}
	return v.info(), true
}

// SessionsByCreated is SessionsInOrder in the created order, newest first.
func (s *snapshot) SessionsByCreated(afterKey []byte, fn func(dshq.SessionInfo) bool) error {
	return s.SessionsInOrder(dshq.OrderCreatedDesc, afterKey, fn)
}

func (s *snapshot) Children(parentID string) []string {
	prefix := sessionKey(parentID)
	var out []string
	c := s.tx.Bucket(bucketChildren).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		out = append(out, string(k[len(prefix)+8:]))
	}
	return out
}

func (s *snapshot) Event(id string, seq int64) (dshq.StoredEvent, bool) {
	if seq < 0 {
		return dshq.StoredEvent{}, false
	}
	sk := sessionKey(id)
	v, ok, err := getEvent(s.tx, sk, seq)
	if err != nil || !ok {
		return dshq.StoredEvent{}, false
	}
	return s.stored(id, sk, seq, v), true
}

func (s *snapshot) Events(id string, fromSeq int64, fn func(dshq.StoredEvent) bool) error {
	if fromSeq < 0 {
		fromSeq = 0
	}
	sk := sessionKey(id)
	c := s.tx.Bucket(bucketEvents).Cursor()
	for k, b := c.Seek(seqKey(sk, fromSeq)); k != nil && bytes.HasPrefix(k, sk); k, b = c.Next() {
		v, err := unmarshalEvent(b)
		if err != nil {
			return fmt.Errorf("session %q: %w", id, err)
		}
		seq := int64(binary.BigEndian.Uint64(k[len(sk):]))
		if !fn(s.stored(id, sk, seq, v)) {
			return nil
		}
	}
	return nil
}

func (s *snapshot) stored(id string, sk []byte, seq int64, v eventValue) dshq.StoredEvent {
	key := seqKey(sk, seq)
	e := dshq.StoredEvent{
		Record:    dshq.EventRecord{SessionID: id, Seq: seq, Type: v.Type, Time: v.Time, Surface: v.Surface},
		Raw:       v.Raw,
		Text:      v.Text,
		Invalid:   v.Invalid,
		StreamSeq: v.StreamSeq,
	}
	if b := s.tx.Bucket(bucketReplacedBy).Get(key); len(b) == 8 {
		r := int64(binary.BigEndian.Uint64(b))
		e.ReplacedBy = &r
	}
	e.ReplacedEventSeqs, _ = decodeSeqs(s.tx.Bucket(bucketReplaced).Get(key))
	e.Sources, _ = decodeSeqs(s.tx.Bucket(bucketSources).Get(key))
	c := s.tx.Bucket(bucketDerived).Cursor()
	for k, _ := c.Seek(key); k != nil && bytes.HasPrefix(k, key) && len(k) == len(key)+8; k, _ = c.Next() {
		e.Derived = append(e.Derived, int64(binary.BigEndian.Uint64(k[len(key):])))
	}
	return e
}

func (s *snapshot) SurfaceSeqs(id string) []int64 {
	sk := sessionKey(id)
	var out []int64
	c := s.tx.Bucket(bucketSurface).Cursor()
	for k, v := c.Seek(sk); k != nil && bytes.HasPrefix(k, sk) && len(k) == len(sk)+8; k, v = c.Next() {
		if len(v) == 8 {
			out = append(out, int64(binary.BigEndian.Uint64(v)))
		}
	}
	return out
}

func (s *snapshot) Closers(id string) ([]dshq.StoredEvent, error) {
	v, err := getSession(s.tx, id)
	if err != nil || v == nil || v.InvalidFrom >= 0 || s.live[v.key()] {
		return nil, err
	}
	b := s.tx.Bucket(bucketStates).Get([]byte(id))
	if b == nil {
		return nil, fmt.Errorf("session %q has no stored fold state", id)
	}
	st := fold.New(v.info().Header, fold.Lenient)
	if err := st.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("session %q: restore fold state: %w", id, err)
	}
	return fold.StoredClosers(id, st.Closers()), nil
}

func (s *snapshot) IsLive(id string) bool {
	v, err := getSession(s.tx, id)
	return err == nil && v != nil && s.live[v.key()]
}

func (s *snapshot) LiveSet() []string {
	tokens := s.tx.Bucket(bucketTokens)
	var out []string
	for key, held := range s.live {
		if !held {
			continue
		}
		if id := tokens.Get([]byte(key)); id != nil {
			out = append(out, string(id))
		}
	}
	sort.Strings(out)
	return out
}

func (s *snapshot) Record(info dshq.SessionInfo) dshq.SessionRecord {
	return dshq.SessionRecord{Header: info.Header.Header, Live: s.live[record.LogKey(info.Tenant, info.Token)], Persisted: true}
}

func (s *snapshot) Quarantined(afterSeq uint64, fn func(QuarantineRecord) bool) error {
	c := s.tx.Bucket(bucketQuarantine).Cursor()
	for k, b := c.Seek(u64(afterSeq + 1)); k != nil; k, b = c.Next() {
		var q QuarantineRecord
		if err := json.Unmarshal(b, &q); err != nil {
			return fmt.Errorf("quarantine record %x: %w", k, err)
		}
		if !fn(q) {
			return nil
		}
	}
	return nil
}
