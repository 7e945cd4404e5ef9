package projection

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
)

// publishSessions publishes n sessions named prefix-0.. of events events
// each and returns the last stream sequence.
func (e *env) publishSessions(prefix string, n, events int) uint64 {
	e.t.Helper()
	var last uint64
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		lines := [][]byte{[]byte(fmt.Sprintf(`{"type":"session","version":2,"id":%q,"createdAt":%d,"cwd":"/w","isSeeded":false}`, id, i+1))}
		for seq := range events {
			lines = append(lines, []byte(fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"%s says %d"}]},"surfaceOp":"append"}`, seq, 10+seq, seq, id, seq)))
		}
		_, last = e.publishLog(lines)
	}
	return last
}

// wantSessions checks that p holds exactly the sessions prefix-0..n-1 of
// events events each.
func wantSessions(t *testing.T, p *Projector, prefix string, n, events int) {
	t.Helper()
	view(t, p, func(s Snapshot) error {
		seen := 0
		err := s.SessionsByCreated(nil, func(info dshq.SessionInfo) bool {
			seen++
			if !strings.HasPrefix(info.Header.Header.ID, prefix+"-") || info.EventCount != int64(events) {
				t.Errorf("session %s with %d events; want only %s-* of %d", info.Header.Header.ID, info.EventCount, prefix, events)
			}
			return true
		})
		if err != nil {
			return err
		}
		for i := range n {
			id := fmt.Sprintf("%s-%d", prefix, i)
			if info, ok := s.Session(id); !ok || info.EventCount != int64(events) {
				t.Errorf("session %s: found %v, %d events; want %d", id, ok, info.EventCount, events)
			}
			if ev, ok := s.Event(id, int64(events-1)); !ok || !strings.Contains(string(ev.Raw), id+" says") {
				t.Errorf("session %s: last event %v %s", id, ok, ev.Raw)
			}
		}
		if seen != n {
			t.Errorf("%d sessions; want %d", seen, n)
		}
		return nil
	})
}

// TestAProjectionOfAnotherStreamIsRebuilt: a projection records the
// identity of the stream it was built from (name and creation time), so a
// projection directory opened against another stream of the same name — a
// fresh embedded server, another cluster — is rebuilt from it instead of
// taking its first records as applied (its sessions used to read "not
// found" forever).
func TestAProjectionOfAnotherStreamIsRebuilt(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sessions int
	}{
		{"a stream with fewer records than the checkpoint", 2},
		{"a stream with more records than the checkpoint", 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			a := newEnv(t)
			r := a.start(dir)
			waitGen(t, r.p, a.publishSessions("a", 4, 3))
			idA := r.p.StreamIdentity()
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}

			b := newEnv(t)
			last := b.publishSessions("b", tt.sessions, 3)
			r = b.start(dir)
			waitGen(t, r.p, last)
			wantSessions(t, r.p, "b", tt.sessions, 3)
			idB, err := IdentifyStream(context.Background(), b.js, "DSH_SESSIONS")
			if err != nil {
				t.Fatal(err)
			}
			if got := r.p.StreamIdentity(); !got.Equal(idB) || got.Equal(idA) || got.Name != "DSH_SESSIONS" {
				t.Fatalf("the projection records %s; the stream is %s (the first was %s)", got, idB, idA)
			}
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}

			// Opened again against the same stream, it is kept.
			r = b.start(dir)
			if g := r.p.Generation(); g != last {
				t.Fatalf("reopened at generation %d; want %d (kept)", g, last)
			}
			wantSessions(t, r.p, "b", tt.sessions, 3)
		})
	}
}

// TestAStreamReplacedUnderTheProjectorStopsIt: a stream deleted and
// created again while the projector follows it ends Run with
// ErrStreamReplaced, and the next Open rebuilds from the new stream.
func TestAStreamReplacedUnderTheProjectorStopsIt(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	r := e.start(dir)
	waitGen(t, r.p, e.publishSessions("a", 3, 3))
	ctx := context.Background()
	if err := e.js.DeleteStream(ctx, "DSH_SESSIONS"); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStream(ctx, e.js, bus.StreamConfig{LeaseTTL: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	last := e.publishSessions("b", 1, 2)
	if err := r.wait(); !errors.Is(err, ErrStreamReplaced) {
		t.Fatalf("Run = %v; want ErrStreamReplaced", err)
	}
	r.stop()
	r = e.start(dir)
	waitGen(t, r.p, last)
	wantSessions(t, r.p, "b", 1, 2)
}

// TestAProjectionThatDoesNotRecordItsStreamIsRebuilt: a store of an older
// dshq records no stream; once it has applied records, nothing says which
// stream they were, so it is rebuilt (an empty one just records its
// stream).
func TestAProjectionThatDoesNotRecordItsStreamIsRebuilt(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	r := e.start(dir)
	last := e.publishSessions("a", 2, 3)
	waitGen(t, r.p, last)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	cur, err := os.ReadFile(filepath.Join(dir, currentFile))
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, strings.TrimSpace(string(cur)), "projection.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(metaStream) })
	if cerr := db.Close(); err != nil || cerr != nil {
		t.Fatal(err, cerr)
	}
	p := e.open(dir)
	if g := p.Generation(); g != 0 {
		t.Fatalf("opened at generation %d; want 0 (rebuilt)", g)
	}
	r = run(t, p)
	waitGen(t, p, last)
	wantSessions(t, p, "a", 2, 3)
	if p.StreamIdentity().IsZero() {
		t.Fatal("the rebuilt projection records no stream")
	}
}
