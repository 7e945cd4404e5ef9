package failover

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Transient reports a failure of a NATS or JetStream request worth
// retrying: the server, the route to it or the stream's leader is
// temporarily unavailable (a restart, a leader election), or the attempt
// timed out or was interrupted (Watch).
func Transient(err error) bool {
	switch {
	case errors.Is(err, ErrInterrupted),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining),
		// Written while the connection is down, past what the client
		// buffers until it is back: the server went away.
		errors.Is(err, nats.ErrReconnectBufExceeded),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// A write on a connection the server dropped (it is being restarted)
	// before the client noticed: the client reconnects and buffers.
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == 503 || apiErr.Code == 408
	}
	return false
}
