package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// serveTools serves dsh-tools on nc over the query API (the dsh-query
// services of the deployment, this process's among them), with its spill
// bucket replicated replicas times. stop drains it.
func serveTools(ctx context.Context, nc *nats.Conn, replicas int, reg prometheus.Registerer, log *slog.Logger) (stop func() error, err error) {
	t, err := tools.New(tools.FromQueryClient(query.NewClient(nc)), tools.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	stop, err = toolservice.Serve(ctx, nc, t, toolservice.WithLogger(log), toolservice.WithRegisterer(reg),
		toolservice.WithSpillReplicas(replicas))
	if err != nil {
		return nil, fmt.Errorf("start tools service: %w", err)
	}
	return stop, nil
}
