package node

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestProvisionTransient: a start step retries what a cluster still forming
// answers (no peers to place a stream on yet) and gives up at once on what
// waiting cannot change.
func TestProvisionTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("cursor bucket DSH_CURSORS: %w", &jetstream.APIError{Code: 400, ErrorCode: clusterNoPeers, Description: "no suitable peers for placement, peer offline"}), true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{&jetstream.APIError{Code: 500, ErrorCode: 10074, Description: "replicas > 1 not supported in non-clustered mode"}, false},
		{errors.New("stream name in use with a different configuration"), false},
	} {
		if got := provisionTransient(c.err); got != c.want {
			t.Errorf("provisionTransient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
