package projection

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dshq/dshq/record"
)

// TestProjector_RecordsEachSessionsTenantFromItsSubject: a session on
// dsh.log.<tenant>.<token> belongs to that tenant; one on dsh.log.<token>
// to none. The tenant comes from the subject (which the server's
// permissions bind to the writer), never from the record.
func TestProjector_RecordsEachSessionsTenantFromItsSubject(t *testing.T) {
	e := newEnv(t)
	r := e.start(t.TempDir())
	e.publish("teamA.t-a1", line(goodHeader, "t-a1"))
	e.publish("teamA.t-a1", line(turnStart, 0))
	last := e.publish("t-plain", line(goodHeader, "t-plain"))
	waitGen(t, r.p, last)
	view(t, r.p, func(s Snapshot) error {
		a, ok := s.Session("t-a1")
		if !ok || a.Tenant != "teamA" || a.Token != "t-a1" || record.LogKey(a.Tenant, a.Token) != "teamA.t-a1" || a.EventCount != 1 {
			t.Errorf("tenant session: ok %v, %+v", ok, a)
		}
		p, ok := s.Session("t-plain")
		if !ok || p.Tenant != "" || record.LogKey(p.Tenant, p.Token) != "t-plain" {
			t.Errorf("untenanted session: ok %v, %+v", ok, p)
		}
		return nil
	})
}

// TestProjector_SessionIDsAreUniqueAcrossTenants: a header whose id is
// already another tenant's session (or the untenanted namespace's) is
// quarantined with its whole subject, and the first header stays the
// session's: its events, and only its, are the session's log.
func TestProjector_SessionIDsAreUniqueAcrossTenants(t *testing.T) {
	e := newEnv(t)
	r := e.start(t.TempDir())
	e.publish("teamA.t-dup", line(goodHeader, "t-dup"))
	e.publish("teamA.t-dup", line(turnStart, 0))
	squat := e.publish("teamB.t-dup", line(goodHeader, "t-dup"))
	squatEvent := e.publish("teamB.t-dup", line(turnStart, 0))
	plain := e.publish("t-dup", line(goodHeader, "t-dup"))
	// The other order: the untenanted namespace first.
	e.publish("t-first", line(goodHeader, "t-first"))
	late := e.publish("teamA.t-first", line(goodHeader, "t-first"))
	// The same header twice in one batch on two tenants' subjects.
	e.publish("teamA.t-batch", line(goodHeader, "t-batch"))
	sameBatch := e.publish("teamB.t-batch", line(goodHeader, "t-batch"))
	waitGen(t, r.p, sameBatch)

	view(t, r.p, func(s Snapshot) error {
		got := map[uint64]QuarantineRecord{}
		if err := s.Quarantined(0, func(q QuarantineRecord) bool { got[q.StreamSeq] = q; return true }); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			seq           uint64
			subject, want string
		}{
			{squat, "dsh.log.teamB.t-dup", `session id "t-dup" already belongs to tenant "teamA"`},
			{squatEvent, "dsh.log.teamB.t-dup", "header record was refused at stream sequence"},
			{plain, "dsh.log.t-dup", `session id "t-dup" already belongs to tenant "teamA"`},
			{late, "dsh.log.teamA.t-first", `session id "t-first" already belongs to the untenanted namespace`},
			{sameBatch, "dsh.log.teamB.t-batch", `session id "t-batch" already belongs to tenant "teamA"`},
		} {
			q, ok := got[c.seq]
			if !ok || q.Subject != c.subject || !strings.Contains(q.Reason, c.want) {
				t.Errorf("stream sequence %d: quarantined %v %+v, want %s: %s", c.seq, ok, q, c.subject, c.want)
			}
		}
		if len(got) != 5 {
			t.Errorf("%d records quarantined, want 5: %+v", len(got), got)
		}
		for id, tenant := range map[string]string{"t-dup": "teamA", "t-first": "", "t-batch": "teamA"} {
			info, ok := s.Session(id)
			if !ok || info.Tenant != tenant {
				t.Errorf("session %s: ok %v, tenant %q, want %q", id, ok, info.Tenant, tenant)
			}
		}
		if info, _ := s.Session("t-dup"); info.EventCount != 1 {
			t.Errorf("t-dup has %d events, want 1 (the squatter's event is not its)", info.EventCount)
		}
		return nil
	})
}

// TestProjector_ATenantsLeaseKeyMakesOnlyItsSessionLive: write leases are
// keyed by log key; a lease on the same token under another key (the
// untenanted one, another tenant's) says nothing about the session. An
// encoded token's lease key is <tenant>.=<base64>.
func TestProjector_ATenantsLeaseKeyMakesOnlyItsSessionLive(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var leases []LeaseChange
	r := e.start(t.TempDir(), WithOnCommit(func(c Commit) {
		mu.Lock()
		leases = append(leases, c.Leases...)
		mu.Unlock()
	}))
	ctx := context.Background()
	id := "t-live/é"
	tok := token(t, id)
	last := e.publish("teamA."+tok, line(goodHeader, id))
	waitGen(t, r.p, last)
	isLive := func() bool {
		live := false
		view(t, r.p, func(s Snapshot) error { live = s.IsLive(id); return nil })
		return live
	}
	enc := "=" + tok[1:]
	for _, key := range []string{enc, "teamB." + enc, "teamA." + enc} {
		if _, err := e.kv.Put(ctx, key, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "teamA's lease to make the session live", isLive)
	if err := e.kv.Delete(ctx, "teamA."+enc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session to lapse", func() bool { return !isLive() })
	// The other two keys may lapse by the bucket's TTL meanwhile (2 s).
	changes := func() []LeaseChange {
		mu.Lock()
		defer mu.Unlock()
		var got []LeaseChange
		for _, l := range leases {
			if l.Live || l.SessionID != "" {
				got = append(got, l)
			}
		}
		return got
	}
	want := []LeaseChange{{tok, "", true}, {"teamB." + tok, "", true}, {"teamA." + tok, id, true}, {"teamA." + tok, id, false}}
	// The hook gets a lease change after View shows it: wait for the last.
	waitFor(t, "OnCommit to get every lease change", func() bool { return len(changes()) >= len(want) })
	if got := changes(); !slices.Equal(got, want) {
		t.Errorf("lease changes = %+v, want %+v", got, want)
	}
}
