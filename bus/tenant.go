package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/record"
)

// WithTenant makes the Store a tenant's
// (docs/protocol.md#2-the-session-log-stream): its sessions live on
// dsh.log.<tenant>.<token> with msg ids <tenant>.<token>:h and
// <tenant>.<token>:<seq>, their write leases are the keys <tenant>.<token> of
// the lease bucket, and it reads only its own subjects, in the forms a tenant's
// NATS permissions allow (package tenancy): the subject form of direct get and
// push consumers on its own subjects, delivering to its own inbox. The
// connection must use the tenant's inbox prefix
// (nats.CustomInboxPrefix(TenantInboxPrefix(tenant))): the server lets the
// tenant receive nothing else.
//
// A tenant neither creates nor inspects the stream and the lease bucket
// (their info would list every session's subject): the deployment's trusted
// side provisions them (dshq serve does), and the Store's StreamConfig
// (WithStreamConfig) must name them and give the bucket's lease TTL as
// provisioned. NewStore checks that both answer. Without WithTenant a Store
// behaves exactly as before: the untenanted namespace, dsh.log.<token>.
func WithTenant(tenant string) Option { return func(o *storeOptions) { o.tenant = tenant } }

// TenantInboxPrefix returns the inbox prefix of a tenant's connections,
// _INBOX_<tenant>: the only subjects a tenant may subscribe to.
func TenantInboxPrefix(tenant string) string { return "_INBOX_" + tenant }

// TenantSubject returns the log subject of tenant's session id,
// dsh.log.<tenant>.<token> (dsh.log.<token>, as Subject, for tenant "").
func TenantSubject(tenant, id string) (string, error) {
	if tenant != "" {
		if err := record.ValidateTenant(tenant); err != nil {
			return "", err
		}
	}
	tok, err := record.SubjectToken(id)
	if err != nil {
		return "", err
	}
	return dshq.LogSubjectPrefix + record.LogKey(tenant, tok), nil
}

// TenantLeaseKey returns the write-lease key of tenant's session with
// subject token tok: <tenant>.<LeaseKey(tok)> (LeaseKey(tok) for tenant "").
func TenantLeaseKey(tenant, tok string) string { return record.LogKey(tenant, LeaseKey(tok)) }

// ParseTenantLeaseKey returns the tenant ("" for none) and session id of a
// lease key, for watchers of the lease bucket.
func ParseTenantLeaseKey(key string) (tenant, id string, err error) {
	tenant, rest, tenanted := strings.Cut(key, ".")
	if !tenanted {
		tenant, rest = "", key
	} else if err := record.ValidateTenant(tenant); err != nil {
		return "", "", err
	}
	id, err = ParseLeaseKey(rest)
	return tenant, id, err
}

// Namespace returns a Store on tenant's namespace (dsh.log.<tenant>.>; ""
// for the untenanted one) that shares s's connection, stream and lease
// bucket and reads as s reads: the trusted side's view of a tenant's
// sessions, for operators (import into a tenant, export its sessions). Its
// handles and pending sessions are its own. A tenant's Store has only its
// own namespace and refuses any other (ErrInvalidArgument).
func (s *Store) Namespace(tenant string) (*Store, error) {
	if s.opts.tenant != "" && tenant != s.opts.tenant {
		return nil, errorf(ErrInvalidArgument, "", "a Store of tenant %q has no other namespace (asked for %q)", s.opts.tenant, tenant)
	}
	if tenant != "" {
		if err := record.ValidateTenant(tenant); err != nil {
			return nil, wrapf(ErrInvalidArgument, "", err, "namespace: %v", err)
		}
	}
	if tenant == s.opts.tenant {
		return s, nil
	}
	ns := &Store{nc: s.nc, js: s.js, stream: s.stream, kv: s.kv, opts: s.opts, pending: map[string]*Handle{}, writers: map[*Handle]struct{}{},
		unsettled: map[string]unsettledLease{}, leased: map[string]uint64{}}
	ns.opts.tenant = tenant
	ns.reader = streamReader{ns}
	ns.pub = &publisher{nc: s.nc, js: s.js, reader: ns.reader, name: s.pub.name, watch: s.pub.watch, maxElapsed: s.pub.maxElapsed, attempt: s.pub.attempt, notice: s.pub.notice}
	return ns, nil
}

// logKey is the log key of the Store's session with token tok: the token,
// or <tenant>.<token>. It prefixes the msg ids of the session's records.
func (s *Store) logKey(tok string) string { return record.LogKey(s.opts.tenant, tok) }

// subjectOf is the log subject of the Store's session with token tok.
func (s *Store) subjectOf(tok string) string { return dshq.LogSubjectPrefix + s.logKey(tok) }

// leaseKey is the lease key of the Store's session with token tok.
func (s *Store) leaseKey(tok string) string { return TenantLeaseKey(s.opts.tenant, tok) }

// initTenant sets up a tenant's Store: it checks the tenant and the
// connection's inbox prefix, reads and writes through the tenant's forms,
// and checks that the stream and the lease bucket answer them.
func (s *Store) initTenant(ctx context.Context) error {
	t := s.opts.tenant
	if err := record.ValidateTenant(t); err != nil {
		return wrapf(ErrInvalidArgument, "", err, "tenant: %v", err)
	}
	if want := TenantInboxPrefix(t); s.nc.Opts.InboxPrefix != want {
		return errorf(ErrInvalidArgument, "",
			"tenant %q: the connection's inbox prefix is %q, want %q (nats.CustomInboxPrefix): the server delivers a tenant nothing else",
			t, s.nc.Opts.InboxPrefix, want)
	}
	s.reader = tenantReader{s}
	s.kv = tenantLeases{nc: s.nc, js: s.js, bucket: s.opts.stream.LeaseBucket}
	return s.pub.retry(ctx, func(ctx context.Context) error {
		if _, err := s.reader.last(ctx, dshq.LogSubjectPrefix+t+".>"); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("stream %s does not answer tenant %q (it must be provisioned, with allow_direct, by the trusted side): %w",
				s.opts.stream.Name, t, err)
		}
		if _, err := s.kv.get(ctx, t+".>"); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("lease bucket %s does not answer tenant %q (it must be provisioned by the trusted side): %w",
				s.opts.stream.LeaseBucket, t, err)
		}
		return nil
	})
}
