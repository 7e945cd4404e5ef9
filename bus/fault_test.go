package bus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
)

// Eight writers append to 200 sessions over TCP while the server is stopped
// and restarted twice on the same directory and port. Afterwards every log
// is exactly what its writer appended: no loss, no duplicate, no reordering.
func TestFault_ServerRestartsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	const (
		writers     = 8
		sessions    = 200
		rounds      = 5
		maxBatch    = 5
		restarts    = 2
		perWriter   = sessions / writers
		totalRounds = sessions * rounds
	)
	dir := t.TempDir()
	srv, err := startFaultServer(dir, "0")
	if err != nil {
		t.Fatal(err)
	}
	url := srv.ClientURL()
	port := faultPort(srv)
	var srvMu sync.Mutex // guards srv
	defer func() {
		srvMu.Lock()
		defer srvMu.Unlock()
		_ = srv.Shutdown(context.Background())
	}()

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var progress, retries atomic.Int64
	var wg sync.WaitGroup
	logs := make([][]dshq.Event, sessions) // logs[i] is what session i's writer appended
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := runWriter(ctx, t, url, w, perWriter, rounds, maxBatch, logs, &progress, &retries); err != nil {
				errs <- fmt.Errorf("writer %d: %w", w, err)
				cancel()
			}
		}()
	}

	for r := 1; r <= restarts; r++ {
		target := int64(totalRounds * r / (restarts + 1))
		for progress.Load() < target && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond) // poll the writers' progress
		}
		if ctx.Err() != nil {
			break // a writer failed; its error is reported below
		}
		srvMu.Lock()
		if err := srv.Shutdown(context.Background()); err != nil {
			srvMu.Unlock()
			t.Fatal(err)
		}
		srv, err = startFaultServer(dir, port)
		srvMu.Unlock()
		if err != nil {
			t.Fatalf("restart %d: %v", r, err)
		}
		t.Logf("restart %d at %d/%d appends, %v", r, target, totalRounds, time.Since(start))
	}
	wg.Wait()
	t.Logf("writers done at %v", time.Since(start))
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d publish attempts were retried", retries.Load())
	if retries.Load() == 0 {
		t.Fatal("no publish was retried: the restarts did not hit the writers")
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s, err := NewStore(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sessions {
		id := faultID(i)
		r, err := s.Open(ctx, id, Read)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Read(ctx, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		mustClose(t, r)
		want := logs[i]
		if len(got) != len(want) {
			t.Fatalf("session %s: %d events stored, %d appended", id, len(got), len(want))
		}
		for j := range got {
			if string(got[j].Raw) != string(want[j].Raw) {
				t.Fatalf("session %s event %d: stored %s, appended %s", id, j, got[j].Raw, want[j].Raw)
			}
		}
		snap, err := s.Stat(ctx, id)
		if err != nil || snap.EventCount != int64(len(want)) {
			t.Fatalf("session %s: stat %+v %v, want %d events (a duplicate would be counted)", id, snap, err, len(want))
		}
	}
}

func faultID(i int) string { return fmt.Sprintf("fault-%03d", i) }

// runWriter owns sessions [w*n, (w+1)*n): it creates them, then appends a
// random batch to each in turn for the given number of rounds.
func runWriter(ctx context.Context, t *testing.T, url string, w, n, rounds, maxBatch int, logs [][]dshq.Event, progress, retries *atomic.Int64) error {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectBufSize(64<<20))
	if err != nil {
		return err
	}
	defer nc.Close()
	// Writers 0 and 1 publish every multi-record append as an atomic batch, so
	// restarts hit both publishing modes.
	s, err := NewStore(ctx, nc, WithAtomicMin(faultAtomicMin(w)))
	if err != nil {
		return err
	}
	defer func() { retries.Add(s.pub.retries.Load()) }()
	rng := rand.New(rand.NewPCG(uint64(w), 1))
	handles := make([]*Handle, n)
	for k := range n {
		h, err := s.Create(ctx, header(faultID(w*n+k)))
		if err != nil {
			return err
		}
		defer h.Close(ctx)
		handles[k] = h
	}
	for range rounds {
		for k, h := range handles {
			i := w*n + k
			next := int64(len(logs[i]))
			batch := cmds(t, next, 1+rng.IntN(maxBatch))
			if _, err := h.Append(ctx, batch); err != nil {
				return fmt.Errorf("append to %s at %d: %w", h.ID(), next, err)
			}
			logs[i] = append(logs[i], batch...)
			progress.Add(1)
		}
	}
	return nil
}

// startFaultServer starts an embedded server with the fault tests' sync
// policy on loopback port port ("0" = a free one) in dir, where a restart
// finds the same store. The caller shuts it down: a test restarts it on the
// same directory and port, which testnats, one server per test, does not do.
func startFaultServer(dir, port string) (*embedded.Server, error) {
	return embedded.Start(context.Background(), embedded.Config{Dir: dir, Listen: "127.0.0.1:" + port, Sync: faultSync})
}

// faultPort is the port srv listens on, to restart it on.
func faultPort(srv *embedded.Server) string {
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	return port
}

// faultSync is the fault test's sync policy: the default, so every
// acknowledged record is on disk when the server stops.
const faultSync = embedded.SyncAlways

// faultAtomicMin gives writers 0 and 1 atomic batches for every
// multi-record append, the others the default (record by record here).
func faultAtomicMin(w int) int {
	if w < 2 {
		return 2
	}
	return DefaultAtomicMin
}
