package projection

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq/usage"
)

// The usage aggregates (docs/usage.md), kept in the batch's transaction so
// that a report reads sums, never the events, and a rebuild or replay
// reproduces them.
var (
	// slot (4 bytes BE) + sessionKey(id) + model + 0 + branch → usage counts
	bucketUsage = []byte("usage")
	// tenant + 0 + call key → the row key it was counted in + its counts
	bucketUsageKeys = []byte("usagekeys")
	// id → the session's usage dimensions
	bucketUsageSessions = []byte("usagesess")
	// id → usage.State (JSON), for sessions that keep one
	bucketUsageStates = []byte("usagestate")
)

// usageBatch is a batch's part of the usage aggregates: the rows it
// changed (net), and the extraction states of the sessions it touched.
type usageBatch struct {
	rows   map[string]*usage.Tokens
	states map[string]*usage.State
}

func (b *batch) usageOf() *usageBatch {
	if b.usage == nil {
		b.usage = &usageBatch{rows: map[string]*usage.Tokens{}, states: map[string]*usage.State{}}
	}
	return b.usage
}

// usageHeader records a new session's usage dimensions.
func (b *batch) usageHeader(v *sessionValue) error {
	h := v.Header
	d := usage.SessionDims{Machine: h.Machine, Harness: h.Harness, Tenant: v.Tenant}
	if d.Harness == "" {
		d.Harness = usage.NativeHarness
	}
	if h.Cwd != nil {
		d.Cwd = *h.Cwd
	}
	if p := h.ParentSession; p != nil {
		d.Ancestors = []string{*p}
		if pd, ok := getUsageDims(b.tx, *p); ok {
			d.Ancestors = append(d.Ancestors, pd.Ancestors...)
		}
		if len(d.Ancestors) > maxUsageAncestors {
			d.Ancestors = d.Ancestors[:maxUsageAncestors]
		}
	}
	return b.tx.Bucket(bucketUsageSessions).Put([]byte(h.ID), encodeUsageDims(d))
}

// maxUsageAncestors bounds the ancestors a session's dimensions keep.
const maxUsageAncestors = 64

// usageEvent counts the usage an applied event states.
func (b *batch) usageEvent(s *openSession, r streamRecord, evTime int64) error {
	ub := b.usageOf()
	id := s.v.Header.ID
	st, ok := ub.states[id]
	if !ok {
		st = &usage.State{}
		if raw := b.tx.Bucket(bucketUsageStates).Get([]byte(id)); raw != nil {
			if err := json.Unmarshal(raw, st); err != nil {
				return fmt.Errorf("%w: session %q: usage state: %v", ErrCorruptStore, id, err)
			}
			ok = true // stored: written back (or deleted) at finish
		}
	}
	entries := st.Event(s.v.Header.Harness, r.data, evTime)
	if ok || !st.IsZero() {
		ub.states[id] = st
	}
	for _, e := range entries {
		spender := id
		if e.Session != "" {
			spender = e.Session
		}
		rk := usageRowKey(usage.SlotOf(e.Time), spender, e.Model, e.Branch)
		if e.Key != "" {
			kk := append(append([]byte(s.v.Tenant), 0), e.Key...)
			keys := b.tx.Bucket(bucketUsageKeys)
			if old := keys.Get(kk); old != nil {
				if !e.Replace {
					continue
				}
				ork, ot, err := decodeUsageKey(old)
				if err != nil {
					return fmt.Errorf("%w: usage key %q: %v", ErrCorruptStore, e.Key, err)
				}
				if err := b.usageAdd(ork, ot, -1); err != nil {
					return err
				}
			}
			if err := keys.Put(kk, encodeUsageKey(rk, e.Tokens)); err != nil {
				return err
			}
		}
		if err := b.usageAdd(rk, e.Tokens, 1); err != nil {
			return err
		}
	}
	return nil
}

// usageAdd adds t (sign 1) or subtracts it (sign -1) from row rk.
func (b *batch) usageAdd(rk []byte, t usage.Tokens, sign int) error {
	ub := b.usageOf()
	cur, ok := ub.rows[string(rk)]
	if !ok {
		cur = &usage.Tokens{}
		if raw := b.tx.Bucket(bucketUsage).Get(rk); raw != nil {
			v, err := decodeUsageTokens(raw)
			if err != nil {
				return fmt.Errorf("%w: usage row: %v", ErrCorruptStore, err)
			}
			*cur = v
		}
		ub.rows[string(rk)] = cur
	}
	if sign > 0 {
		cur.Add(t)
	} else {
		cur.Sub(t)
	}
	return nil
}

// finishUsage writes the rows and states the batch changed.
func (b *batch) finishUsage() error {
	if b.usage == nil {
		return nil
	}
	rows := b.tx.Bucket(bucketUsage)
	for _, k := range sortedKeys(b.usage.rows) {
		t := b.usage.rows[k]
		if t.IsZero() {
			if err := rows.Delete([]byte(k)); err != nil {
				return err
			}
			continue
		}
		if err := rows.Put([]byte(k), encodeUsageTokens(*t)); err != nil {
			return err
		}
	}
	states := b.tx.Bucket(bucketUsageStates)
	for _, id := range sortedKeys(b.usage.states) {
		st := b.usage.states[id]
		if st.IsZero() {
			if err := states.Delete([]byte(id)); err != nil {
				return err
			}
			continue
		}
		raw, err := json.Marshal(st)
		if err != nil {
			return err
		}
		if err := states.Put([]byte(id), raw); err != nil {
			return err
		}
	}
	b.usage = nil
	return nil
}

func usageRowKey(slot uint32, session, model, branch string) []byte {
	k := binary.BigEndian.AppendUint32(make([]byte, 0, 4+2+len(session)+len(model)+1+len(branch)), slot)
	k = append(k, sessionKey(session)...)
	k = append(k, model...)
	k = append(k, 0)
	return append(k, branch...)
}

var errCorruptUsage = errors.New("corrupt usage record")

// usageRowKeyParts splits a row key (its parts alias k).
func usageRowKeyParts(k []byte) (slot uint32, session, model, branch []byte, err error) {
	if len(k) < 6 {
		return 0, nil, nil, nil, errCorruptUsage
	}
	slot = binary.BigEndian.Uint32(k)
	n := int(binary.BigEndian.Uint16(k[4:]))
	rest := k[6:]
	if len(rest) < n {
		return 0, nil, nil, nil, errCorruptUsage
	}
	session, rest = rest[:n], rest[n:]
	for i, c := range rest {
		if c == 0 {
			return slot, session, rest[:i], rest[i+1:], nil
		}
	}
	return 0, nil, nil, nil, errCorruptUsage
}

func encodeUsageTokens(t usage.Tokens) []byte {
	b := make([]byte, 0, 32)
	for _, v := range []int64{t.Input, t.Output, t.CacheCreation, t.CacheCreation1h, t.CacheRead, t.Calls} {
		b = binary.AppendVarint(b, v)
	}
	return b
}

func decodeUsageTokens(b []byte) (usage.Tokens, error) {
	var vals [6]int64
	for i := range vals {
		v, n := binary.Varint(b)
		if n <= 0 {
			return usage.Tokens{}, errCorruptUsage
		}
		vals[i], b = v, b[n:]
	}
	return usage.Tokens{Input: vals[0], Output: vals[1], CacheCreation: vals[2], CacheCreation1h: vals[3], CacheRead: vals[4], Calls: vals[5]}, nil
}

func encodeUsageKey(rk []byte, t usage.Tokens) []byte {
	b := binary.AppendUvarint(nil, uint64(len(rk)))
	b = append(b, rk...)
	return append(b, encodeUsageTokens(t)...)
}

func decodeUsageKey(b []byte) ([]byte, usage.Tokens, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, usage.Tokens{}, errCorruptUsage
	}
	rk := append([]byte(nil), b[k:k+int(n)]...)
	t, err := decodeUsageTokens(b[k+int(n):])
	return rk, t, err
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func encodeUsageDims(d usage.SessionDims) []byte {
	var b []byte
	for _, s := range []string{d.Cwd, d.Machine, d.Harness, d.Tenant} {
		b = appendStr(b, s)
	}
	b = binary.AppendUvarint(b, uint64(len(d.Ancestors)))
	for _, a := range d.Ancestors {
		b = appendStr(b, a)
	}
	return b
}

func decodeUsageDims(b []byte) (usage.SessionDims, error) {
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var d usage.SessionDims
	for _, p := range []*string{&d.Cwd, &d.Machine, &d.Harness, &d.Tenant} {
		s, ok := str()
		if !ok {
			return d, errCorruptUsage
		}
		*p = s
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxUsageAncestors {
		return d, errCorruptUsage
	}
	b = b[k:]
	for range n {
		s, ok := str()
		if !ok {
			return d, errCorruptUsage
		}
		d.Ancestors = append(d.Ancestors, s)
	}
	return d, nil
}

func getUsageDims(tx *bolt.Tx, id string) (usage.SessionDims, bool) {
	raw := tx.Bucket(bucketUsageSessions).Get([]byte(id))
	if raw == nil {
		return usage.SessionDims{}, false
	}
	d, err := decodeUsageDims(raw)
	return d, err == nil
}

// UsageReader is what a snapshot offers the usage report: the stored rows
// of a slot range and the dimensions of the sessions that spent.
type UsageReader = usage.Source

// UsageRows implements UsageReader.
func (s *snapshot) UsageRows(from, to uint32, fn func(usage.Row) bool) error {
	if from > to {
		return nil
	}
	// The rows repeat few sessions, models and branches: one string each.
	intern := map[string]string{}
	str := func(b string) string {
		if v, ok := intern[b]; ok {
			return v
		}
		intern[b] = b
		return b
	}
	lastModel, lastBranch := "\xff", "\xff" // no model or branch is this
	c := s.tx.Bucket(bucketUsage).Cursor()
	for k, v := c.Seek(binary.BigEndian.AppendUint32(nil, from)); k != nil; k, v = c.Next() {
		slot, sess, model, branch, err := usageRowKeyParts(k)
		if err != nil {
			return fmt.Errorf("%w: usage row %x: %v", ErrCorruptStore, k, err)
		}
		if slot > to {
			return nil
		}
		t, err := decodeUsageTokens(v)
		if err != nil {
			return fmt.Errorf("%w: usage row %x: %v", ErrCorruptStore, k, err)
		}
		row := usage.Row{Slot: slot, Tokens: t}
		if v, ok := intern[string(sess)]; ok {
			row.Session = v
		} else {
			row.Session = str(string(sess))
		}
		// Consecutive rows mostly share their model and branch.
		if lastModel == string(model) {
			row.Model = lastModel
		} else if v, ok := intern[string(model)]; ok {
			row.Model, lastModel = v, v
		} else {
			row.Model = str(string(model))
			lastModel = row.Model
		}
		if lastBranch == string(branch) {
			row.Branch = lastBranch
		} else if v, ok := intern[string(branch)]; ok {
			row.Branch, lastBranch = v, v
		} else {
			row.Branch = str(string(branch))
			lastBranch = row.Branch
		}
		if !fn(row) {
			return nil
		}
	}
	return nil
}

// UsageSessions implements UsageReader.
func (s *snapshot) UsageSessions(fn func(id string, d usage.SessionDims) bool) error {
	c := s.tx.Bucket(bucketUsageSessions).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		d, err := decodeUsageDims(v)
		if err != nil {
			return fmt.Errorf("%w: usage dimensions of %q: %v", ErrCorruptStore, k, err)
		}
		if !fn(string(k), d) {
			return nil
		}
	}
	return nil
}

// UsageSession implements UsageReader.
func (s *snapshot) UsageSession(id string) (usage.SessionDims, bool) {
	return getUsageDims(s.tx, id)
}
