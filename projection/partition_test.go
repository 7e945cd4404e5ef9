package projection

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dshq/dshq"
)

// TestPartitionedProjectorsSplitTheStream: three partitioned projectors
// each hold exactly the sessions dshq.ShardOf gives them, together every
// session once, and each reaches the stream's last sequence as its
// generation (the records of the others' sessions move it too). A
// directory built for one partition, opened for another, is rebuilt.
func TestPartitionedProjectorsSplitTheStream(t *testing.T) {
	e := newEnv(t)
	last := e.publishSessions("s", 30, 3)
	const shards = 3
	dirs := make([]string, shards)
	var all []string
	for i := range shards {
		dirs[i] = t.TempDir()
		r := e.start(dirs[i], WithPartition(i, shards), WithDurable(dshq.ShardDurable(i, shards)))
		waitGen(t, r.p, last)
		var held []string
		view(t, r.p, func(s Snapshot) error {
			return s.SessionsByCreated(nil, func(info dshq.SessionInfo) bool {
				held = append(held, info.Header.Header.ID)
				if info.EventCount != 3 {
					t.Errorf("shard %d: session %s has %d events, want 3", i, info.Header.Header.ID, info.EventCount)
				}
				return true
			})
		})
		for _, id := range held {
			if got := dshq.ShardOf(id, shards); got != i {
				t.Errorf("shard %d holds %s, of shard %d", i, id, got)
			}
		}
		if len(held) == 0 {
			t.Errorf("shard %d holds no session", i)
		}
		all = append(all, held...)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(all)
	var want []string
	for i := range 30 {
		want = append(want, fmt.Sprintf("s-%d", i))
	}
	slices.Sort(want)
	if !slices.Equal(all, want) {
		t.Fatalf("the shards hold %v, want each of %v once", all, want)
	}

	// Shard 0's directory opened as the whole stream: rebuilt, not served
	// as if it held every session.
	r := e.start(dirs[0])
	waitGen(t, r.p, last)
	wantSessions(t, r.p, "s", 30, 3)
	if got := r.p.Partition().String(); got != "0/1" {
		t.Fatalf("partition %s, want 0/1", got)
	}
}

// TestPartitionRefused: a partition that is not one is refused by Open.
func TestPartitionRefused(t *testing.T) {
	e := newEnv(t)
	for _, p := range [][2]int{{3, 3}, {-1, 2}, {0, dshq.MaxShards + 1}} {
		if _, err := Open(t.Context(), e.js, t.TempDir(), WithPartition(p[0], p[1]), WithLogger(quietLogger())); err == nil {
			t.Errorf("shard %d of %d was opened", p[0], p[1])
		}
	}
}
