package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tenancy"
)

// newTenantCmd is `dshq tenant`, the operator's tenant tools.
func newTenantCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant",
		Short: "Operate tenants: print a tenant's NATS permissions",
		Long: `A tenant is a harness, or a team of harnesses, whose NATS users the server
confines to the tenant's own sessions, leases, inbox and tool subjects (see the
README's deployment section). tenant permissions prints the permission block
of one, generated from one template.`,
		Example: `  dshq tenant permissions teamA`,
		Args:    cobra.NoArgs,
	}
	cmd.AddCommand(newTenantPermissionsCmd(g))
	return cmd
}

func newTenantPermissionsCmd(g *globals) *cobra.Command {
	var o tenancy.Options
	cmd := &cobra.Command{
		Use:   "permissions TENANT",
		Short: "Print the nats-server permissions of a tenant",
		Long: `permissions prints the nats-server configuration block of a tenant's
permissions, generated from one template (package tenancy): publish its log
subjects dsh.log.<tenant>.>, its write leases, the direct gets and push
consumers of its own subjects, its tool subjects dsh.tools.v1.tenant.<tenant>.>;
subscribe its inbox _INBOX_<tenant>.>; nothing else. Paste it into the server
configuration and give it to every user of the tenant:

  { user: alice, password: $ALICE_PASSWORD, permissions: $TENANT_<tenant> }

A tenant name is 1 to 64 of [A-Za-z0-9_-]. With decentralized (JWT)
authentication, put the same subjects in the user's JWT (nsc add user
--allow-pub … --allow-sub …), or one signing-key scope for all tenants with
templates: {{name()}} or {{tag(tenant)}} in place of the tenant.`,
		Example: `  dshq tenant permissions teamA >> /etc/nats/tenants.conf
  dshq tenant permissions teamB --trusted-consumer dsh-projector --trusted-consumer dsh-projector-2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := tenancy.For(args[0], o)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(g.stdout, p.ConfigBlock())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Stream, "stream", dshq.SessionStream, "the session log stream")
	f.StringVar(&o.LeaseBucket, "lease-bucket", dshq.LeaseBucket, "the write-lease bucket")
	f.StringSliceVar(&o.TrustedConsumers, "trusted-consumer", tenancy.DefaultTrustedConsumers,
		"a durable consumer of the stream that dshq's own processes use (projector --durable; repeat for each)")
	return cmd
}
