package query

import (
	"context"

	"github.com/dshq/dshq/query/wire"
)

// Usage asks usage.report.
func (c *Client) Usage(ctx context.Context, body wire.UsageBody, opts ...CallOption) (wire.UsageReply, error) {
	var out wire.UsageReply
	err := c.call(ctx, wire.EndpointUsageReport, body, &out, opts)
	return out, err
}

// SessionUsage returns one session's usage with its subagents' (rolled
// up), by model: what a session header or list column shows.
func (c *Client) SessionUsage(ctx context.Context, sessionIDs []string, opts ...CallOption) (wire.UsageReply, error) {
	return c.Usage(ctx, wire.UsageBody{SessionIDs: sessionIDs, GroupBy: []string{"session"}, Rollup: true, Limit: wire.MaxUsageLimit}, opts...)
}
