package projection

import (
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// Partition names the part of the sessions a projection holds: shard Shard
// of Shards, the sessions whose id dshq.ShardOf maps to Shard
// (docs/cluster.md, "Partitioned projectors"). The zero value, and Shards
// 1, is the whole stream.
//
// A partitioned projector reads every record of the stream and applies
// only those of its sessions; it still advances its generation over the
// others, so that every shard's generation is a stream sequence, and a
// shard at generation G holds every record of its sessions up to G. The
// publish path is untouched: a session's records stay on dsh.log.<token>.
type Partition struct {
	Shard, Shards int
}

// WithPartition makes the projector project only shard of shards
// (Partition). A projection directory built for another partition is
// rebuilt from the stream on Open.
func WithPartition(shard, shards int) Option {
	return func(c *config) { c.partition = Partition{Shard: shard, Shards: shards} }
}

// check reports whether p is a partition.
func (p Partition) check() error {
	switch {
	case p.Shards == 0 && p.Shard == 0:
		return nil
	case p.Shards < 1 || p.Shards > dshq.MaxShards:
		return fmt.Errorf("partition: %d shards is not 1 to %d", p.Shards, dshq.MaxShards)
	case p.Shard < 0 || p.Shard >= p.Shards:
		return fmt.Errorf("partition: shard %d is not 0 to %d", p.Shard, p.Shards-1)
	}
	return nil
}

// whole reports whether p is the whole stream.
func (p Partition) whole() bool { return p.Shards <= 1 }

// String is "I/N" ("0/1" for the whole stream).
func (p Partition) String() string {
	if p.whole() {
		return "0/1"
	}
	return strconv.Itoa(p.Shard) + "/" + strconv.Itoa(p.Shards)
}

// Count returns the partition's shard count (1 for the whole stream).
func (p Partition) Count() int { return max(p.Shards, 1) }

// ownsSubject reports whether a record on log subject key (the subject
// after dsh.log.) belongs to p: the session its subject token names is
// p's (ShardOf of the id). A subject that names no valid session (its
// records are quarantined) belongs to shard 0 alone.
func (p Partition) ownsSubject(tok string) bool {
	if p.whole() {
		return true
	}
	id, err := record.ParseSubjectToken(tok)
	if err != nil {
		return p.Shard == 0
	}
	return dshq.ShardOf(id, p.Shards) == p.Shard
}

// metaPartition is the meta key of the partition a store holds ("I/N");
// a store without it holds the whole stream.
var metaPartition = []byte("partition")

// checkPartition makes st a store of partition want: a store that has
// applied nothing records it; one that holds another partition fails with
// ErrCorruptStore (Open rebuilds it from the stream).
func (s *store) checkPartition(want Partition) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		rec := "0/1"
		if b := meta.Get(metaPartition); b != nil {
			rec = string(b)
		}
		if rec == want.String() {
			return nil
		}
		cp, err := readU64(meta.Get(metaCheckpoint))
		if err != nil {
			return fmt.Errorf("%w: %s: checkpoint: %v", ErrCorruptStore, s.path, err)
		}
		if cp == 0 {
			return meta.Put(metaPartition, []byte(want.String()))
		}
		return fmt.Errorf("%w: %s: it holds partition %s, this projector projects %s",
			ErrCorruptStore, s.path, strings.TrimSpace(rec), want)
	})
}

// Partition returns the partition the projector projects.
func (p *Projector) Partition() Partition { return p.cfg.partition }
