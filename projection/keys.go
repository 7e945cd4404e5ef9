package projection

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/dshq/dshq"
)

// Bucket names of the store.
var (
	bucketMeta        = []byte("meta")        // checkpoint, schema, epoch
	bucketSessions    = []byte("sessions")    // id → sessionValue (JSON)
	bucketTokens      = []byte("tokens")      // log key (subject token, or tenant.token) → session id
	bucketBadSubjects = []byte("badsubjects") // log key → stream seq of its refused header
	bucketStates      = []byte("states")      // id → fold state bytes
	bucketEvents      = []byte("events")      // sk(id)+seq → eventValue
	bucketReplacedBy  = []byte("replacedby")  // sk(id)+seq → replacing seq
	bucketReplaced    = []byte("replaced")    // sk(id)+seq → shadowed seqs (surface order)
	bucketSources     = []byte("sources")     // sk(id)+seq → sourceEventSeqs (recorded order)
	bucketDerived     = []byte("derived")     // sk(id)+src+derived → nil
	bucketSurface     = []byte("surface")     // sk(id)+orderKey → seq (current nodes)
	bucketChildren    = []byte("children")    // sk(parent)+createdAt asc+id → nil
	bucketByCreated   = []byte("bycreated")   // createdAt desc+id → nil
	bucketQuarantine  = []byte("quarantine")  // stream seq → QuarantineRecord (JSON)
)

var allBuckets = [][]byte{
	bucketMeta, bucketSessions, bucketTokens, bucketBadSubjects, bucketStates,
	bucketEvents, bucketReplacedBy, bucketReplaced, bucketSources, bucketDerived,
	bucketSurface, bucketChildren, bucketByCreated, bucketQuarantine,
	bucketUsage, bucketUsageKeys, bucketUsageSessions, bucketUsageStates,
	bucketUsageTotals, bucketUsageCube, bucketUsageRoots, bucketUsageLineage,
	bucketByActivity,
}

var (
	metaCheckpoint = []byte("checkpoint")
	metaSchema     = []byte("schema")
	metaEpoch      = []byte("epoch")
)

// SchemaVersion is the store layout version. A store written with another
// version is rebuilt from the stream on start. Version 2 keys sessions by their
// log key (tenants, docs/protocol.md#2-the-session-log-stream): a version 1
// store had quarantined every two-token log subject. Version 3 adds the usage
// aggregates (docs/usage.md): a version 2 store is rebuilt to compute them.
// Version 4 adds the usage totals and cubes (docs/usage.md, "The
// aggregates"). Version 5 adds the sessions' summaries and the activity
// order (summary.go). Version 6 stores an event's raw record and text
// compressed (raw.go): a version 5 store holds them plain.
const SchemaVersion = 6

// sessionKey is the prefix of every per-session key: a 2-byte big-endian
// length and the id's bytes, so that no id's keys are a prefix of another's.
func sessionKey(id string) []byte {
	k := make([]byte, 2, 2+len(id)+16)
	binary.BigEndian.PutUint16(k, uint16(len(id)))
	return append(k, id...)
}

// seqKey is sessionKey(id) followed by seq as 8 big-endian bytes.
func seqKey(sk []byte, seq int64) []byte {
	k := make([]byte, len(sk), len(sk)+16)
	copy(k, sk)
	return binary.BigEndian.AppendUint64(k, uint64(seq))
}

// orderedInt maps an int64 to a uint64 whose big-endian bytes sort like the
// int64.
func orderedInt(v int64) uint64 { return uint64(v) ^ (1 << 63) }

// createdKey is the bycreated key: createdAt descending, then id ascending.
func createdKey(createdAt int64, id string) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(id)), math.MaxUint64-orderedInt(createdAt))
	return append(k, id...)
}

// childKey is the children key: parent, createdAt ascending, then id.
func childKey(parent string, createdAt int64, id string) []byte {
	k := binary.BigEndian.AppendUint64(sessionKey(parent), orderedInt(createdAt))
	return append(k, id...)
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func readU64(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("stored integer has %d bytes, want 8", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

func encodeSeqs(seqs []int64) []byte {
	b := make([]byte, 0, len(seqs)*3)
	for _, s := range seqs {
		b = binary.AppendVarint(b, s)
	}
	return b
}

func decodeSeqs(b []byte) ([]int64, error) {
	var out []int64
	for len(b) > 0 {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, errors.New("corrupt seq list")
		}
		out = append(out, v)
		b = b[n:]
	}
	return out, nil
}

// eventValue is the stored form of one event.
type eventValue struct {
	Type      string
	Time      int64
	Surface   dshq.Surface
	Invalid   bool
	StreamSeq uint64
	// OrderKey places a current node in the surface: its own seq for an
	// append, the order key of the first node it shadowed for a replacement.
	OrderKey int64
	Text     string
	Raw      []byte
	// tail is the stored encoding of Text and Raw as read (raw.go), valid
	// for the transaction it was read in: marshal writes it back as it is,
	// so rewriting a read value's surface does not compress its record
	// again. A value whose Text or Raw changes is built anew, without it.
	tail []byte
}

var surfaceCodes = []dshq.Surface{"", dshq.SurfaceCurrent, dshq.SurfaceShadowed, dshq.SurfaceLogOnly}

func surfaceCode(s dshq.Surface) byte {
	for i, c := range surfaceCodes {
		if c == s {
			return byte(i)
		}
	}
	return 0
}

func (v eventValue) marshal() []byte {
	tail := v.tail
	if tail == nil {
		tail = rawTail(v.Text, v.Raw)
	}
	b := make([]byte, 0, 2+3*binary.MaxVarintLen64+len(v.Type)+len(tail))
	var flags byte
	if v.Invalid {
		flags = 1
	}
	b = append(b, flags, surfaceCode(v.Surface))
	b = binary.AppendUvarint(b, uint64(len(v.Type)))
	b = append(b, v.Type...)
	b = binary.AppendVarint(b, v.Time)
	b = binary.AppendUvarint(b, v.StreamSeq)
	b = binary.AppendVarint(b, v.OrderKey)
	return append(b, tail...)
}

// errCorruptEvent is a stored event value that does not decode; it is an
// ErrCorruptStore, which a rebuild from the stream repairs.
var errCorruptEvent = fmt.Errorf("%w: corrupt stored event", ErrCorruptStore)

func unmarshalEvent(b []byte) (eventValue, error) {
	var v eventValue
	if len(b) < 2 || b[1] >= byte(len(surfaceCodes)) {
		return v, errCorruptEvent
	}
	v.Invalid = b[0]&1 != 0
	v.Surface = surfaceCodes[b[1]]
	b = b[2:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	vint := func() (int64, bool) {
		x, k := binary.Varint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return x, true
	}
	var ok bool
	if v.Type, ok = str(); !ok {
		return v, errCorruptEvent
	}
	if v.Time, ok = vint(); !ok {
		return v, errCorruptEvent
	}
	ss, k := binary.Uvarint(b)
	if k <= 0 {
		return v, errCorruptEvent
	}
	v.StreamSeq, b = ss, b[k:]
	if v.OrderKey, ok = vint(); !ok {
		return v, errCorruptEvent
	}
	text, raw, err := decodeRawTail(b)
	if err != nil {
		return v, err
	}
	v.Text, v.Raw, v.tail = text, raw, b
	return v, nil
}
