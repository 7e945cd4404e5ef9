package projection

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq/record"
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
	// sessionKey(id) + model + 0 + branch → the session's all-time counts
	// (a usage row key without its slot)
	bucketUsageTotals = []byte("usagetot")
	// the same of a root session and its descendants (usage.SessionDims.Root)
	bucketUsageRoots = []byte("usageroot")
	// kind + slot (4 bytes BE) + len-prefixed value + model + 0 + branch →
	// the counts of every session with that value of the kind's dimension
	// (usage.CubeKind; an all-time kind has slot 0)
	bucketUsageCube = []byte("usagecube")
	// id → the ancestors (usage.SessionDims.Ancestors' encoding) of a
	// session of another shard: its header, which every shard reads,
	// names its parent. Roll-up needs the chain across shards.
	bucketUsageLineage = []byte("usagelineage")
)

// usageBuckets are the summed buckets a usage row's change is added to.
var usageBuckets = [][]byte{bucketUsage, bucketUsageTotals, bucketUsageCube, bucketUsageRoots}

// usageBatch is a batch's part of the usage aggregates: the rows of
// usageBuckets it changed (net), the extraction states of the sessions it
// touched, and the dimensions it read.
type usageBatch struct {
	rows   [4]map[string]*usage.Tokens // by usageBuckets' index
	states map[string]*usage.State
	dims   map[string]usage.SessionDims
	// foreign are the other shards' sessions whose records the batch read
	// (usage_shared.go).
	foreign map[string]*foreignSession
}

func (b *batch) usageOf() *usageBatch {
	if b.usage == nil {
		b.usage = &usageBatch{states: map[string]*usage.State{}, dims: map[string]usage.SessionDims{},
			foreign: map[string]*foreignSession{}}
		for i := range b.usage.rows {
			b.usage.rows[i] = map[string]*usage.Tokens{}
		}
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
		d.Ancestors = usageAncestors(b.tx, *p)
	}
	// A session that spent before its header (an inline sidechain routed
	// to it) keeps the dimensions it inherited then: the cubes counted it
	// under them.
	if _, ok := getUsageDims(b.tx, h.ID); ok {
		return nil
	}
	return b.tx.Bucket(bucketUsageSessions).Put([]byte(h.ID), encodeUsageDims(d))
}

// usageDims returns the dimensions of the session spender, that spent
// through an event of session s: a spender without dimensions yet (its
// header comes later) inherits s's, with s as its parent, and keeps them.
func (b *batch) usageDims(spender string, s *openSession) (usage.SessionDims, error) {
	ub := b.usageOf()
	if d, ok := ub.dims[spender]; ok {
		return d, nil
	}
	d, ok := getUsageDims(b.tx, spender)
	if !ok {
		pd, _ := getUsageDims(b.tx, s.v.Header.ID)
		d = pd
		if spender != s.v.Header.ID {
			d.Ancestors = append([]string{s.v.Header.ID}, pd.Ancestors...)
			if len(d.Ancestors) > maxUsageAncestors {
				d.Ancestors = d.Ancestors[:maxUsageAncestors]
			}
		}
		if err := b.tx.Bucket(bucketUsageSessions).Put([]byte(spender), encodeUsageDims(d)); err != nil {
			return d, err
		}
	}
	ub.dims[spender] = d
	return d, nil
}

// usageAncestors is the ancestors of a child of parent: parent and its
// own, from its dimensions when this projection holds it, else from the
// lineage of the shard that does.
func usageAncestors(tx *bolt.Tx, parent string) []string {
	a := []string{parent}
	if pd, ok := getUsageDims(tx, parent); ok {
		a = append(a, pd.Ancestors...)
	} else if raw := tx.Bucket(bucketUsageLineage).Get([]byte(parent)); raw != nil {
		if la, err := decodeAncestors(raw); err == nil {
			a = append(a, la...)
		}
	}
	return a[:min(len(a), maxUsageAncestors)]
}

// usageLineage reads a record r of another shard's session (tok is its
// log subject's token): the keys of the calls it states (usageForeign), and
// the session's ancestors when r is its header: a record that names a
// parent session and is a valid header of that subject, the first one seen
// for its id. Only a child's header says "parentSession", so most records
// are passed over without parsing.
func (b *batch) usageLineage(r streamRecord, tok string) error {
	if err := b.usageForeign(r, tok); err != nil {
		return err
	}
	if !bytes.Contains(r.data, []byte(`"parentSession"`)) {
		return nil
	}
	h, err := record.ParseHeader(r.data)
	if err != nil || h.Header.ParentSession == nil {
		return nil
	}
	if want, err := record.SubjectToken(h.Header.ID); err != nil || want != tok {
		return nil
	}
	lin := b.tx.Bucket(bucketUsageLineage)
	if lin.Get([]byte(h.Header.ID)) != nil {
		return nil
	}
	return lin.Put([]byte(h.Header.ID), encodeAncestors(usageAncestors(b.tx, *h.Header.ParentSession)))
}

func encodeAncestors(a []string) []byte {
	b := binary.AppendUvarint(nil, uint64(len(a)))
	for _, s := range a {
		b = appendStr(b, s)
	}
	return b
}

func decodeAncestors(b []byte) ([]string, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxUsageAncestors {
		return nil, errCorruptUsage
	}
	b = b[k:]
	a := make([]string, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			return nil, errCorruptUsage
		}
		a = append(a, string(b[k:k+int(l)]))
		b = b[k+int(l):]
	}
	return a, nil
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
		if _, err := b.usageDims(spender, s); err != nil {
			return err
		}
		rk := usageRowKey(usage.SlotOf(e.Time), spender, e.Model, e.Branch)
		if e.Key != "" {
			kk := append(append([]byte(s.v.Tenant), 0), e.Key...)
			keys := b.tx.Bucket(bucketUsageKeys)
			if old := keys.Get(kk); old != nil {
				if !e.Replace {
					continue
				}
				foreign, direct, err := usageKeyOwner(old)
				if err != nil {
					return fmt.Errorf("%w: usage key %q: %v", ErrCorruptStore, e.Key, err)
				}
				if direct && e.Mirror {
					continue // the session that made the call has stated it
				}
				if !foreign { // a session of another shard uncounts its own there
					ork, ot, _, err := decodeUsageKey(old)
					if err != nil {
						return fmt.Errorf("%w: usage key %q: %v", ErrCorruptStore, e.Key, err)
					}
					if err := b.usageAdd(ork, ot, -1); err != nil {
						return err
					}
				}
			}
			if err := keys.Put(kk, encodeUsageKey(rk, e.Tokens, !e.Mirror)); err != nil {
				return err
			}
		}
		if err := b.usageAdd(rk, e.Tokens, 1); err != nil {
			return err
		}
	}
	return nil
}

// usageAdd adds t (sign 1) or subtracts it (sign -1) from row rk, and from
// the session's total and the cubes' rows that sum it. The session's
// dimensions are in the batch (usageEvent read them when it counted).
func (b *batch) usageAdd(rk []byte, t usage.Tokens, sign int) error {
	slot, sess, model, branch, err := usageRowKeyParts(rk)
	if err != nil {
		return fmt.Errorf("%w: usage row %x: %v", ErrCorruptStore, rk, err)
	}
	d, ok := b.usageOf().dims[string(sess)]
	if !ok {
		if d, ok = getUsageDims(b.tx, string(sess)); !ok {
			return fmt.Errorf("%w: usage row %x: its session has no dimensions", ErrCorruptStore, rk)
		}
		b.usage.dims[string(sess)] = d
	}
	if err := b.usageAddTo(0, rk, t, sign); err != nil {
		return err
	}
	if err := b.usageAddTo(1, rk[4:], t, sign); err != nil {
		return err
	}
	if root := d.Root(string(sess)); root != string(sess) {
		if err := b.usageAddTo(3, usageRowKey(0, root, string(model), string(branch))[4:], t, sign); err != nil {
			return err
		}
	} else if err := b.usageAddTo(3, rk[4:], t, sign); err != nil {
		return err
	}
	for _, kind := range usage.CubeKinds {
		v := kind.Value(d)
		if err := b.usageAddTo(2, usageCubeKey(kind, slot, v, model, branch), t, sign); err != nil {
			return err
		}
		if err := b.usageAddTo(2, usageCubeKey(kind.AllTime(), 0, v, model, branch), t, sign); err != nil {
			return err
		}
	}
	return nil
}

// usageAddTo adds t (sign 1) or subtracts it (sign -1) from key k of
// usageBuckets[i].
func (b *batch) usageAddTo(i int, k []byte, t usage.Tokens, sign int) error {
	rows := b.usageOf().rows[i]
	cur, ok := rows[string(k)]
	if !ok {
		cur = &usage.Tokens{}
		if raw := b.tx.Bucket(usageBuckets[i]).Get(k); raw != nil {
			v, err := decodeUsageTokens(raw)
			if err != nil {
				return fmt.Errorf("%w: %s row %x: %v", ErrCorruptStore, usageBuckets[i], k, err)
			}
			*cur = v
		}
		rows[string(k)] = cur
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
	for i, name := range usageBuckets {
		rows := b.tx.Bucket(name)
		for _, k := range sortedKeys(b.usage.rows[i]) {
			t := b.usage.rows[i][k]
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
	}
	if err := b.finishForeign(); err != nil {
		return err
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

func usageCubeKey(kind usage.CubeKind, slot uint32, value, model, branch []byte) []byte {
	k := make([]byte, 0, 1+4+binary.MaxVarintLen64+len(value)+len(model)+1+len(branch))
	k = append(k, byte(kind))
	k = binary.BigEndian.AppendUint32(k, slot)
	k = binary.AppendUvarint(k, uint64(len(value)))
	k = append(k, value...)
	k = append(k, model...)
	k = append(k, 0)
	return append(k, branch...)
}

// usageCubeKeyParts splits a cube key (its parts alias k).
func usageCubeKeyParts(k []byte) (kind usage.CubeKind, slot uint32, value, model, branch []byte, err error) {
	if len(k) < 6 {
		return 0, 0, nil, nil, nil, errCorruptUsage
	}
	kind, slot = usage.CubeKind(k[0]), binary.BigEndian.Uint32(k[1:])
	n, w := binary.Uvarint(k[5:])
	rest := k[5:]
	if w <= 0 || uint64(len(rest)-w) < n {
		return 0, 0, nil, nil, nil, errCorruptUsage
	}
	value, rest = rest[w:w+int(n)], rest[w+int(n):]
	for i, c := range rest {
		if c == 0 {
			return kind, slot, value, rest[:i], rest[i+1:], nil
		}
	}
	return 0, 0, nil, nil, nil, errCorruptUsage
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

// A usage key's value: a flag (1 when the call was counted from the
// records of the session that made it, 0 from another session's mirror of
// it), the row key it was counted in and its counts. A key another shard's
// session owns (usage_shared.go) is the flag alone, 3 when that session
// made the call and 2 for a mirror.
func encodeUsageKey(rk []byte, t usage.Tokens, direct bool) []byte {
	b := []byte{0}
	if direct {
		b[0] = 1
	}
	b = binary.AppendUvarint(b, uint64(len(rk)))
	b = append(b, rk...)
	return append(b, encodeUsageTokens(t)...)
}

func encodeForeignUsageKey(direct bool) []byte {
	if direct {
		return []byte{3}
	}
	return []byte{2}
}

// usageKeyOwner reads who owns a usage key: a session of this projection
// or of another shard (foreign), and whether it made the call (direct).
func usageKeyOwner(b []byte) (foreign, direct bool, err error) {
	if len(b) == 0 || b[0] > 3 || b[0] >= 2 && len(b) != 1 {
		return false, false, errCorruptUsage
	}
	return b[0] >= 2, b[0]&1 == 1, nil
}

func decodeUsageKey(b []byte) (rk []byte, t usage.Tokens, direct bool, err error) {
	if len(b) == 0 || b[0] > 1 {
		return nil, usage.Tokens{}, false, errCorruptUsage
	}
	direct, b = b[0] == 1, b[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, usage.Tokens{}, false, errCorruptUsage
	}
	rk = append([]byte(nil), b[k:k+int(n)]...)
	t, err = decodeUsageTokens(b[k+int(n):])
	return rk, t, direct, err
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

// interner gives the few distinct sessions, models and branches a scan
// repeats one string each.
type interner struct {
	m           map[string]string
	last, last2 string // the latest two (consecutive rows mostly share them)
}

func newInterner() *interner { return &interner{m: map[string]string{}, last: "\xff", last2: "\xff"} }

func (in *interner) str(b []byte) string {
	switch string(b) {
	case in.last:
		return in.last
	case in.last2:
		in.last, in.last2 = in.last2, in.last
		return in.last
	}
	v, ok := in.m[string(b)]
	if !ok {
		v = string(b)
		in.m[v] = v
	}
	in.last, in.last2 = v, in.last
	return v
}

// UsageRows implements UsageReader.
func (s *snapshot) UsageRows(from, to uint32, fn func(usage.Row) bool) error {
	if from > to {
		return nil
	}
	sessions, models, branches := newInterner(), newInterner(), newInterner()
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
		if !fn(usage.Row{Slot: slot, Session: sessions.str(sess), Model: models.str(model), Branch: branches.str(branch), Tokens: t}) {
			return nil
		}
	}
	return nil
}

// UsageTotals implements UsageReader.
func (s *snapshot) UsageTotals(roots bool, fn func(usage.Row) bool) error {
	models, branches := newInterner(), newInterner()
	var sess string
	name := bucketUsageTotals
	if roots {
		name = bucketUsageRoots
	}
	c := s.tx.Bucket(name).Cursor()
	var rk []byte // a row key at slot 0, to split the total's key
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rk = append(append(rk[:0], 0, 0, 0, 0), k...)
		_, id, model, branch, err := usageRowKeyParts(rk)
		if err != nil {
			return fmt.Errorf("%w: usage total %x: %v", ErrCorruptStore, k, err)
		}
		t, err := decodeUsageTokens(v)
		if err != nil {
			return fmt.Errorf("%w: usage total %x: %v", ErrCorruptStore, k, err)
		}
		if sess != string(id) { // a session's totals are consecutive
			sess = string(id)
		}
		if !fn(usage.Row{Session: sess, Model: models.str(model), Branch: branches.str(branch), Tokens: t}) {
			return nil
		}
	}
	return nil
}

// UsageCube implements UsageReader.
func (s *snapshot) UsageCube(kind usage.CubeKind, from, to uint32, fn func(usage.CubeRow) bool) error {
	if from > to {
		return nil
	}
	values, models, branches := newInterner(), newInterner(), newInterner()
	c := s.tx.Bucket(bucketUsageCube).Cursor()
	start := binary.BigEndian.AppendUint32([]byte{byte(kind)}, from)
	for k, v := c.Seek(start); k != nil && k[0] == byte(kind); k, v = c.Next() {
		_, slot, value, model, branch, err := usageCubeKeyParts(k)
		if err != nil {
			return fmt.Errorf("%w: usage cube row %x: %v", ErrCorruptStore, k, err)
		}
		if slot > to {
			return nil
		}
		t, err := decodeUsageTokens(v)
		if err != nil {
			return fmt.Errorf("%w: usage cube row %x: %v", ErrCorruptStore, k, err)
		}
		if !fn(usage.CubeRow{Slot: slot, Value: values.str(value), Model: models.str(model), Branch: branches.str(branch), Tokens: t}) {
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
