package dshq

import (
	"hash/fnv"
	"strconv"
)

// MaxShards bounds the partition count of a partitioned projection: the
// query service asks every shard for a list or a lineage.
const MaxShards = 64

// ShardOf returns the projection shard (0 to shards-1) that owns session id
// when the projection is partitioned into shards: FNV-1a (64 bits) of the
// id's UTF-8 bytes, modulo shards (docs/protocol.md, "Partitioned
// projections"). Every process computes it the same way, forever: the
// projector to keep only its sessions, the query service to ask the shard
// that holds one. shards < 2 is one shard, 0.
func ShardOf(id string, shards int) int {
	if shards < 2 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(shards))
}

// ShardToken returns the subject token of shard shard of a projection
// partitioned into shards: "<shard>of<shards>" (e.g. "1of3"), or
// DefaultShard ("0") for the whole stream (shards < 2). Each partitioning
// has subjects of its own (dsh.proj.<token>.v1.…), so that a query service
// never asks a projection partitioned otherwise than it expects: a shard it
// does not find is missing, never answered by another partition's.
func ShardToken(shard, shards int) string {
	if shards < 2 {
		return DefaultShard
	}
	return strconv.Itoa(shard) + "of" + strconv.Itoa(shards)
}
