package node

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/natsconn"
)

// serverOptions are the embedded server's options (tests adjust them).
type serverOptions = server.Options

// startServer starts the embedded server under Home/nats unless the node
// joins Conn.URL; the process's stop stack shuts it down.
func (n *Node) startServer(ctx context.Context) error {
	if n.cfg.Conn.URL != "" {
		n.info.ClientURL = natsconn.Redacted(n.cfg.Conn.URL)
		return nil
	}
	listen := n.cfg.Listen
	if listen == "" {
		listen = DefaultListen
	}
	sync := embedded.SyncAlways
	if n.cfg.RelaxedSync {
		sync = embedded.SyncRelaxed
	}
	e, err := embedded.Start(ctx, embedded.Config{Dir: filepath.Join(n.cfg.Home, "nats"), Listen: listen, Sync: sync, Configure: n.cfg.configureServer})
	if err != nil {
		return err
	}
	n.shutdown.push(func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return e.Shutdown(sctx)
	})
	n.emb = e
	n.info.ClientURL, n.info.Embedded = e.ClientURL(), true
	return nil
}

// dialError marks a failure to connect (as opposed to a part failing).
type dialError struct{ error }

func (e *dialError) Unwrap() error { return e.error }

// dial makes a connection: in-process to the embedded server, or to
// Conn.URL. Both reconnect by themselves after a network failure or a
// server restart.
func (n *Node) dial() (*nats.Conn, error) {
	if n.emb == nil {
		nc, err := natsconn.Connect(n.cfg.Conn)
		if err != nil {
			return nil, &dialError{err}
		}
		return nc, nil
	}
	nc, err := n.emb.InProcessConn(nats.Name("dshq-serve"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
	if err != nil {
		return nil, &dialError{fmt.Errorf("in-process connection: %w", err)}
	}
	return nc, nil
}

// storageBudget is the file storage JetStream can still reserve for a
// stream: the embedded server's store limit less its reservations, or the
// account's limit less its reservations on a deployment that sets one; 0
// when unknown (no account limit).
func (n *Node) storageBudget(ctx context.Context, js jetstream.JetStream) int64 {
	if n.emb != nil {
		jsz, err := n.emb.NATSServer().Jsz(nil)
		if err != nil {
			return 0
		}
		return max(0, jsz.Config.MaxStore-int64(jsz.ReservedStore))
	}
	ai, err := js.AccountInfo(ctx)
	if err != nil || ai.Limits.MaxStore <= 0 {
		return 0
	}
	return max(0, ai.Limits.MaxStore-int64(ai.ReservedStore))
}
