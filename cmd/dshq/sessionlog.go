package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/bus"
)

// openStore returns the harness SDK's Store on the session log stream of an
// existing deployment: import and export read and publish the stream (the
// source of truth, not a projection) through it, as every harness does. A
// missing stream is a clear error rather than a new, empty deployment.
func openStore(ctx context.Context, nc *nats.Conn, stream string) (*bus.Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	cfg, err := bus.DiscoverStreamConfig(ctx, js, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("stream %s not found on the server (start dshq serve, or the projector, first)", stream)
	}
	if err != nil {
		return nil, err
	}
	return bus.NewStore(ctx, nc, bus.WithStreamConfig(cfg))
}
