package query

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// ReplicaStatus is what a replica of a projection shard announces on
// dsh.proj.<shard>.v1.status (dshq.ShardStatusSubject) every
// ReplicaStatusEvery and whenever its generation moves: the query service
// sends each request to a replica that has reached what the request needs
// (docs/protocol.md#3-the-trusted-query-api).
type ReplicaStatus struct {
	// Replica names the replica: its projector's durable consumer. Its
	// endpoints are dsh.proj.<shard>.v1.replica.<replica>.<endpoint>
	// (dshq.ShardReplicaSubject).
	Replica string `json:"replica"`
	// Lineage is the projection's lineage: cursors bind to it.
	Lineage string `json:"lineage"`
	// Generation is the generation the replica has applied.
	Generation uint64 `json:"generation"`
	// CatchingUp is true while the replica works off a backlog.
	CatchingUp bool `json:"catchingUp,omitempty"`
	// Gone is true in the last announcement of a replica that stops.
	Gone bool `json:"gone,omitempty"`
	// Shards is the number of shards the replica's projection is
	// partitioned into (omitted, 0: not partitioned, one shard). A query
	// service asks only the replicas of its own partitioning.
	Shards int `json:"shards,omitempty"`
}

// ReplicaStatusEvery is how often a replica announces its status when its
// generation does not move; a replica not heard from for replicaExpiry is
// taken for dead.
const (
	ReplicaStatusEvery = 250 * time.Millisecond
	replicaExpiry      = 4 * ReplicaStatusEvery
)

// errReplicaGone: the replica a request was sent to stopped announcing
// itself (it died, or stopped) before it answered; the request is sent to
// another.
var errReplicaGone = errors.New("the replica stopped before it answered")

// replicaTable follows the announcements of a shard's replicas.
type replicaTable struct {
	sub *nats.Subscription

	mu   sync.Mutex // guards reps
	reps map[string]*replicaEntry

	stop chan struct{}
	done chan struct{}

	// joined is closed (and replaced) when a replica enters reps: the
	// first announcement of a replica, or of one expired while it was
	// only late (a busy machine delays announcements past replicaExpiry).
	joined chan struct{}
}

type replicaEntry struct {
	st   ReplicaStatus
	seen time.Time
	gone chan struct{} // closed when the replica is taken for gone
}

// followReplicas subscribes to the status of shard's replicas; stop ends it.
func followReplicas(nc *nats.Conn, shard string) (*replicaTable, error) {
	t := &replicaTable{reps: map[string]*replicaEntry{}, stop: make(chan struct{}), done: make(chan struct{}), joined: make(chan struct{})}
	sub, err := nc.Subscribe(dshq.ShardStatusSubject(shard), func(m *nats.Msg) {
		var st ReplicaStatus
		if json.Unmarshal(m.Data, &st) != nil || st.Replica == "" {
			return
		}
		t.note(st, time.Now())
	})
	if err != nil {
		return nil, err
	}
	t.sub = sub
	go t.expire()
	return t, nil
}

// note records an announcement.
func (t *replicaTable) note(st ReplicaStatus, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.reps[st.Replica]
	if st.Gone {
		if e != nil {
			close(e.gone)
			delete(t.reps, st.Replica)
		}
		return
	}
	if e == nil {
		e = &replicaEntry{gone: make(chan struct{})}
		t.reps[st.Replica] = e
		close(t.joined)
		t.joined = make(chan struct{})
	}
	e.st, e.seen = st, now
}

// furthestOrJoined is furthest, and when there is no replica, the channel
// closed when one joins.
func (t *replicaTable) furthestOrJoined() (gen uint64, lineage string, ok bool, joined <-chan struct{}) {
	t.mu.Lock()
	j := t.joined
	t.mu.Unlock()
	if gen, lineage, ok = t.furthest(); ok {
		return gen, lineage, true, nil
	}
	return 0, "", false, j
}

// expire drops the replicas not heard from for replicaExpiry.
func (t *replicaTable) expire() {
	defer close(t.done)
	tick := time.NewTicker(ReplicaStatusEvery / 2)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			t.mu.Lock()
			for name, e := range t.reps {
				if now.Sub(e.seen) > replicaExpiry {
					close(e.gone)
					delete(t.reps, name)
				}
			}
			t.mu.Unlock()
		}
	}
}

// close stops following.
func (t *replicaTable) close() {
	_ = t.sub.Unsubscribe()
	close(t.stop)
	<-t.done
}

// pick chooses the replica to send a request to that needs generation need
// (and, for a cursor, lineage; "" = any), among those not in tried: one of
// those that have reached need, at random (reads spread over the
// replicas), else the one furthest ahead (it waits for need within the
// request's timeout). It returns "" when no replica is known, and the
// channel closed if the chosen replica is taken for gone.
func (t *replicaTable) pick(need uint64, lineage string, tried map[string]bool) (string, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ready, any []*replicaEntry
	for name, e := range t.reps {
		if tried[name] || (lineage != "" && e.st.Lineage != lineage) {
			continue
		}
		any = append(any, e)
		if e.st.Generation >= need {
			ready = append(ready, e)
		}
	}
	switch {
	case len(ready) > 0:
		e := ready[rand.IntN(len(ready))]
		return e.st.Replica, e.gone
	case len(any) > 0:
		best := any[0]
		for _, e := range any[1:] {
			if e.st.Generation > best.st.Generation {
				best = e
			}
		}
		return best.st.Replica, best.gone
	}
	if lineage != "" {
		// No replica of the cursor's lineage: any other answers it stale,
		// as it should.
		return t.pickLocked(need, tried)
	}
	return "", nil
}

func (t *replicaTable) pickLocked(need uint64, tried map[string]bool) (string, <-chan struct{}) {
	var best *replicaEntry
	for name, e := range t.reps {
		if !tried[name] && (best == nil || e.st.Generation > best.st.Generation) {
			best = e
		}
	}
	if best == nil {
		return "", nil
	}
	return best.st.Replica, best.gone
}

// needOf returns what req needs of a replica: its minGeneration, or its
// cursor's generation when later, and its cursor's lineage ("" without a
// cursor, or with one that does not decode: the replica answers that
// INVALID_CURSOR).
func needOf(req *wire.Request) (uint64, string) {
	need := req.MinGeneration
	if req.Cursor == "" {
		return need, ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(req.Cursor)
	if err != nil {
		return need, ""
	}
	var c struct {
		Generation uint64 `json:"g"`
		Lineage    string `json:"p"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return need, ""
	}
	return max(need, c.Generation), c.Lineage
}

// forwardReplicas sends a request of endpoint to a replica of shard that
// has reached what it needs (pick), and to another when that one is taken
// for gone before it answers, so that a replica's death costs its
// requests nothing but the time to notice (replicaExpiry). Without known
// replicas it asks the shard's queue group, as a query service that does
// not follow them would.
func forwardReplicas(ctx context.Context, nc *nats.Conn, table *replicaTable, shard, endpoint string, req *wire.Request, body []byte, header nats.Header) (*nats.Msg, error) {
	moved := dshq.ShardSubject(shard, dshq.MovedEndpoint)
	if table == nil {
		return roundTrip(ctx, nc, dshq.ShardSubject(shard, endpoint), moved, body, header, nil)
	}
	need, lineage := needOf(req)
	tried := map[string]bool{}
	for {
		replica, gone := table.pick(need, lineage, tried)
		if replica == "" {
			return roundTrip(ctx, nc, dshq.ShardSubject(shard, endpoint), moved, body, header, nil)
		}
		msg, err := roundTrip(ctx, nc, dshq.ShardReplicaSubject(shard, replica, endpoint), moved, body, header, gone)
		if errors.Is(err, errReplicaGone) || (errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil) {
			tried[replica] = true
			continue
		}
		return msg, err
	}
}
