// Package natsconn connects a dshq process or CLI client to an existing NATS
// deployment: the URL, a connection name, credentials (creds file, NKey seed,
// user and password, token) and TLS, reconnecting forever. It is light (nats.go
// only) so that every command can use it.
package natsconn

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Options says how to reach an existing NATS deployment.
type Options struct {
	// URL is the server URL (or comma-separated URLs of a cluster).
	URL string
	// Name is the connection name shown by the server ("" = "dshq").
	Name string
	// Creds is a credentials file (JWT + NKey seed).
	Creds string
	// NKey is an NKey seed file.
	NKey string
	// User and Password authenticate with a user/password.
	User, Password string
	// Token authenticates with a token.
	Token string
	// TLSCA, TLSCert and TLSKey configure TLS: a CA to trust and a client
	// certificate and key for mutual TLS.
	TLSCA, TLSCert, TLSKey string
	// InboxPrefix is the connection's inbox prefix ("" = nats.go's
	// _INBOX): a tenant's connections use bus.TenantInboxPrefix(tenant).
	InboxPrefix string
}

// Connection settings for a long-running client of a JetStream cluster
// (ClientOptions).
const (
	// ReconnectWait is the pause before trying a server again that was
	// tried less than that long ago; another server of the list is tried
	// at once.
	ReconnectWait = 250 * time.Millisecond
	// PingInterval and MaxPingsOut bound how long a connection to a server
	// that hangs, or to a machine that vanished without resetting its
	// connections, stays open: it is given up after 2 to 3 intervals
	// without an answer (nats.go's defaults, 2 minutes and 2, leave it open
	// for 4 to 6 minutes).
	PingInterval = 2 * time.Second
	MaxPingsOut  = 2
)

// ClientOptions returns the nats.go options with which a long-running
// client rides out a cluster's failovers: it reconnects forever
// (ReconnectWait), and it leaves a server that stopped answering within
// PingInterval × (MaxPingsOut+1) (docs/cluster.md).
func ClientOptions() []nats.Option {
	return []nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(ReconnectWait),
		nats.PingInterval(PingInterval),
		nats.MaxPingsOutstanding(MaxPingsOut),
	}
}

// Connect connects to the deployment described by o. The connection
// reconnects forever and leaves a server that hangs within seconds
// (ClientOptions): a long-running daemon rides out server restarts.
func Connect(o Options) (*nats.Conn, error) {
	if o.URL == "" {
		return nil, fmt.Errorf("connect: no NATS URL")
	}
	if err := CheckURL(o.URL); err != nil {
		return nil, err
	}
	opts, err := o.natsOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", Redacted(o.URL), err)
	}
	return nc, nil
}

// CheckURL refuses a NATS URL list with a URL nats.go cannot dial: a
// scheme other than nats, tls, ws and wss (one without a scheme is
// nats://), or no host. It looks nothing up: a bad scheme is refused before
// any DNS request.
func CheckURL(urls string) error {
	for _, p := range strings.Split(urls, ",") {
		p = strings.TrimSpace(p)
		if !strings.Contains(p, "://") {
			continue
		}
		u, err := url.Parse(p)
		if err != nil {
			return fmt.Errorf("NATS URL %s: %w", Redacted(p), err)
		}
		switch strings.ToLower(u.Scheme) {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("NATS URL %s: the scheme %q is not nats, tls, ws or wss", Redacted(p), u.Scheme)
		}
		if u.Host == "" {
			return fmt.Errorf("NATS URL %s names no host", Redacted(p))
		}
	}
	return nil
}

// Redacted returns a NATS URL list with the credentials in its URLs (a
// password, or a token in the user position) replaced by "xxxxx", for logs
// and errors.
func Redacted(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if _, ok := u.User.Password(); ok {
			parts[i] = u.Redacted()
		} else {
			u.User = url.User("xxxxx")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

func (o Options) natsOptions() ([]nats.Option, error) {
	name := o.Name
	if name == "" {
		name = "dshq"
	}
	opts := append([]nats.Option{nats.Name(name)}, ClientOptions()...)
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.NKey != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKey)
		if err != nil {
			return nil, fmt.Errorf("nkey %s: %w", o.NKey, err)
		}
		opts = append(opts, opt)
	}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		if o.TLSCert == "" || o.TLSKey == "" {
			return nil, fmt.Errorf("tls: --tls-cert and --tls-key go together")
		}
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	return opts, nil
}

// DrainTimeout bounds how long Drain waits for a connection to close.
const DrainTimeout = 10 * time.Second

// Drain drains nc (its subscriptions finish the messages they hold, its
// publications are flushed) and waits, at most DrainTimeout, for it to
// close; then it closes nc whatever happened. It replaces nc's closed
// handler. It always returns nil: a stopping process has nothing better to
// do with a drain failure than close.
func Drain(nc *nats.Conn) error {
	drain(nc, DrainTimeout)
	return nil
}

// drain is Drain waiting at most timeout; drained says whether the drain
// closed nc, rather than a failure or the timeout.
func drain(nc *nats.Conn, timeout time.Duration) (drained bool) {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return false
	}
	select {
	case <-closed:
		return true
	case <-time.After(timeout):
		nc.Close()
		return false
	}
}
