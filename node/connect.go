package node

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnectOptions says how to reach an existing NATS deployment.
type ConnectOptions struct {
	// URL is the server URL (or comma-separated URLs of a cluster).
	URL string
	// Name is the connection name shown by the server.
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

// Connect connects to the deployment described by o. The connection
// reconnects forever: a long-running daemon rides out server restarts.
func Connect(o ConnectOptions) (*nats.Conn, error) {
	if o.URL == "" {
		return nil, fmt.Errorf("connect: no NATS URL")
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

func (o ConnectOptions) natsOptions() ([]nats.Option, error) {
	name := o.Name
	if name == "" {
		name = "dshq"
	}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
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

// drain drains nc and waits for it to close.
func drain(nc *nats.Conn) error {
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	if err := nc.Drain(); err != nil {
		nc.Close()
		return nil
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		nc.Close()
	}
	return nil
}
