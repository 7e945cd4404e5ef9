package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/internal/tenanttest"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/record"
)

// tenantEnv is an embedded server whose users are the trusted user and the
// tenants teamA and teamB with their generated permissions (package
// tenancy), the stream and lease bucket provisioned by the trusted user.
type tenantEnv struct {
	s       *testnats.Server
	trusted *nats.Conn
	js      jetstream.JetStream // the trusted user's
	cfg     bus.StreamConfig
}

func newTenantEnv(t testing.TB, cfg bus.StreamConfig) *tenantEnv {
	t.Helper()
	s := tenanttest.Start(t, "teamA", "teamB")
	trusted := tenanttest.ConnectTrusted(t, s)
	if _, err := bus.NewStore(context.Background(), trusted, bus.WithStreamConfig(cfg)); err != nil {
		t.Fatalf("the trusted user provisions: %v", err)
	}
	return &tenantEnv{s: s, trusted: trusted, js: testnats.JetStream(t, trusted), cfg: cfg}
}

// store returns a Store of tenant on a connection of its own, and the
// connection's asynchronous errors.
func (te *tenantEnv) store(t testing.TB, tenant string, opts ...bus.Option) (*bus.Store, *nats.Conn, *tenanttest.Violations) {
	t.Helper()
	nc, v := tenanttest.ConnectTenant(t, te.s, tenant)
	opts = append([]bus.Option{bus.WithTenant(tenant), bus.WithStreamConfig(te.cfg)}, opts...)
	s, err := bus.NewStore(context.Background(), nc, opts...)
	if err != nil {
		t.Fatalf("new store of %s: %v", tenant, err)
	}
	return s, nc, v
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func hdrOf(id string) dshq.Header {
	return dshq.Header{Version: dshq.FormatVersion2, ID: id, CreatedAt: 1_700_000_000_000, Cwd: dshq.Str("/work/tenant")}
}

// events returns n command/run events from seq from.
func events(t testing.TB, from int64, n int) []dshq.Event {
	t.Helper()
	out := make([]dshq.Event, n)
	for i := range out {
		seq := from + int64(i)
		raw := fmt.Sprintf(`{"type":"command/run","seq":%d,"time":%d,"data":{"command":"echo %d"}}`, seq, 1_700_000_000_000+seq, seq)
		e, err := record.ParseEvent([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = e
	}
	return out
}

func noViolations(t *testing.T, v *tenanttest.Violations) {
	t.Helper()
	if errs := v.Take(); len(errs) > 0 {
		t.Fatalf("the server refused the tenant: %v", errs)
	}
}

// TestTenantStoreIsTheSeamWithinItsOwnSubjects: every operation of the
// harness SDK works for a tenant within its permissions (no violation at
// all), and what it stores is the tenant's: records on
// dsh.log.<tenant>.<token> with msg ids <tenant>.<token>:…, the lease under
// <tenant>.<token>.
func TestTenantStoreIsTheSeamWithinItsOwnSubjects(t *testing.T) {
	te := newTenantEnv(t, bus.StreamConfig{})
	ctx := tctx(t)
	s, _, v := te.store(t, "teamA")
	const id = "tenant session/é" // an encoded token: lease key teamA.=…
	tok, _ := record.SubjectToken(id)

	h, err := s.Create(ctx, hdrOf(id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Append(ctx, events(t, 0, 3)); err != nil { // record by record
		t.Fatal(err)
	}
	last, err := h.Append(ctx, events(t, 3, 40)) // an atomic batch
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Stat(ctx, id)
	if err != nil || snap == nil || !snap.Live || snap.EventCount != 43 || snap.Revision != last {
		t.Fatalf("stat while writing: %+v, %v (last %d)", snap, err, last)
	}
	lease, err := te.js.KeyValue(ctx, dshq.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Get(ctx, "teamA.="+tok[1:]); err != nil {
		t.Fatalf("the lease is not under teamA.<key>: %v", err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}

	r, err := s.Open(ctx, id, bus.Read)
	if err != nil {
		t.Fatal(err)
	}
	back, err := r.Read(ctx, 0, -1)
	if err != nil || len(back) != 43 {
		t.Fatalf("read back: %d events, %v", len(back), err)
	}
	window, err := r.Read(ctx, 40, 2)
	if err != nil || len(window) != 2 || window[0].Seq != 40 {
		t.Fatalf("read a window: %+v, %v", window, err)
	}
	w, err := s.Open(ctx, id, bus.Write)
	if err != nil {
		t.Fatal(err)
	}
	if w.NextSeq() != 43 {
		t.Fatalf("reopened for write at %d", w.NextSeq())
	}
	if _, err := bus.Resume(ctx, w); err != nil {
		t.Fatal(err)
	}
	other, _, ov := te.store(t, "teamA")
	if _, err := other.Open(ctx, id, bus.Write); !errors.Is(err, bus.ErrAlreadyOwned) {
		t.Fatalf("a second writer of the tenant: %v, want ErrAlreadyOwned", err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if w2, err := other.Open(ctx, id, bus.Write); err != nil {
		t.Fatalf("the released lease is taken again: %v", err)
	} else if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}

	recs, err := s.Records(ctx, id)
	if err != nil || len(recs) != 44 {
		t.Fatalf("records: %d, %v", len(recs), err)
	}
	if recs[0].MsgID != "teamA."+tok+":h" || recs[43].MsgID != "teamA."+tok+":42" {
		t.Fatalf("msg ids %q … %q", recs[0].MsgID, recs[43].MsgID)
	}
	stream, err := te.js.Stream(ctx, dshq.SessionStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctx, "dsh.log.teamA."+tok)
	if err != nil || m.Sequence != recs[43].Seq {
		t.Fatalf("the records are not on dsh.log.teamA.<token>: %v, %v", m, err)
	}

	imported, err := s.Import(ctx, dshq.HeaderRecord{Header: hdrOf("imported")}, events(t, 0, 2))
	if err != nil || imported.Stored != 3 {
		t.Fatalf("import: %+v, %v", imported, err)
	}
	again, err := s.Import(ctx, dshq.HeaderRecord{Header: hdrOf("imported")}, events(t, 0, 2))
	if err != nil || again.AlreadyPresent != 3 {
		t.Fatalf("import again: %+v, %v", again, err)
	}

	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, sn := range list {
		ids = append(ids, sn.Header.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"imported", id}) {
		t.Fatalf("list: %v", ids)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	noViolations(t, v)
	noViolations(t, ov)

	// Not vacuous: what the tenant may not do is reported there.
	_, nc, v2 := te.store(t, "teamA")
	if err := nc.Publish("$JS.API.STREAM.INFO."+dshq.SessionStream, nil); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		errs := v2.Take()
		if len(errs) == 1 && errors.Is(errs[0], nats.ErrPermissionViolation) {
			break
		}
		if len(errs) > 0 || time.Now().After(deadline) {
			t.Fatalf("a stream info request: %v, want one permissions violation", errs)
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
}

// TestTenantsStoresSeeOnlyTheirOwnNamespace: another tenant's Store and the
// untenanted Store read their own subjects only; the same id may be created
// in each namespace (the projection keeps the first header:
// docs/protocol.md#2-the-session-log-stream).
func TestTenantsStoresSeeOnlyTheirOwnNamespace(t *testing.T) {
	te := newTenantEnv(t, bus.StreamConfig{})
	ctx := tctx(t)
	a, _, av := te.store(t, "teamA")
	b, _, bv := te.store(t, "teamB")
	plain, err := bus.NewStore(ctx, te.trusted)
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.Create(ctx, hdrOf("shared-id"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Append(ctx, events(t, 0, 2)); err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	for name, s := range map[string]*bus.Store{"teamB": b, "untenanted": plain} {
		if snap, err := s.Stat(ctx, "shared-id"); err != nil || snap != nil {
			t.Errorf("%s stats teamA's session: %+v, %v", name, snap, err)
		}
		if _, err := s.Open(ctx, "shared-id", bus.Read); !errors.Is(err, bus.ErrNotFound) {
			t.Errorf("%s opens teamA's session: %v", name, err)
		}
		if list, err := s.List(ctx); err != nil || len(list) != 0 {
			t.Errorf("%s lists %+v, %v", name, list, err)
		}
	}
	hb, err := b.Create(ctx, hdrOf("shared-id"))
	if err != nil {
		t.Fatalf("teamB creates the same id in its namespace: %v", err)
	}
	if err := hb.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hb.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if snap, err := a.Stat(ctx, "shared-id"); err != nil || snap == nil || snap.EventCount != 2 || !snap.Live {
		t.Fatalf("teamA's session after teamB's: %+v, %v", snap, err)
	}
	noViolations(t, av)
	noViolations(t, bv)
}

// TestAMsgIDTakenByAnotherWriterIsAnErrorNotAStore: msg ids are
// deduplicated stream-wide, so another tenant that publishes a record with
// one of this session's future msg ids (on its own subject) makes the
// server answer this session's record as a duplicate. That is refused as
// ErrMsgIDInUse — never taken as stored — and the handle stays usable and
// owned, positioned after what it stored.
func TestAMsgIDTakenByAnotherWriterIsAnErrorNotAStore(t *testing.T) {
	te := newTenantEnv(t, bus.StreamConfig{})
	ctx := tctx(t)
	a, _, _ := te.store(t, "teamA")
	_, bnc, _ := te.store(t, "teamB")
	bjs, err := jetstream.New(bnc)
	if err != nil {
		t.Fatal(err)
	}
	squat := func(msgID string) {
		t.Helper()
		m := nats.NewMsg("dsh.log.teamB.squatter")
		m.Data = []byte(`{"squat":true}`)
		m.Header.Set(jetstream.MsgIDHeader, msgID)
		if _, err := bjs.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	h, err := a.Create(ctx, hdrOf("victim"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	if _, err := h.Append(ctx, events(t, 0, 1)); err != nil {
		t.Fatal(err)
	}
	squat("teamA.victim:1")
	_, err = h.Append(ctx, events(t, 1, 1))
	if !errors.Is(err, bus.ErrMsgIDInUse) || errors.Is(err, bus.ErrOwnershipLost) {
		t.Fatalf("append of a squatted msg id: %v, want ErrMsgIDInUse", err)
	}
	squat("teamA.victim:20")
	_, err = h.Append(ctx, events(t, 1, 40)) // an atomic batch holding it
	if !errors.Is(err, bus.ErrMsgIDInUse) {
		t.Fatalf("atomic append holding a squatted msg id: %v, want ErrMsgIDInUse", err)
	}
	if h.NextSeq() != 1 {
		t.Fatalf("the handle moved to %d", h.NextSeq())
	}
	snap, err := a.Stat(ctx, "victim")
	if err != nil || snap.EventCount != 1 {
		t.Fatalf("stored: %+v, %v", snap, err)
	}
	if err := h.Flush(ctx); err != nil {
		t.Fatalf("the handle is still the owner: %v", err)
	}
}

// TestTenantStoreRefusesAForeignInbox: a tenant's connection must use its
// inbox prefix, or it would receive none of its replies.
func TestTenantStoreRefusesAForeignInbox(t *testing.T) {
	te := newTenantEnv(t, bus.StreamConfig{})
	nc, _ := tenanttest.ConnectTenant(t, te.s, "teamA", nats.CustomInboxPrefix("_INBOX_teamB"))
	_, err := bus.NewStore(tctx(t), nc, bus.WithTenant("teamA"))
	if !errors.Is(err, bus.ErrInvalidArgument) || !strings.Contains(err.Error(), `want "_INBOX_teamA"`) {
		t.Fatalf("err = %v", err)
	}
	for _, bad := range []string{"team.A", "*", strings.Repeat("t", 65)} {
		if _, err := bus.NewStore(tctx(t), nc, bus.WithTenant(bad)); !errors.Is(err, bus.ErrInvalidArgument) {
			t.Errorf("tenant %q: err = %v", bad, err)
		}
	}
}

// TestTenantStoreNeedsTheTrustedSideToProvision: a tenant cannot create the
// stream, so a Store on a server without it fails (within its retry bound),
// saying so.
func TestTenantStoreNeedsTheTrustedSideToProvision(t *testing.T) {
	nc, _ := tenanttest.ConnectTenant(t, tenanttest.Start(t, "teamA"), "teamA")
	_, err := bus.NewStore(tctx(t), nc, bus.WithTenant("teamA"), bus.WithRetryMaxElapsed(300*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "must be provisioned") {
		t.Fatalf("err = %v", err)
	}
}

// TestATenantsCrashedWritersLeaseLapses: a writer whose process dies stops
// its heartbeat; its key ages out (the bucket leaves a marker), and another
// of the tenant's writers takes the session over.
func TestATenantsCrashedWritersLeaseLapses(t *testing.T) {
	te := newTenantEnv(t, bus.StreamConfig{LeaseTTL: time.Second})
	ctx := tctx(t)
	crashing, cnc, _ := te.store(t, "teamA")
	h, err := crashing.Create(ctx, hdrOf("crashes"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Append(ctx, events(t, 0, 1)); err != nil {
		t.Fatal(err)
	}
	cnc.Close() // the process dies: no heartbeat, no release
	s, _, v := te.store(t, "teamA")
	deadline := time.Now().Add(20 * time.Second)
	for {
		w, err := s.Open(ctx, "crashes", bus.Write)
		if err == nil {
			if w.NextSeq() != 1 {
				t.Fatalf("taken over at %d", w.NextSeq())
			}
			if _, err := w.Append(ctx, events(t, 1, 1)); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, bus.ErrAlreadyOwned) || time.Now().After(deadline) {
			t.Fatalf("open after the crash: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // poll interval until the TTL passes
	}
	_ = h.Close(context.Background()) // its connection is gone
	noViolations(t, v)
}

// TestTenantLeaseKeys: the lease key of a tenant's session is
// <tenant>.<LeaseKey(token)>, and ParseTenantLeaseKey inverts it.
func TestTenantLeaseKeys(t *testing.T) {
	for _, c := range []struct{ tenant, id, key string }{
		{"teamA", "s-1", "teamA.s-1"},
		{"", "s-1", "s-1"},
		{"teamA", "a.b", "teamA.=YS5i"},
	} {
		tok, _ := record.SubjectToken(c.id)
		if got := bus.TenantLeaseKey(c.tenant, tok); got != c.key {
			t.Errorf("TenantLeaseKey(%q, %q) = %q, want %q", c.tenant, tok, got, c.key)
		}
		tenant, id, err := bus.ParseTenantLeaseKey(c.key)
		if err != nil || tenant != c.tenant || id != c.id {
			t.Errorf("ParseTenantLeaseKey(%q) = %q, %q, %v", c.key, tenant, id, err)
		}
	}
	for _, bad := range []string{"a.b.c", "*.x", "teamA.", "teamA.~x"} {
		if _, _, err := bus.ParseTenantLeaseKey(bad); err == nil {
			t.Errorf("ParseTenantLeaseKey(%q) accepted", bad)
		}
	}
	b, _ := json.Marshal(bus.LeaseValue{SessionID: "x"})
	if !strings.Contains(string(b), `"sessionId":"x"`) {
		t.Fatalf("lease value %s", b)
	}
}

// TestATrustedStoresViewOfATenantsNamespace: the trusted side reads (and
// could write) a tenant's sessions through Namespace, as it reads its own;
// a tenant's Store has no other namespace.
func TestATrustedStoresViewOfATenantsNamespace(t *testing.T) {
	te := newTenantEnv(t, bus.StreamConfig{})
	ctx := tctx(t)
	a, _, _ := te.store(t, "teamA")
	h, err := a.Create(ctx, hdrOf("a-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Append(ctx, events(t, 0, 2)); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	trusted, err := bus.NewStore(ctx, te.trusted)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trusted.Records(ctx, "a-1"); !errors.Is(err, bus.ErrNotFound) {
		t.Fatalf("the untenanted namespace holds teamA's session: %v", err)
	}
	ns, err := trusted.Namespace("teamA")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ns.Records(ctx, "a-1")
	if err != nil || len(recs) != 3 || recs[0].MsgID != "teamA.a-1:h" {
		t.Fatalf("records through the namespace: %+v, %v", recs, err)
	}
	list, err := ns.List(ctx)
	if err != nil || len(list) != 1 || list[0].Header.ID != "a-1" || list[0].EventCount != 2 {
		t.Fatalf("list through the namespace: %+v, %v", list, err)
	}
	if plainList, err := trusted.List(ctx); err != nil || len(plainList) != 0 {
		t.Fatalf("the untenanted list: %+v, %v", plainList, err)
	}
	if _, err := a.Namespace("teamB"); !errors.Is(err, bus.ErrInvalidArgument) {
		t.Fatalf("a tenant's other namespace: %v", err)
	}
	if _, err := trusted.Namespace("team.B"); !errors.Is(err, bus.ErrInvalidArgument) {
		t.Fatalf("an invalid tenant: %v", err)
	}
}

// BenchmarkTenantReads compares, in one run on one server, what a tenant's
// Store pays for reading within its permissions (push consumers and the
// subject form of direct get) against the untenanted Store (stream info and
// batched direct gets), on a 100-event session each: a stat, a fresh read
// handle reading the 100 events, and a write open (lease, full validation)
// and close.
//
//	go test -run '^$' -bench TenantReads -benchtime 300x ./bus
func BenchmarkTenantReads(b *testing.B) {
	te := newTenantEnv(b, bus.StreamConfig{})
	ctx := context.Background()
	plain, err := bus.NewStore(ctx, te.trusted)
	if err != nil {
		b.Fatal(err)
	}
	tenant, _, _ := te.store(b, "teamA")
	for _, s := range []*bus.Store{plain, tenant} {
		h, err := s.Create(ctx, hdrOf("bench"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := h.Append(ctx, events(b, 0, 100)); err != nil {
			b.Fatal(err)
		}
		if err := h.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	ops := []struct {
		name string
		run  func(s *bus.Store) error
	}{
		{"stat", func(s *bus.Store) error {
			snap, err := s.Stat(ctx, "bench")
			if err == nil && (snap == nil || snap.EventCount != 100) {
				err = fmt.Errorf("stat %+v", snap)
			}
			return err
		}},
		{"read-100", func(s *bus.Store) error {
			r, err := s.Open(ctx, "bench", bus.Read)
			if err != nil {
				return err
			}
			got, err := r.Read(ctx, 0, -1)
			if err == nil && len(got) != 100 {
				err = fmt.Errorf("read %d events", len(got))
			}
			return err
		}},
		{"open-write", func(s *bus.Store) error {
			w, err := s.Open(ctx, "bench", bus.Write)
			if err != nil {
				return err
			}
			return w.Close(ctx)
		}},
	}
	lat := map[string][]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, op := range ops {
			for name, s := range map[string]*bus.Store{"untenanted": plain, "tenant": tenant} {
				t0 := time.Now()
				if err := op.run(s); err != nil {
					b.Fatalf("%s %s: %v", name, op.name, err)
				}
				lat[name+"-"+op.name] = append(lat[name+"-"+op.name], time.Since(t0))
			}
		}
	}
	b.StopTimer()
	for _, op := range ops {
		p50 := func(name string) float64 {
			l := lat[name+"-"+op.name]
			slices.Sort(l)
			return float64(l[len(l)/2].Microseconds())
		}
		u, tn := p50("untenanted"), p50("tenant")
		b.ReportMetric(u, op.name+"-untenanted-p50-µs")
		b.ReportMetric(tn, op.name+"-tenant-p50-µs")
		b.ReportMetric(tn/u, op.name+"-ratio")
	}
}
