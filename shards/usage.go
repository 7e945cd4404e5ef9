package shards

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/usage"
)

// usageShardLimit is the most groups a shard is first asked for when a
// group may span shards: about 800 KB of reply for a report by session,
// within the 1 MiB reply limit.
const usageShardLimit = 2000

// UsageReport implements engine.UsageReporter: every shard sums its own
// sessions' usage and the reports are added (wire.MergeUsage). The shards
// hold disjoint sessions, so the sum is the report of the whole; it
// carries the least of their generations. One round trip per shard, all
// at once.
//
// A group of a report may sum the sessions of several shards (a day, a
// model, a project; a root session with its descendants' under roll-up):
// the shards are then asked for up to usageShardLimit groups each (half as
// many again while a shard's reply would exceed the reply limit, never
// fewer than the request's limit) and the limit is cut from their sum, so
// that the first groups of the whole are not those that lead in one shard.
// A report by session without roll-up has each group in one shard and
// asks for the request's limit.
func (sn *snapshot) UsageReport(req *wire.Request) (wire.UsageReply, error) {
	q := req.Usage.Query
	wide := max(q.Limit, usageShardLimit)
	if slices.Contains(q.GroupBy, usage.Session) && !q.Rollup {
		wide = q.Limit
	}
	parts := make([]wire.UsageReply, len(sn.src.conns))
	var mu sync.Mutex // guards parts
	err := sn.src.each(func(i int) error {
		for limit := wide; ; limit = max(q.Limit, limit/2) {
			out, err := sn.askUsage(i, req, limit)
			if dshq.ErrorCode(err) == dshq.CodeReplyTooLarge && limit > q.Limit {
				continue
			}
			if err != nil {
				return err
			}
			mu.Lock()
			parts[i] = out
			mu.Unlock()
			return nil
		}
	})
	if err != nil {
		return wire.UsageReply{}, err
	}
	return wire.MergeUsage(req.Usage, parts), nil
}

// askUsage asks shard i for req's report cut to limit groups.
func (sn *snapshot) askUsage(i int, req *wire.Request, limit int) (wire.UsageReply, error) {
	body := req.Body
	if limit != req.Usage.Query.Limit {
		var f map[string]json.RawMessage
		if err := json.Unmarshal(req.Body, &f); err != nil {
			return wire.UsageReply{}, fmt.Errorf("usage.report: the request's body: %w", err)
		}
		f["limit"] = json.RawMessage(fmt.Sprint(limit))
		var err error
		if body, err = json.Marshal(f); err != nil {
			return wire.UsageReply{}, err
		}
	}
	ctx, cancel := bound(sn.ctx, req.TimeoutMs)
	defer cancel()
	reply, err := sn.src.conns[i].Ask(ctx, req, body, nil)
	if err != nil {
		return wire.UsageReply{}, err
	}
	var out wire.UsageReply
	err = decodeReply(sn.src.conns[i].Token(), wire.EndpointUsageReport, reply, &out)
	return out, err
}
