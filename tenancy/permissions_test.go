package tenancy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tenancy"
)

func TestForRefusesWhatIsNotATenant(t *testing.T) {
	for _, bad := range []string{"", "team.A", "*", ">", "team A", strings.Repeat("t", 65)} {
		if _, err := tenancy.For(bad, tenancy.Options{}); err == nil {
			t.Errorf("For(%q) accepted", bad)
		}
	}
	if _, err := tenancy.For("teamA", tenancy.Options{TrustedConsumers: []string{"a.b"}}); err == nil {
		t.Error("a trusted consumer name with a dot was accepted")
	}
}

// TestForNamesOnlyTheTenantsSubjects: every subject a tenant may publish on
// or subscribe to carries its name, and the trusted consumers are denied.
func TestForNamesOnlyTheTenantsSubjects(t *testing.T) {
	p, err := tenancy.For("teamA", tenancy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(slices.Clone(p.PublishAllow), p.SubscribeAllow...) {
		if s == tenancy.LeaderElected(dshq.SessionStream) || s == tenancy.LeaderElected("KV_"+dshq.LeaseBucket) {
			continue // a cluster's leader elections: no tenant's data
		}
		if !strings.Contains(s, "teamA") {
			t.Errorf("%q does not carry the tenant", s)
		}
		for _, open := range []string{"dsh.log.>", "$KV.DSH_LEASES.>", "_INBOX.>", "dsh.tools.v1.>"} {
			if s == open {
				t.Errorf("%q is every tenant's", s)
			}
		}
	}
	if !slices.Contains(p.PublishDeny, "$JS.API.CONSUMER.CREATE.DSH_SESSIONS."+dshq.ProjectorDurable+".>") {
		t.Errorf("the projector's durable %q is not denied: %v", dshq.ProjectorDurable, p.PublishDeny)
	}
	if p.ResponseMax != 1 || p.ResponseExpires <= 0 {
		t.Errorf("allow_responses %d %v", p.ResponseMax, p.ResponseExpires)
	}
	custom, err := tenancy.For("t-2", tenancy.Options{Stream: "S", LeaseBucket: "L", TrustedConsumers: []string{"p1", "p2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dsh.log.t-2.>", "$KV.L.t-2.>", "$JS.API.DIRECT.GET.S.dsh.log.t-2.>", "$JS.API.DIRECT.GET.KV_L.$KV.L.t-2.>",
		"$JS.API.CONSUMER.CREATE.S.*.dsh.log.t-2.>", "dsh.tools.v1.tenant.t-2.>"}
	if !slices.Equal(custom.PublishAllow, want) {
		t.Errorf("allow = %v\nwant    %v", custom.PublishAllow, want)
	}
	if !slices.Contains(custom.PublishDeny, "$JS.API.CONSUMER.CREATE.S.p2.>") {
		t.Errorf("deny = %v", custom.PublishDeny)
	}
}

// TestConfigBlockIsWhatTheServerReads: a configuration with the block and a
// user of it gives the server exactly For's permissions.
func TestConfigBlockIsWhatTheServerReads(t *testing.T) {
	p, err := tenancy.For("team-a_1", tenancy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conf := p.ConfigBlock() + "\nauthorization {\n  users = [\n    { user: alice, password: x, permissions: $" + p.Variable() + " }\n  ]\n}\n"
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, conf)
	}
	if len(o.Users) != 1 || o.Users[0].Permissions == nil {
		t.Fatalf("users %+v", o.Users)
	}
	got := o.Users[0].Permissions
	if !slices.Equal(got.Publish.Allow, p.PublishAllow) || !slices.Equal(got.Publish.Deny, p.PublishDeny) ||
		!slices.Equal(got.Subscribe.Allow, p.SubscribeAllow) || got.Response == nil ||
		got.Response.MaxMsgs != 1 || got.Response.Expires != 30*time.Second {
		t.Fatalf("the server read %+v %+v %+v %+v", got.Publish, got.Subscribe, got.Response, p)
	}
}

// TestTheDeploymentExampleHoldsTheGeneratedBlocks: deploy/nats-server.conf
// holds each of its tenants' blocks exactly as the generator prints them,
// and the server reads the file.
func TestTheDeploymentExampleHoldsTheGeneratedBlocks(t *testing.T) {
	path := filepath.Join("..", "deploy", "nats-server.conf")
	conf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"teamA", "teamB"} {
		p, err := tenancy.For(tenant, tenancy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(conf), p.ConfigBlock()) {
			t.Errorf("%s does not hold the block `dshq tenant permissions %s` prints:\n%s", path, tenant, p.ConfigBlock())
		}
	}
	for _, v := range []string{"DSH_TRUSTED_PASSWORD", "DSH_TEAMA_PASSWORD", "DSH_TEAMB_PASSWORD"} {
		t.Setenv(v, "x")
	}
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Users) != 3 || o.Users[1].Permissions == nil || o.Users[2].Permissions == nil {
		t.Fatalf("users: %+v", o.Users)
	}
}
