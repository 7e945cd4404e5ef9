package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/query"
)

// openStore returns the harness SDK's Store on the session log stream of an
// existing deployment: import and export read and publish the stream (the
// source of truth, not a projection) through it, as every harness does. A
// missing stream is a clear error rather than a new, empty deployment.
// With a tenant (--tenant) it is the tenant's Store (bus.WithTenant), which
// may not read the stream's configuration: it assumes dshq's defaults.
func openStore(ctx context.Context, nc *nats.Conn, stream, tenant string, opts ...bus.Option) (*bus.Store, error) {
	if tenant != "" {
		return bus.NewStore(ctx, nc, append([]bus.Option{bus.WithTenant(tenant), bus.WithStreamConfig(bus.StreamConfig{Name: stream})}, opts...)...)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	// Through a leader election or a server restart, as the SDK's own
	// requests (internal/failover), telling retryNotice(ctx) of each retry.
	var cfg bus.StreamConfig
	notice := retryNotice(ctx)
	err = failover.Retry(ctx, nc, stream, bus.DefaultRetryMaxElapsed, bus.DefaultAttemptTimeout, func(ctx context.Context) error {
		var err error
		cfg, err = bus.DiscoverStreamConfig(ctx, js, stream)
		if err != nil && failover.Transient(err) {
			notice(err)
		}
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("stream %s not found on the server (start dshq serve, or the projector, first)", stream)
	}
	if err != nil {
		return nil, err
	}
	return bus.NewStore(ctx, nc, append([]bus.Option{bus.WithStreamConfig(cfg)}, opts...)...)
}

// tenantRecords reads the records of session id from its tenant's
// namespace, asking the query API which tenant holds it; notFound is
// returned when the query API does not answer or knows no tenant of it.
func tenantRecords(ctx context.Context, nc *nats.Conn, store *bus.Store, id string, notFound error) ([]bus.Record, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	page, err := query.NewClient(nc).FilterSessions(qctx, dshq.SessionFilterRequest{
		Filters: []dshq.Filter{{Kind: dshq.FilterID, Values: []*string{&id}}}})
	if err != nil || len(page.Items) != 1 || page.Items[0].Tenant == "" {
		return nil, notFound
	}
	ns, err := store.Namespace(page.Items[0].Tenant)
	if err != nil {
		return nil, err
	}
	return ns.Records(ctx, id)
}
