package projection

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq/index"
)

// DumpEntry is one line of a canonical dump: a store or index entry in a
// deterministic text form.
type DumpEntry struct {
	// Section is the bbolt bucket the entry comes from, or "index" for a
	// Bleve document and "index-meta" for the index's own records.
	Section string
	// Session is the session the entry belongs to ("" for a global entry:
	// the checkpoint, a refused subject, a quarantined record of no
	// session). Quarantined records carry the session they were refused in.
	Session string
	// Key is the entry's decoded key.
	Key string
	// Value is the entry's decoded value.
	Value string
}

// String renders the entry as one tab-separated line of quoted fields.
func (e DumpEntry) String() string {
	return strconv.Quote(e.Section) + "\t" + strconv.Quote(e.Session) + "\t" + strconv.Quote(e.Key) + "\t" + strconv.Quote(e.Value)
}

// dumpLockTimeout bounds the wait for a data directory a running projector
// holds: Dump fails instead of hanging.
const dumpLockTimeout = 5 * time.Second

// Dump writes the canonical dump of the serving projection of the data
// directory dir (the directory CURRENT names) to w, one DumpEntry per line:
// every bbolt bucket and key/value in key order, decoded, then every Bleve
// document (doc id → stored fields) in doc id order. Two correct projections
// of the same stream dump identically, however their batches were cut and
// however often their projectors crashed.
//
// The stores are opened read-only and never modified; the directory must not
// be in use by a projector (Dump fails after a few seconds if it is).
//
// What is left out, because it legitimately differs between two correct
// runs:
//   - the projection epoch (meta "epoch") and the name of the p-* directory
//     CURRENT points to: both are random per created projection, by design
//     (a cursor from another projection must be stale);
//   - a Bleve document's "cgen" (its creation generation, also the first
//     part of its doc id): the projector gives a doc its event's own stream
//     sequence, but the index allows any generation up to the batch's. In
//     its place the dump shows whether it is within the bounds any correct
//     run keeps: at least the event's own stream sequence and at most the
//     index generation, and equal to the id's ("cgen=ok", or the value and
//     the bound it breaks);
//   - bbolt's page layout and free list, and Bleve's segment files: only the
//     logical content is dumped.
//
// Everything else is dumped, stream sequences included: they are positions
// in the one stream both runs read. Buckets this version does not know are
// dumped raw (quoted bytes), never skipped. Errors: a directory without a
// projection, a store or index that cannot be read, or a stored value that
// does not decode.
func Dump(dir string, w io.Writer) error {
	entries, err := DumpEntries(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if _, err := io.WriteString(w, e.String()+"\n"); err != nil {
			return fmt.Errorf("write dump: %w", err)
		}
	}
	return nil
}

// DumpEntries returns the canonical dump of the serving projection in dir as
// entries, in the order Dump writes them (see Dump).
func DumpEntries(dir string) ([]DumpEntry, error) {
	inst, err := currentInstanceDir(dir)
	if err != nil {
		return nil, err
	}
	d := &dumper{streamSeqs: map[docKey]uint64{}}
	if err := d.store(filepath.Join(inst, "projection.db")); err != nil {
		return nil, err
	}
	if err := d.index(filepath.Join(inst, "index")); err != nil {
		return nil, err
	}
	return d.out, nil
}

// currentInstanceDir returns the directory CURRENT names in dir.
func currentInstanceDir(dir string) (string, error) {
	name, err := os.ReadFile(filepath.Join(dir, currentFile))
	if err != nil {
		return "", fmt.Errorf("dump %s: no serving projection: %w", dir, err)
	}
	n := strings.TrimSpace(string(name))
	if !validInstanceName(n) {
		return "", fmt.Errorf("dump %s: %s names %q, not a projection directory", dir, currentFile, n)
	}
	return filepath.Join(dir, n), nil
}

// dumper collects the entries of one projection.
type dumper struct {
	out        []DumpEntry
	streamSeqs map[docKey]uint64 // stream sequence of each stored event
	checkpoint uint64
}

func (d *dumper) add(section, session, key, value string) {
	d.out = append(d.out, DumpEntry{Section: section, Session: session, Key: key, Value: value})
}

// store dumps the bbolt file at path, opened read-only.
func (d *dumper) store(path string) (err error) {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("dump store: %w", err) // bbolt would create it
	}
	if err := checkBoltFile(path); err != nil {
		return fmt.Errorf("dump store: %w", err)
	}
	defer func() {
		if r := recover(); r != nil { // bbolt panics on some garbled pages
			err = fmt.Errorf("dump store: %w: %s: %v", ErrCorruptStore, path, r)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: dumpLockTimeout})
	if err != nil {
		return fmt.Errorf("dump store %s: %w", path, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if err := d.bucket(string(name), b); err != nil {
				return fmt.Errorf("dump store: bucket %q: %w", name, err)
			}
			return nil
		})
	})
}

// bucket dumps one top-level bucket, decoding the buckets of this schema.
func (d *dumper) bucket(name string, b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil && b.Bucket(k) != nil {
			return d.raw(name+"/"+string(k), b.Bucket(k))
		}
		if err := d.entry(name, k, v); err != nil {
			return fmt.Errorf("key %q: %w", k, err)
		}
		return nil
	})
}

// raw dumps a bucket this version does not know, byte for byte.
func (d *dumper) raw(name string, b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil && b.Bucket(k) != nil {
			return d.raw(name+"/"+string(k), b.Bucket(k))
		}
		d.add(name, "", strconv.Quote(string(k)), strconv.Quote(string(v)))
		return nil
	})
}

func (d *dumper) entry(bucket string, k, v []byte) error {
	switch bucket {
	case string(bucketMeta):
		return d.meta(k, v)
	case string(bucketSessions), string(bucketTokens):
		id := string(k)
		if bucket == string(bucketTokens) {
			id = string(v)
		}
		d.add(bucket, id, string(k), string(v))
	case string(bucketBadSubjects):
		n, err := readU64(v)
		if err != nil {
			return err
		}
		d.add(bucket, "", string(k), strconv.FormatUint(n, 10))
	case string(bucketStates):
		d.add(bucket, string(k), string(k), hex.EncodeToString(v))
	case string(bucketEvents):
		return d.event(k, v)
	case string(bucketReplacedBy), string(bucketSurface):
		return d.seqEntry(bucket, k, 8, func(rest []byte) (string, error) {
			n, err := readU64(v)
			return strconv.FormatUint(n, 10), err
		})
	case string(bucketReplaced), string(bucketSources):
		return d.seqEntry(bucket, k, 8, func([]byte) (string, error) {
			seqs, err := decodeSeqs(v)
			return fmt.Sprint(seqs), err
		})
	case string(bucketDerived):
		return d.seqEntry(bucket, k, 16, func(rest []byte) (string, error) {
			return "derived " + strconv.FormatInt(int64(binary.BigEndian.Uint64(rest[8:])), 10), nil
		})
	case string(bucketChildren):
		parent, rest, err := splitSessionKey(k)
		if err != nil || len(rest) < 8 {
			return errors.New("malformed child key")
		}
		child := string(rest[8:])
		d.add(bucket, child, fmt.Sprintf("parent %q createdAt %d child %q", parent, int64(binary.BigEndian.Uint64(rest)^(1<<63)), child), "")
	case string(bucketByCreated):
		if len(k) < 8 {
			return errors.New("malformed createdAt key")
		}
		id := string(k[8:])
		created := int64((math.MaxUint64 - binary.BigEndian.Uint64(k)) ^ (1 << 63))
		d.add(bucket, id, fmt.Sprintf("createdAt %d id %q", created, id), "")
	case string(bucketByActivity):
		if len(k) < 8 {
			return errors.New("malformed activity key")
		}
		id := string(k[8:])
		at := int64((math.MaxUint64 - binary.BigEndian.Uint64(k)) ^ (1 << 63))
		d.add(bucket, id, fmt.Sprintf("lastActivityAt %d id %q", at, id), "")
	case string(bucketQuarantine):
		var q QuarantineRecord
		if err := json.Unmarshal(v, &q); err != nil {
			return err
		}
		seq, err := readU64(k)
		if err != nil {
			return err
		}
		d.add(bucket, q.SessionID, strconv.FormatUint(seq, 10), string(v))
	default:
		d.add(bucket, "", strconv.Quote(string(k)), strconv.Quote(string(v)))
	}
	return nil
}

func (d *dumper) meta(k, v []byte) error {
	switch string(k) {
	case string(metaEpoch):
		return nil // random per projection: see Dump
	case string(metaStream):
		return nil // the stream's creation time: not the projection's content
	case string(metaCheckpoint), string(metaSchema):
		n, err := readU64(v)
		if err != nil {
			return err
		}
		if string(k) == string(metaCheckpoint) {
			d.checkpoint = n
		}
		d.add(string(bucketMeta), "", string(k), strconv.FormatUint(n, 10))
	default:
		d.add(string(bucketMeta), "", strconv.Quote(string(k)), strconv.Quote(string(v)))
	}
	return nil
}

// seqEntry dumps a key of the form sessionKey+seq(8 bytes)+… (n bytes after
// the session key); value renders the value given the bytes after it.
func (d *dumper) seqEntry(bucket string, k []byte, n int, value func(rest []byte) (string, error)) error {
	id, rest, err := splitSessionKey(k)
	if err != nil || len(rest) != n {
		return fmt.Errorf("malformed key (%d bytes after the session, want %d)", len(rest), n)
	}
	v, err := value(rest)
	if err != nil {
		return err
	}
	d.add(bucket, id, "seq "+strconv.FormatInt(int64(binary.BigEndian.Uint64(rest)), 10), v)
	return nil
}

func (d *dumper) event(k, v []byte) error {
	id, rest, err := splitSessionKey(k)
	if err != nil || len(rest) != 8 {
		return errors.New("malformed event key")
	}
	seq := int64(binary.BigEndian.Uint64(rest))
	e, err := unmarshalEvent(v)
	if err != nil {
		return err
	}
	d.streamSeqs[docKey{id, seq}] = e.StreamSeq
	d.add(string(bucketEvents), id, "seq "+strconv.FormatInt(seq, 10), fmt.Sprintf(
		"type=%q time=%d surface=%q invalid=%t stream=%d order=%d text=%q raw=%s",
		e.Type, e.Time, e.Surface, e.Invalid, e.StreamSeq, e.OrderKey, e.Text, strconv.Quote(string(e.Raw))))
	return nil
}

// splitSessionKey splits a per-session key into the session id and the rest.
func splitSessionKey(k []byte) (string, []byte, error) {
	if len(k) < 2 {
		return "", nil, errors.New("short session key")
	}
	n := int(binary.BigEndian.Uint16(k))
	if len(k) < 2+n {
		return "", nil, errors.New("short session key")
	}
	return string(k[2 : 2+n]), k[2+n:], nil
}

// index dumps the Bleve index at dir, opened read-only: its internal
// records, then every document's stored fields in doc id order.
func (d *dumper) index(dir string) (err error) {
	if _, err := os.Stat(filepath.Join(dir, "index_meta.json")); err != nil {
		return fmt.Errorf("dump index: %w", err)
	}
	defer func() {
		if r := recover(); r != nil { // a damaged segment can make Bleve panic
			err = fmt.Errorf("dump index %s: %v", dir, r)
		}
	}()
	idx, err := bleve.OpenUsing(dir, map[string]any{"read_only": true, "bolt_timeout": dumpLockTimeout.String()})
	if err != nil {
		return fmt.Errorf("dump index %s: %w", dir, err)
	}
	defer idx.Close()
	var gen uint64
	for _, key := range []string{"dshq.mapping", "dshq.generation"} {
		v, err := idx.GetInternal([]byte(key))
		if err != nil {
			return fmt.Errorf("dump index: internal %s: %w", key, err)
		}
		val := strconv.Quote(string(v))
		if key == "dshq.generation" {
			if gen, err = readU64(v); err != nil {
				return fmt.Errorf("dump index: generation: %w", err)
			}
			val = strconv.FormatUint(gen, 10)
		}
		d.add("index-meta", "", key, val)
	}
	return d.docs(idx, gen)
}

// docs dumps every document of idx in doc id order.
func (d *dumper) docs(idx bleve.Index, gen uint64) error {
	const page = 5000
	var after []string
	for {
		req := bleve.NewSearchRequestOptions(bleve.NewMatchAllQuery(), page, 0, false)
		req.SortByCustom(search.SortOrder{&search.SortDocID{}})
		req.Score = "none"
		req.Fields = []string{"*"}
		req.SearchAfter = after
		res, err := idx.Search(req)
		if err != nil {
			return fmt.Errorf("dump index: list docs: %w", err)
		}
		for _, h := range res.Hits {
			if err := d.doc(h, gen); err != nil {
				return fmt.Errorf("dump index: doc %q: %w", h.ID, err)
			}
		}
		if len(res.Hits) < page {
			return nil
		}
		after = []string{res.Hits[len(res.Hits)-1].ID}
	}
}

func (d *dumper) doc(h *search.DocumentMatch, gen uint64) error {
	idGen, id, seq, err := index.ParseDocID(h.ID)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(h.Fields))
	for name := range h.Fields {
		if name != "cgen" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, name := range names {
		fmt.Fprintf(&b, "%s=%s ", name, fieldText(h.Fields[name]))
	}
	cgen, ok := h.Fields["cgen"].(float64)
	low, known := d.streamSeqs[docKey{id, seq}]
	switch {
	case !ok:
		b.WriteString("cgen=missing")
	case uint64(cgen) != idGen:
		fmt.Fprintf(&b, "cgen=%v but the doc id says %d", cgen, idGen)
	case !known:
		fmt.Fprintf(&b, "cgen=%v of an event the store does not hold", cgen)
	case cgen < float64(low) || cgen > float64(gen):
		fmt.Fprintf(&b, "cgen=%v outside [%d,%d]", cgen, low, gen)
	default:
		b.WriteString("cgen=ok")
	}
	d.add("index", id, "seq "+strconv.FormatInt(seq, 10), b.String())
	return nil
}

// fieldText renders a stored field value deterministically.
func fieldText(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = fieldText(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		return strconv.Quote(fmt.Sprint(x))
	}
}
