package tenancy

import (
	"fmt"
	"strings"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/record"
)

// DefaultTrustedConsumers are the durable consumers dshq's own processes keep
// on the session log stream: the projector's (dshq.ProjectorDurable).
// No tenant may create a consumer of one of these names: the filtered create
// subject binds a consumer's filter to the tenant's subjects, not its name,
// and a create of an existing name updates it.
var DefaultTrustedConsumers = []string{"dsh-projector"}

// DefaultResponseExpires bounds how long a tenant may answer a message it
// received (allow_responses): it acks its own push consumers' deliveries at
// once, so this only needs to outlast a slow round trip.
const DefaultResponseExpires = 30 * time.Second

// Options are the deployment's names that a tenant's permissions mention.
type Options struct {
	// Stream is the session log stream ("" = dshq.SessionStream).
	Stream string
	// LeaseBucket is the write-lease bucket ("" = dshq.LeaseBucket).
	LeaseBucket string
	// TrustedConsumers are the durable consumer names of the session log
	// stream that dshq's own processes use (nil = DefaultTrustedConsumers):
	// the projector's --durable names, one per projector.
	TrustedConsumers []string
}

// Permissions is what the server lets one tenant do, as nats-server
// permissions: publish (allow, then deny, which wins), subscribe, and
// answer the messages it receives (allow_responses).
type Permissions struct {
	// Tenant is the tenant they are for.
	Tenant string
	// PublishAllow are the subjects it may publish on.
	PublishAllow []string
	// PublishDeny are subjects refused even where an allow would match.
	PublishDeny []string
	// SubscribeAllow are the subjects it may subscribe to.
	SubscribeAllow []string
	// ResponseMax and ResponseExpires are allow_responses: how many
	// messages it may publish to the reply subject of a message it received,
	// and for how long.
	ResponseMax     int
	ResponseExpires time.Duration
	// notes explains subjects in ConfigBlock.
	notes map[string]string
}

// For returns the permissions of tenant: everything a tenant's harness (the
// harness SDK in tenant mode, bus.WithTenant, and the tools' tenant
// subjects) needs, and nothing that reaches another tenant's data, the
// trusted query API, the projector's subjects, the admin API or the live
// feed. Each subject is commented in ConfigBlock.
func For(tenant string, o Options) (Permissions, error) {
	if err := record.ValidateTenant(tenant); err != nil {
		return Permissions{}, err
	}
	stream := o.Stream
	if stream == "" {
		stream = dshq.SessionStream
	}
	bucket := o.LeaseBucket
	if bucket == "" {
		bucket = dshq.LeaseBucket
	}
	trusted := o.TrustedConsumers
	if trusted == nil {
		trusted = DefaultTrustedConsumers
	}
	logs := dshq.LogSubjectPrefix + tenant + ".>"
	leases := "$KV." + bucket + "." + tenant + ".>"
	p := Permissions{
		Tenant:          tenant,
		SubscribeAllow:  []string{bus.TenantInboxPrefix(tenant) + ".>"},
		ResponseMax:     1,
		ResponseExpires: DefaultResponseExpires,
		notes:           map[string]string{},
	}
	// On a cluster the SDK follows the leader elections of the stream and
	// the bucket, so that a write in flight on a leader that stepped down
	// is sent again at once (docs/cluster.md). An advisory names the
	// stream, its leader and its replicas: nothing of any tenant's data.
	for _, a := range []struct{ subject, why string }{
		{LeaderElected(stream), "the session stream's leader elections (a cluster's failovers)"},
		{LeaderElected("KV_" + bucket), "the lease bucket's leader elections"},
	} {
		p.SubscribeAllow = append(p.SubscribeAllow, a.subject)
		p.notes[a.subject] = a.why
	}
	for _, a := range []struct{ subject, why string }{
		{logs, "session records: dsh.log.<tenant>.<token> (publish acks come back on the inbox)"},
		{leases, "write leases: the keys <tenant>.<token> of the lease bucket"},
		{"$JS.API.DIRECT.GET." + stream + "." + logs, "the last record of one of its log subjects (direct get, subject form only)"},
		{"$JS.API.DIRECT.GET.KV_" + bucket + "." + leases, "one of its write leases (direct get, subject form only)"},
		{"$JS.API.CONSUMER.CREATE." + stream + ".*." + logs, "push consumers on its own log subjects: the server refuses a body whose filter differs"},
		{ToolSubjects(tenant), "the model-facing tools, as one of its own sessions"},
	} {
		p.PublishAllow = append(p.PublishAllow, a.subject)
		p.notes[a.subject] = a.why
	}
	for _, name := range trusted {
		if name == "" || strings.ContainsAny(name, ".*> \t\r\n") {
			return Permissions{}, fmt.Errorf("trusted consumer name %q is not a consumer name", name)
		}
		p.PublishDeny = append(p.PublishDeny, "$JS.API.CONSUMER.CREATE."+stream+"."+name+".>")
	}
	p.PublishDeny = append(p.PublishDeny, "dsh.query.>", "dsh.proj.>", "dsh.admin.>", "dsh.feed.>")
	return p, nil
}

// LeaderElected is the subject of the advisory a JetStream cluster
// publishes when stream elects a leader.
func LeaderElected(stream string) string { return "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream }

// Variable returns the configuration variable ConfigBlock defines:
// TENANT_<tenant>.
func (p Permissions) Variable() string { return "TENANT_" + p.Tenant }

// ConfigBlock renders p as a nats-server configuration variable,
// TENANT_<tenant> = { publish, subscribe, allow_responses }, with a comment
// per subject, for the permissions of every user of the tenant:
//
//	{ user: alice, password: $ALICE_PASSWORD, permissions: $TENANT_teamA }
//
// Its subjects are the ones For returns, in that order.
func (p Permissions) ConfigBlock() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# dshq tenant %q: `dshq tenant permissions %s` prints this block.\n", p.Tenant, p.Tenant)
	w("# Give it to every user of the tenant:\n")
	w("#   { user: <name>, password: <secret>, permissions: $%s }\n", p.Variable())
	w("# Its harnesses connect with nats.CustomInboxPrefix(%q) and bus.WithTenant(%q).\n", bus.TenantInboxPrefix(p.Tenant), p.Tenant)
	w("%s = {\n", p.Variable())
	w("  publish: {\n    allow: [\n")
	for _, s := range p.PublishAllow {
		if c := p.notes[s]; c != "" {
			w("      # %s\n", c)
		}
		w("      %q\n", s)
	}
	w("    ]\n")
	if len(p.PublishDeny) > 0 {
		w("    # A consumer create names its consumer, and creating an existing name\n")
		w("    # updates that consumer: the trusted consumers' names are refused.\n")
		w("    # The trusted APIs, so that no widening of the allow list opens them.\n")
		w("    deny: [\n")
		for _, s := range p.PublishDeny {
			w("      %q\n", s)
		}
		w("    ]\n")
	}
	w("  }\n")
	w("  subscribe: {\n    # Its private inbox: replies to its own requests, deliveries of its own consumers.\n    allow: [\n")
	for _, s := range p.SubscribeAllow {
		if c := p.notes[s]; c != "" {
			w("      # %s\n", c)
		}
		w("      %q\n", s)
	}
	w("    ]\n  }\n")
	w("  # Acks of its own consumers' deliveries (the reply subjects of messages it received).\n")
	w("  allow_responses: { max: %d, expires: %q }\n", p.ResponseMax, p.ResponseExpires.String())
	w("}\n")
	return b.String()
}
