// Package tenanttest gives a test's server (package testnats) the users of
// tenant mode: a trusted user and tenants with the permissions package
// tenancy generates, for the tests of the harness SDK's tenant mode and of
// the tools' tenant subjects.
package tenanttest

import (
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/tenancy"
)

// The users Start adds: the trusted user, and each tenant as a user of its
// own name.
const (
	TrustedUser     = "trusted"
	TrustedPassword = "trusted-secret"
	TenantPassword  = "tenant-secret"
)

// Start starts a test's in-process server (periodic sync) whose users are
// the trusted user and one user per tenant with its generated permissions
// (default tenancy.Options).
func Start(t testing.TB, tenants ...string) *testnats.Server {
	t.Helper()
	return testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed, Configure: users(t, tenants)})
}

// StartListening is Start with a loopback TCP listener as well, for a part
// that joins the server by URL (node.Config.Conn).
func StartListening(t testing.TB, tenants ...string) *testnats.Server {
	t.Helper()
	return testnats.Start(t, embedded.Config{Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed, Configure: users(t, tenants)})
}

// serverPermissions converts p to nats-server's permissions.
func serverPermissions(p tenancy.Permissions) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.PublishAllow, Deny: p.PublishDeny},
		Subscribe: &server.SubjectPermission{Allow: p.SubscribeAllow},
		Response:  &server.ResponsePermission{MaxMsgs: p.ResponseMax, Expires: p.ResponseExpires},
	}
}

// users returns the server option hook (embedded.Config.Configure) adding
// the trusted user and one user per tenant.
func users(t testing.TB, tenants []string) func(*server.Options) {
	t.Helper()
	users := []*server.User{{Username: TrustedUser, Password: TrustedPassword}}
	for _, name := range tenants {
		p, err := tenancy.For(name, tenancy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, &server.User{Username: name, Password: TenantPassword, Permissions: serverPermissions(p)})
	}
	return func(o *server.Options) { o.Users = users }
}

// Violations collects the asynchronous errors of a connection: a tenant's
// refused publish or subscription arrives there.
type Violations struct {
	mu   sync.Mutex
	errs []error
}

// Handler is the connection's error handler.
func (v *Violations) Handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err)
}

// Take returns the errors so far and forgets them.
func (v *Violations) Take() []error {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.errs
	v.errs = nil
	return out
}

// ConnectTenant connects to s in-process as tenant, with its inbox prefix;
// every asynchronous error goes to the returned Violations. The connection
// is closed when t ends.
func ConnectTenant(t testing.TB, s *testnats.Server, tenant string, opts ...nats.Option) (*nats.Conn, *Violations) {
	t.Helper()
	v := &Violations{}
	all := append([]nats.Option{nats.UserInfo(tenant, TenantPassword), nats.CustomInboxPrefix(bus.TenantInboxPrefix(tenant)),
		nats.ErrorHandler(v.Handler), nats.Name("tenant " + tenant)}, opts...)
	return s.Conn(t, all...), v
}

// ConnectTrusted connects to s in-process as the trusted user, until t
// ends.
func ConnectTrusted(t testing.TB, s *testnats.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return s.Conn(t, append([]nats.Option{nats.UserInfo(TrustedUser, TrustedPassword), nats.Name("trusted")}, opts...)...)
}
