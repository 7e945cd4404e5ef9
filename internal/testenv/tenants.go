package testenv

import (
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/tenancy"
)

// The users Tenants adds: the trusted user, and each tenant as a user of
// its own name.
const (
	TrustedUser     = "trusted"
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

// tenantUsers returns the server option hook adding the trusted user and
// one user per tenant with its generated permissions (default
// tenancy.Options).
func tenantUsers(t testing.TB, tenants []string) func(*server.Options) {
	t.Helper()
	users := []*server.User{{Username: TrustedUser, Password: TrustedPassword}}
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

// ConnectTenant connects in-process as tenant (a server started with
// Tenants), with the tenant's inbox prefix; every asynchronous error goes
// to the returned Violations. The connection is closed when t ends.
func (e *Env) ConnectTenant(t testing.TB, tenant string, opts ...nats.Option) (*nats.Conn, *Violations) {
	t.Helper()
	v := &Violations{}
	all := append([]nats.Option{nats.UserInfo(tenant, TenantPassword), nats.CustomInboxPrefix(bus.TenantInboxPrefix(tenant)),
		nats.ErrorHandler(v.Handler), nats.Name("tenant " + tenant)}, opts...)
	return e.Server.Conn(t, all...), v
}

// ConnectTrusted returns another in-process connection of the trusted user
// (a server started with Tenants), closed when t ends.
func (e *Env) ConnectTrusted(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return e.Server.Conn(t, append([]nats.Option{nats.UserInfo(TrustedUser, TrustedPassword), nats.Name("trusted")}, opts...)...)
}
