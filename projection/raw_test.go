package projection

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/record"
)

func TestRawTail_RoundTrips(t *testing.T) {
	noise := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	huge := []byte(`{"type":"tool/result","seq":7,"time":1,"data":{"content":"` +
		strings.Repeat("the retry budget of the config parser ", record.DefaultMaxRecordBytes/40) + `"}}`)
	for _, c := range []struct {
		name, text string
		raw        []byte
		codec      byte
	}{
		{"an empty record and text are stored plain", "", nil, rawPlain},
		{"a short record is compressed against the dictionary", "hello",
			[]byte(`{"type":"user/message","seq":3,"time":1789000200001,"data":{"role":"user","content":[{"type":"text","text":"hello"}]},"surfaceOp":"append"}`), rawS2Dict1},
		{"bytes that do not compress are stored plain", "", noise, rawPlain},
		{"a record at the size limit round trips", "retry budget", huge, rawS2Dict1},
		{"a text longer than its record round trips", strings.Repeat("text ", 100), []byte(`{}`), rawS2Dict1},
	} {
		t.Run(c.name, func(t *testing.T) {
			tail := rawTail(c.text, c.raw)
			_, k := binary.Uvarint(tail)
			if tail[k] != c.codec {
				t.Errorf("codec %d, want %d", tail[k], c.codec)
			}
			text, raw, err := decodeRawTail(tail)
			if err != nil || text != c.text || !bytes.Equal(raw, c.raw) {
				t.Fatalf("decoded %d bytes, text %.40q, %v; want %d bytes, %.40q", len(raw), text, err, len(c.raw), c.text)
			}
		})
	}
}

// TestEventValue_StoresTheCorpusInLessThanHalf marshals every event of the
// deepseek-harness corpus and requires the values to take less than half
// the bytes of the version 5 layout, which held the text and record plain.
func TestEventValue_StoresTheCorpusInLessThanHalf(t *testing.T) {
	var plain, stored int
	for _, l := range readCorpus(t, corpus.Require(t)) {
		for i, ev := range l.events {
			v := eventValue{Type: ev.Type, Time: ev.Time, Surface: dshq.SurfaceCurrent, StreamSeq: uint64(i + 1),
				OrderKey: ev.Seq, Text: fold.Text(ev), Raw: ev.Raw}
			b := v.marshal()
			got, err := unmarshalEvent(b)
			if err != nil || got.Text != v.Text || !bytes.Equal(got.Raw, v.Raw) {
				t.Fatalf("%s seq %d: round trip: %v", l.name, ev.Seq, err)
			}
			stored += len(b)
			plain += len(b) - len(got.tail) + binary.PutUvarint(make([]byte, 10), uint64(len(v.Text))) + len(v.Text) + len(v.Raw)
		}
	}
	t.Logf("event values: %d bytes, %d in the plain layout (%.3f)", stored, plain, float64(stored)/float64(plain))
	if stored*2 >= plain {
		t.Errorf("event values take %d bytes, the plain layout %d: not less than half", stored, plain)
	}
}

func TestEventValue_RewritingTheSurfaceKeepsTheStoredRecord(t *testing.T) {
	v := eventValue{Type: "user/message", Surface: dshq.SurfaceCurrent, Text: "hi", Raw: []byte(`{"type":"user/message","seq":0}`)}
	first, err := unmarshalEvent(v.marshal())
	if err != nil {
		t.Fatal(err)
	}
	first.Surface = dshq.SurfaceShadowed
	again, err := unmarshalEvent(first.marshal())
	if err != nil || again.Surface != dshq.SurfaceShadowed || again.Text != v.Text || !bytes.Equal(again.Raw, v.Raw) {
		t.Fatalf("rewritten value %+v, %v", again, err)
	}
	if !bytes.Equal(again.tail, first.tail) {
		t.Errorf("the tail was encoded again: %x, read %x", again.tail, first.tail)
	}
}

func TestEventValue_CorruptTailIsACorruptStore(t *testing.T) {
	good := eventValue{Type: "tool/result", Text: "retry budget",
		Raw: []byte(`{"type":"tool/result","seq":4,"time":5,"data":{"content":[{"type":"text","text":"retry budget"}]}}`)}.marshal()
	head := len(good) - len(rawTail("retry budget", []byte(`{"type":"tool/result","seq":4,"time":5,"data":{"content":[{"type":"text","text":"retry budget"}]}}`)))
	withTail := func(tail ...[]byte) []byte {
		return append(append([]byte(nil), good[:head]...), bytes.Join(tail, nil)...)
	}
	claim := binary.AppendUvarint(nil, maxRawTailBytes+1)
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"a value cut before its tail", good[:head]},
		{"a value cut inside its compressed block", good[:len(good)-3]},
		{"an unknown codec", withTail([]byte{0, 9}, []byte("{}"))},
		{"a block that claims more than the largest record", withTail([]byte{0, rawS2Dict1}, claim, []byte{0})},
		{"a block whose copies reach before the dictionary", withTail([]byte{0, rawS2Dict1}, []byte{40, 0xfe, 0xff, 0xff})},
		{"a text longer than the tail", withTail([]byte{50, rawPlain}, []byte("{}"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := unmarshalEvent(c.b)
			if !errors.Is(err, ErrCorruptStore) {
				t.Fatalf("error %v, want an ErrCorruptStore", err)
			}
		})
	}
}

func TestRawDict1_IsAValidDictionary(t *testing.T) {
	if rawDict1() == nil {
		t.Fatalf("rawdict1.jsonl (%d bytes) is not an s2 dictionary (%d to %d bytes)", len(rawDict1Bytes), s2.MinDictSize, s2.MaxDictSize)
	}
}

// instanceDB returns the store file of the projection instance dir serves.
func instanceDB(t *testing.T, dir string) string {
	t.Helper()
	name, err := os.ReadFile(filepath.Join(dir, currentFile))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, strings.TrimSpace(string(name)), "projection.db")
}

// rewriteEvents replaces every stored event value of the store at path by
// edit's, and sets the schema version.
func rewriteEvents(t *testing.T, path string, schema uint64, edit func(eventValue) []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		vals := map[string][]byte{}
		if err := events.ForEach(func(k, b []byte) error {
			v, err := unmarshalEvent(b)
			if err != nil {
				return err
			}
			vals[string(k)] = edit(v)
			return nil
		}); err != nil {
			return err
		}
		for k, b := range vals {
			if err := events.Put([]byte(k), b); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaSchema, u64(schema))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sessionRaws returns the raw records of a session's events, in seq order.
func sessionRaws(t *testing.T, p *Projector, id string) [][]byte {
	var out [][]byte
	view(t, p, func(s Snapshot) error {
		return s.Events(id, 0, func(ev dshq.StoredEvent) bool {
			out = append(out, ev.Raw)
			return true
		})
	})
	return out
}

func TestOpen_RebuildsAVersion5StoreThatHeldRecordsPlain(t *testing.T) {
	e := newEnv(t)
	recs := mixedCorpus(t)
	last := e.publishAll(recs)
	dir := t.TempDir()
	r := e.start(dir)
	waitGen(t, r.p, last)
	want, epoch := dumpStore(t, r.p), r.p.Epoch()
	r.stop()
	// Version 5 stored the text's length, the text, then the record.
	rewriteEvents(t, instanceDB(t, dir), 5, func(v eventValue) []byte {
		v.tail = append(binary.AppendUvarint(nil, uint64(len(v.Text))), v.Text...)
		v.tail = append(v.tail, v.Raw...)
		return v.marshal()
	})

	again := e.start(dir)
	defer again.stop()
	if again.p.Epoch() == epoch {
		t.Fatal("a version 5 store was opened, not rebuilt")
	}
	waitGen(t, again.p, last)
	if got := dumpStore(t, again.p); got != want {
		t.Errorf("rebuilt store differs from the first projection:\n%s", diffLines(got, want))
	}
	var published [][]byte
	tok := token(t, "s-0")
	for _, rec := range recs {
		if rec[0] == tok {
			published = append(published, []byte(rec[1]))
		}
	}
	if got := sessionRaws(t, again.p, "s-0"); !slices.EqualFunc(got, published[1:], bytes.Equal) {
		t.Errorf("session s-0 reads %d records, not the %d published byte for byte", len(got), len(published)-1)
	}
}

func TestSnapshot_ACorruptStoredRecordIsAnErrorNotAPanic(t *testing.T) {
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	dir := t.TempDir()
	r := e.start(dir)
	waitGen(t, r.p, last)
	r.stop()
	rewriteEvents(t, instanceDB(t, dir), SchemaVersion, func(v eventValue) []byte {
		v.tail = []byte{0, rawS2Dict1, 40, 0xfe, 0xff, 0xff}
		return v.marshal()
	})

	again := e.start(dir)
	defer again.stop()
	view(t, again.p, func(s Snapshot) error {
		if err := s.Events("s-0", 0, func(dshq.StoredEvent) bool { return true }); !errors.Is(err, ErrCorruptStore) {
			t.Errorf("reading the session's events: %v, want an ErrCorruptStore", err)
		}
		if ev, ok := s.Event("s-0", 1); ok {
			t.Errorf("a corrupt event was read: %+v", ev)
		}
		return nil
	})
}

// TestRawDict1_NeverChanges pins the dictionary: stored blocks decode only
// against the bytes they were encoded with, and a block decoded against
// other bytes is wrong without an error. A new dictionary is a new codec.
func TestRawDict1_NeverChanges(t *testing.T) {
	const want = "1a8a330388d4e0320aac95194a83e9dcd7bb6aff8de895514d3cd4fba2e3f4f4"
	if got := fmt.Sprintf("%x", sha256.Sum256(rawDict1Bytes)); got != want {
		t.Errorf("rawdict1.jsonl has sha256 %s, want %s", got, want)
	}
}
