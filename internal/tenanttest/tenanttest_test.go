package tenanttest_test

import (
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/tenanttest"
	"github.com/dshq/dshq/internal/testnats"
)

func TestMain(m *testing.M) { testnats.VerifyNoLeaks(m) }

func TestATenantIsConfinedAndTheTrustedUserIsNot(t *testing.T) {
	s := tenanttest.Start(t, "teamA", "teamB")
	nc, v := tenanttest.ConnectTenant(t, s, "teamA")
	if err := nc.Publish(dshq.LogSubjectPrefix+"teamB.s-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(v.Take()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a tenant published on another tenant's subject without a violation")
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not a wait for a condition
	}
	trusted := tenanttest.ConnectTrusted(t, s)
	if err := trusted.Publish(dshq.LogSubjectPrefix+"teamB.s-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := trusted.Flush(); err != nil || trusted.LastError() != nil {
		t.Fatalf("the trusted user: %v, %v", err, trusted.LastError())
	}
}
