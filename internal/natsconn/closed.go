package natsconn

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
)

// ErrConnectionClosed is wrapped by the cause of a WatchConnection context
// when the connection closed for good.
var ErrConnectionClosed = errors.New("nats connection closed")

// WatchConnection returns a copy of ctx that is canceled when nc closes for
// good, with a cause wrapping ErrConnectionClosed and the connection's last
// error. nats.go reconnects by itself after a network failure or a server
// restart, but not when the server closes the connection over a protocol
// error (a subject or header past the server's control-line limit, an
// authorization the server no longer accepts): without this, a process
// would stay alive serving nothing. stop releases the watch; call it when
// done (it also cancels the context).
func WatchConnection(ctx context.Context, nc *nats.Conn) (watched context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	ch := nc.StatusChanged(nats.CLOSED)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer nc.RemoveStatusListener(ch)
		select {
		case <-ch:
			cancel(ClosedError(nc))
		case <-ctx.Done():
		}
	}()
	if nc.IsClosed() { // closed before the listener was registered
		cancel(ClosedError(nc))
	}
	return ctx, func() {
		cancel(context.Canceled)
		<-done
	}
}

// ClosedError describes why nc closed.
func ClosedError(nc *nats.Conn) error {
	if err := nc.LastError(); err != nil {
		return fmt.Errorf("%w: %w", ErrConnectionClosed, err)
	}
	return ErrConnectionClosed
}

// IsAuthError reports whether err says the server refused the credentials:
// connecting again will not help.
func IsAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}
