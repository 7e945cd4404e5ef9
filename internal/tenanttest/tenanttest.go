// Package tenanttest runs nats-servers whose users are a trusted user and
// tenants with the permissions package tenancy generates, for the tests of
// tenant mode (the harness SDK, the tools' tenant subjects).
package tenanttest

import (
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/tenancy"
)

// Passwords of the users Configure adds: the trusted user "trusted", and
// each tenant as a user of its own name.
const (
	TrustedPassword = "trusted-secret"
	TenantPassword  = "tenant-secret"
)

// ServerPermissions converts p to nats-server's permissions.
func ServerPermissions(p tenancy.Permissions) *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.PublishAllow, Deny: p.PublishDeny},
		Subscribe: &server.SubjectPermission{Allow: p.SubscribeAllow},
		Response:  &server.ResponsePermission{MaxMsgs: p.ResponseMax, Expires: p.ResponseExpires},
	}
}

// Configure returns a server option hook (embedded.Config.Configure)
// adding the trusted user and one user per tenant with its generated
// permissions (default tenancy.Options).
func Configure(t testing.TB, tenants ...string) func(*server.Options) {
	t.Helper()
	users := []*server.User{{Username: "trusted", Password: TrustedPassword}}
	for _, name := range tenants {
		p, err := tenancy.For(name, tenancy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		users = append(users, &server.User{Username: name, Password: TenantPassword, Permissions: ServerPermissions(p)})
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

// ConnectTenant connects to e as tenant, with its inbox prefix; every
// asynchronous error goes to the returned Violations.
func ConnectTenant(t testing.TB, e *embedded.Server, tenant string, opts ...nats.Option) (*nats.Conn, *Violations) {
	t.Helper()
	v := &Violations{}
	all := append([]nats.Option{nats.UserInfo(tenant, TenantPassword), nats.CustomInboxPrefix(bus.TenantInboxPrefix(tenant)),
		nats.ErrorHandler(v.Handler), nats.Name("tenant " + tenant)}, opts...)
	nc, err := e.InProcessConn(all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, v
}

// ConnectTrusted connects to e as the trusted user.
func ConnectTrusted(t testing.TB, e *embedded.Server) *nats.Conn {
	t.Helper()
	nc, err := e.InProcessConn(nats.UserInfo("trusted", TrustedPassword), nats.Name("trusted"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
