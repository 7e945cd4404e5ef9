package projection

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// ErrCorruptStore is wrapped by every failure to open a store that a rebuild
// from the stream repairs: an unreadable or truncated file, a checksum
// failure, a missing bucket, or another schema version.
var ErrCorruptStore = errors.New("projection store is corrupt or incompatible")

// store is one bbolt projection file.
type store struct {
	db    *bolt.DB
	path  string
	epoch string
	// unsynced is true when the store commits without fsync (durable.go).
	unsynced bool
	// resumed is true when the store was opened after its last process
	// stopped without Close on this boot (durable.go).
	resumed bool
}

// storeOption configures openStore.
type storeOption func(*storeConfig)

type storeConfig struct {
	boot string // the running boot; "" syncs every commit
}

// withBoot makes the store commit without fsync during boot (durable.go);
// an empty boot keeps every commit synced.
func withBoot(boot string) storeOption { return func(c *storeConfig) { c.boot = boot } }

// sessionValue is the stored form of dshq.SessionInfo.
type sessionValue struct {
	HeaderRaw      json.RawMessage `json:"h"`
	Header         dshq.Header     `json:"hd"`
	FormatVersion  int             `json:"fv"`
	Inherited      int64           `json:"ic"`
	Token          string          `json:"tok"`
	Tenant         string          `json:"tn,omitempty"`
	HeaderSeq      uint64          `json:"hs"`
	EventCount     int64           `json:"n"`
	Title          *dshq.Title     `json:"title,omitempty"`
	LastStepStart  int64           `json:"step"`
	InvalidFrom    int64           `json:"inv"`
	InvalidReason  string          `json:"why,omitempty"`
	ReclassifiedAt uint64          `json:"rc"`
	UpdatedAt      uint64          `json:"up"`
	// Sum is the session's summary (summary.go).
	Sum summaryState `json:"sum"`
}

// memSize approximates the memory of v: its strings and raw header twice
// over (the raw header and the parsed one), its title, and the struct.
func (v *sessionValue) memSize() int64 {
	n := 2*len(v.HeaderRaw) + len(v.Token) + len(v.Tenant) + len(v.InvalidReason) + 256
	for _, id := range v.Sum.Recent {
		n += len(id) + 16
	}
	if v.Title != nil {
		n += len(v.Title.Title) + 8*len(v.Title.MessageSeqs) + 64
	}
	return int64(n)
}

// key is the session's log key: its subject token, or <tenant>.<token>.
func (v *sessionValue) key() string { return record.LogKey(v.Tenant, v.Token) }

func (v *sessionValue) info() dshq.SessionInfo {
	return dshq.SessionInfo{
		Header: dshq.HeaderRecord{
			Header:              v.Header,
			FormatVersion:       v.FormatVersion,
			InheritedEventCount: v.Inherited,
			Raw:                 v.HeaderRaw,
		},
		Token:          v.Token,
		Tenant:         v.Tenant,
		HeaderSeq:      v.HeaderSeq,
		EventCount:     v.EventCount,
		Title:          v.Title,
		LastStepStart:  v.LastStepStart,
		InvalidFrom:    v.InvalidFrom,
		InvalidReason:  v.InvalidReason,
		ReclassifiedAt: v.ReclassifiedAt,
		UpdatedAt:      v.UpdatedAt,
		OrderKey:       createdKey(v.Header.CreatedAt, v.Header.ID),
		Summary:        v.summary(),
	}
}

func newEpoch() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// openStore opens (or creates) the bbolt file at path. A new file gets a
// fresh epoch. A file that cannot be read, fails bbolt's consistency check
// (when verify) or has another schema version fails with ErrCorruptStore;
// so does one that held commits not on disk when the system stopped
// (ErrUnsyncedAtStop). With withBoot, commits skip fsync (durable.go).
func openStore(path string, verify bool, lockTimeout time.Duration, opts ...storeOption) (s *store, err error) {
	var cfg storeConfig
	for _, o := range opts {
		o(&cfg)
	}
	_, statErr := os.Stat(path)
	fresh := errors.Is(statErr, os.ErrNotExist)
	defer func() {
		// bbolt panics on some garbled pages; a corrupt file must be an
		// error, never a crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: open %s: %v", ErrCorruptStore, path, r)
		}
	}()
	if err := checkBoltFile(path); err != nil {
		return nil, err
	}
	resumed, err := checkUnsynced(path, cfg.boot)
	if err != nil {
		return nil, err
	}
	unsynced := cfg.boot != ""
	// The freelist as a hash map: allocation in a large store stays O(1),
	// as etcd runs bbolt. (NoFreelistSync is not used: its rebuilding scan
	// on open runs in a goroutine of bbolt's, where a garbled page panics
	// beyond our recover.)
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: lockTimeout, FreelistType: bolt.FreelistMapType,
		NoSync: unsynced, NoGrowSync: unsynced, InitialMmapSize: initialMmapSize,
	})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open %s: file is locked by another process: %w", path, err)
		}
		return nil, fmt.Errorf("%w: open %s: %v", ErrCorruptStore, path, err)
	}
	// Open writes nothing without fsync; the first commit that skips it
	// comes after the marker is on disk.
	if unsynced && !resumed {
		if err := markUnsynced(path, cfg.boot); err != nil {
			db.Close()
			return nil, err
		}
	}
	s = &store{db: db, path: path, unsynced: unsynced, resumed: resumed}
	if err := s.init(fresh, verify); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// initialMmapSize is the address space bbolt maps at open. A commit that
// grows the file past the mapping remaps it, and a remap waits for every
// open read transaction while every new one waits behind it: with a
// mapping this large a store up to 1 GiB never remaps, so a slow reader
// never stalls the projector and the other readers. It is address space
// only: the kernel reads in the file's pages as they are touched (resident
// memory is the same), and the file grows by what is written.
const initialMmapSize = 1 << 30

func (s *store) init(fresh, verify bool) error {
	if fresh {
		return s.db.Update(func(tx *bolt.Tx) error {
			for _, b := range allBuckets {
				if _, err := tx.CreateBucketIfNotExists(b); err != nil {
					return err
				}
			}
			s.epoch = newEpoch()
			meta := tx.Bucket(bucketMeta)
			if err := meta.Put(metaSchema, u64(SchemaVersion)); err != nil {
				return err
			}
			if err := meta.Put(metaCheckpoint, u64(0)); err != nil {
				return err
			}
			return meta.Put(metaEpoch, []byte(s.epoch))
		})
	}
	return s.db.View(func(tx *bolt.Tx) error {
		if verify {
			var first error
			for err := range tx.Check() { // drain: the checker goroutine ends only when read out
				if first == nil {
					first = err
				}
			}
			if first != nil {
				return fmt.Errorf("%w: %s: %v", ErrCorruptStore, s.path, first)
			}
		}
		for _, b := range allBuckets {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("%w: %s: bucket %q is missing", ErrCorruptStore, s.path, b)
			}
		}
		meta := tx.Bucket(bucketMeta)
		v, err := readU64(meta.Get(metaSchema))
		if err != nil || v != SchemaVersion {
			return fmt.Errorf("%w: %s: schema version %d, want %d", ErrCorruptStore, s.path, v, SchemaVersion)
		}
		if _, err := readU64(meta.Get(metaCheckpoint)); err != nil {
			return fmt.Errorf("%w: %s: checkpoint: %v", ErrCorruptStore, s.path, err)
		}
		s.epoch = string(meta.Get(metaEpoch))
		if s.epoch == "" {
			return fmt.Errorf("%w: %s: no epoch", ErrCorruptStore, s.path)
		}
		return nil
	})
}

// checkpoint returns the stream sequence the store has applied.
func (s *store) checkpoint() (uint64, error) {
	var cp uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		cp, err = readU64(tx.Bucket(bucketMeta).Get(metaCheckpoint))
		return err
	})
	return cp, err
}

// close closes the store. One that commits without fsync is synced first
// and its marker removed; when the sync fails, the marker is rewritten to
// name no boot, so that the next open rebuilds it (durable.go).
func (s *store) close() error {
	if !s.unsynced {
		return s.db.Close()
	}
	if err := s.db.View(func(*bolt.Tx) error { return nil }); errors.Is(err, bolt.ErrDatabaseNotOpen) {
		// Closed under the projector (crash tests): its commits are in
		// the page cache, as after a crash; the marker stays.
		return nil
	}
	serr := s.db.Sync()
	cerr := s.db.Close()
	if serr != nil {
		return errors.Join(fmt.Errorf("sync store: %w", serr), cerr, markUnsynced(s.path, ""))
	}
	return errors.Join(cerr, clearUnsynced(s.path))
}

func getSession(tx *bolt.Tx, id string) (*sessionValue, error) {
	b := tx.Bucket(bucketSessions).Get([]byte(id))
	if b == nil {
		return nil, nil
	}
	var v sessionValue
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("stored session %q: %w", id, err)
	}
	return &v, nil
}

func putSession(tx *bolt.Tx, v *sessionValue) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketSessions).Put([]byte(v.Header.ID), b)
}

func getEvent(tx *bolt.Tx, sk []byte, seq int64) (eventValue, bool, error) {
	b := tx.Bucket(bucketEvents).Get(seqKey(sk, seq))
	if b == nil {
		return eventValue{}, false, nil
	}
	v, err := unmarshalEvent(b)
	return v, err == nil, err
}
