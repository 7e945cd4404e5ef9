package engine

import (
	"context"
	"fmt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/usage"
)

// UsageSource is the store access of usage.report: the projection's usage
// aggregates (projection.UsageReader). A Snapshot that is one answers
// usage.report; any other answers SESSION_QUERY_PERSISTENCE_FAILED.
type UsageSource = projection.UsageReader

// UsageRows implements UsageSource over the projection's snapshot.
func (a snapshotAdapter) UsageRows(from, to uint32, fn func(usage.Row) bool) error {
	r, ok := a.s.(projection.UsageReader)
	if !ok {
		return fmt.Errorf("the projection keeps no usage aggregates")
	}
	return r.UsageRows(from, to, fn)
}

// UsageSessions implements UsageSource over the projection's snapshot.
func (a snapshotAdapter) UsageSessions(fn func(string, usage.SessionDims) bool) error {
	r, ok := a.s.(projection.UsageReader)
	if !ok {
		return fmt.Errorf("the projection keeps no usage aggregates")
	}
	return r.UsageSessions(fn)
}

// UsageSession implements UsageSource over the projection's snapshot.
func (a snapshotAdapter) UsageSession(id string) (usage.SessionDims, bool) {
	r, ok := a.s.(projection.UsageReader)
	if !ok {
		return usage.SessionDims{}, false
	}
	return r.UsageSession(id)
}

// usageDimsMax bounds the sessions whose usage dimensions an Engine keeps
// (about 150 bytes each).
const usageDimsMax = 1 << 20

// usageReport answers usage.report: the aggregate rows of the request's
// time range, summed by usage.Aggregator. Its cost is the number of rows
// in the range (one per session, model, branch and 15 minutes), never the
// number of events.
func (e *Engine) usageReport(_ context.Context, snap Snapshot, req *query.Request) (any, error) {
	src, ok := snap.(UsageSource)
	if !ok || req.Usage == nil {
		return nil, dshq.Errorf(dshq.CodePersistenceFailed, "usage.report: this projection keeps no usage aggregates")
	}
	return UsageReport(snap.Generation(), src, req.Usage, e.usageDims)
}

// UsageReport sums the rows of src for u: the reply of usage.report at
// generation gen.
// cache (nil for none) keeps the sessions' dimensions between reports.
func UsageReport(gen uint64, src UsageSource, u *query.UsageRequest, cache *usage.DimsCache) (query.UsageReply, error) {
	rep, err := usage.Build(u.Query, u.Prices, src, cache)
	if err != nil {
		return query.UsageReply{}, fmt.Errorf("usage.report: %w", err)
	}
	return query.UsageReply{Report: rep, Generation: gen}, nil
}
