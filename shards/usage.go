package shards

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/usage"
)

// UsageReport implements engine.UsageReporter: every shard sums its own
// sessions' usage and the reports are added (wire.MergeUsage). The shards
// hold disjoint sessions, so the sum is the report of the whole; it
// carries the least of their generations. One round trip per shard, all
// at once.
//
// A group of a report may sum the sessions of several shards (a day, a
// model, a project; a root session with its descendants' under roll-up):
// the shards are then asked for up to wire.MaxUsageLimit groups each, and
// the limit is applied to their sum, so that the first groups of the whole
// are not those that lead in one shard. Only a report by session without
// roll-up has each group in one shard, and keeps the request's limit.
func (sn *snapshot) UsageReport(req *wire.Request) (wire.UsageReply, error) {
	body, err := usageShardBody(req)
	if err != nil {
		return wire.UsageReply{}, err
	}
	parts := make([]wire.UsageReply, len(sn.src.conns))
	var mu sync.Mutex // guards parts
	err = sn.src.each(func(i int) error {
		ctx, cancel := bound(sn.ctx, req.TimeoutMs)
		defer cancel()
		reply, err := sn.src.conns[i].Ask(ctx, req, body, nil)
		if err != nil {
			return err
		}
		var out wire.UsageReply
		if err := decodeReply(sn.src.conns[i].Token(), wire.EndpointUsageReport, reply, &out); err != nil {
			return err
		}
		mu.Lock()
		parts[i] = out
		mu.Unlock()
		return nil
	})
	if err != nil {
		return wire.UsageReply{}, err
	}
	return wire.MergeUsage(req.Usage, parts), nil
}

// usageShardBody is the body a shard is asked: the request's, with the
// most groups when a group may span shards (UsageReport).
func usageShardBody(req *wire.Request) ([]byte, error) {
	q := req.Usage.Query
	if slices.Contains(q.GroupBy, usage.Session) && !q.Rollup {
		return req.Body, nil
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(req.Body, &f); err != nil {
		return nil, fmt.Errorf("usage.report: the request's body: %w", err)
	}
	f["limit"] = json.RawMessage(fmt.Sprint(wire.MaxUsageLimit))
	return json.Marshal(f)
}
