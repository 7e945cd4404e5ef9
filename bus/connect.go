package bus

import (
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/internal/natsconn"
)

// Connection settings for a harness on a JetStream cluster
// (ConnectOptions): dshq's own processes connect with the same.
const (
	// ReconnectWait is the pause before trying a server again that was
	// tried less than that long ago; another server of the list is tried
	// at once.
	ReconnectWait = natsconn.ReconnectWait
	// PingInterval and MaxPingsOut bound how long a connection to a server
	// that hangs, or to a machine that vanished without resetting its
	// connections, stays open: it is given up after 2 to 3 intervals
	// without an answer (nats.go's defaults, 2 minutes and 2, leave it open
	// for 4 to 6 minutes).
	PingInterval = natsconn.PingInterval
	MaxPingsOut  = natsconn.MaxPingsOut
)

// ConnectOptions returns the nats.go options with which a long-running
// client — a harness, any of dshq's processes — rides out a cluster's
// failovers: it reconnects forever (ReconnectWait), and it leaves a server
// that stopped answering within PingInterval × (MaxPingsOut+1). Give it
// every server's URL (comma-separated) so that the first connection does
// not depend on one server. The servers need the same on their side
// (ping_interval, ping_max; docs/cluster.md).
func ConnectOptions() []nats.Option { return natsconn.ClientOptions() }
