package node

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/natsconn"
)

// connect returns the node's connection: to cfg.Conn.URL, or to an embedded
// server started under Home/nats (stopped by stack).
func connect(ctx context.Context, cfg Config, stack *stopStack) (*nats.Conn, Info, error) {
	if cfg.Conn.URL != "" {
		nc, err := natsconn.Connect(cfg.Conn)
		if err != nil {
			return nil, Info{}, err
		}
		stack.push(func() error { return natsconn.Drain(nc) })
		return nc, Info{ClientURL: cfg.Conn.URL}, nil
	}
	listen := cfg.Listen
	if listen == "" {
		listen = DefaultListen
	}
	sync := embedded.SyncAlways
	if cfg.RelaxedSync {
		sync = embedded.SyncRelaxed
	}
	e, err := embedded.Start(ctx, embedded.Config{Dir: filepath.Join(cfg.Home, "nats"), Listen: listen, Sync: sync})
	if err != nil {
		return nil, Info{}, err
	}
	stack.push(func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return e.Shutdown(sctx)
	})
	nc, err := e.InProcessConn(nats.Name("dshq-serve"))
	if err != nil {
		return nil, Info{}, fmt.Errorf("in-process connection: %w", err)
	}
	stack.push(func() error { return natsconn.Drain(nc) })
	return nc, Info{ClientURL: e.ClientURL(), Embedded: true}, nil
}
