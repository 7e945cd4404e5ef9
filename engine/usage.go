package engine

import (
	"context"
	"fmt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/usage"
)

// UsageSource is a Snapshot that keeps usage aggregates (the projection's,
// through the local source): usage.report sums its rows.
type UsageSource = usage.Source

// UsageReporter is a Snapshot that answers usage.report whole: a
// partitioned projection's, whose shards each sum their own sessions.
type UsageReporter interface {
	UsageReport(req *wire.Request) (wire.UsageReply, error)
}

// usageDimsMax bounds the sessions whose usage dimensions an Engine keeps
// (about 150 bytes each).
const usageDimsMax = 1 << 20

// usageReport answers usage.report: the aggregate rows of the request's
// time range, summed by usage.Build. Its cost is the number of rows in the
// range (one per session, model, branch and 15 minutes), never the number
// of events. A snapshot of neither kind answers
// SESSION_QUERY_PERSISTENCE_FAILED.
func (e *Engine) usageReport(_ context.Context, snap Snapshot, req *wire.Request) (any, error) {
	if req.Usage == nil {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "usage.report: no usage request")
	}
	if r, ok := snap.(UsageReporter); ok {
		return r.UsageReport(req)
	}
	src, ok := snap.(UsageSource)
	if !ok {
		return nil, dshq.Errorf(dshq.CodePersistenceFailed, "usage.report: this projection keeps no usage aggregates")
	}
	return UsageReport(snap.Generation(), src, req.Usage, e.usageDims)
}

// UsageReport sums the rows of src for u: the reply of usage.report at
// generation gen. cache (nil for none) keeps the sessions' dimensions
// between reports.
func UsageReport(gen uint64, src UsageSource, u *wire.UsageRequest, cache *usage.DimsCache) (wire.UsageReply, error) {
	rep, err := usage.Build(u.Query, u.Prices, src, cache)
	if err != nil {
		return wire.UsageReply{}, fmt.Errorf("usage.report: %w", err)
	}
	return wire.UsageReply{Report: rep, Generation: gen}, nil
}
