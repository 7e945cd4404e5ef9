package shards

import (
	"sync"

	"github.com/dshq/dshq/query/wire"
)

// UsageReport implements engine.UsageReporter: every shard sums its own
// sessions' usage and the reports are added (wire.MergeUsage). The shards
// hold disjoint sessions, so the sum is the report of the whole; it
// carries the least of their generations. One round trip per shard, all
// at once.
func (sn *snapshot) UsageReport(req *wire.Request) (wire.UsageReply, error) {
	parts := make([]wire.UsageReply, len(sn.src.conns))
	var mu sync.Mutex // guards parts
	err := sn.src.each(func(i int) error {
		ctx, cancel := bound(sn.ctx, req.TimeoutMs)
		defer cancel()
		reply, err := sn.src.conns[i].Ask(ctx, req, req.Body, nil)
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
