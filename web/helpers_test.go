package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/node"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

func TestMain(m *testing.M) {
	// chromedp's allocator reaps the browser process in the background.
	testenv.VerifyNoLeaks(m, goleak.IgnoreTopFunction("os/exec.(*Cmd).Wait"))
}

// stack is a real dshq (embedded NATS with JetStream, projector, query and
// tools services: `dshq serve` as a library) with the UI in front of it.
type stack struct {
	natsURL string
	nc      *nats.Conn
	store   *bus.Store
	ui      *Server
	srv     *httptest.Server
}

// newStack starts a stack for the test's duration.
func newStack(t testing.TB, opts ...Option) *stack {
	t.Helper()
	cfg := node.Config{Home: t.TempDir(), Listen: "127.0.0.1:0", RelaxedSync: true, Parts: node.All, Logger: testenv.Quiet()}
	n := testenv.RunUntilReady(t, func(ctx context.Context, ready func(node.Info)) error { return node.Run(ctx, cfg, ready) })
	s := &stack{natsURL: n.Info.ClientURL}
	// Registered after RunUntilReady's, so it runs before the node stops.
	t.Cleanup(func() {
		if s.ui != nil {
			s.ui.Close()
		}
		if s.srv != nil {
			s.srv.Close()
		}
		if s.nc != nil {
			s.nc.Close()
		}
	})
	ctx := context.Background()
	nc, err := nats.Connect(n.Info.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	s.nc = nc
	if s.store, err = bus.NewStore(ctx, nc); err != nil {
		t.Fatal(err)
	}
	opts = append([]Option{WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithStatusEvery(200 * time.Millisecond)}, opts...)
	if s.ui, err = New(nc, opts...); err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(s.ui)
	return s
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// importFile imports a JSONL log of the repository's testdata.
func (s *stack) importFile(t testing.TB, name string) uint64 {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hdr, events, err := record.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return s.importLog(t, hdr, events)
}

func (s *stack) importLog(t testing.TB, hdr dshq.HeaderRecord, events []dshq.Event) uint64 {
	t.Helper()
	res, err := s.store.Import(testContext(t), hdr, events)
	if err != nil {
		t.Fatalf("import %s: %v", hdr.Header.ID, err)
	}
	s.waitPersisted(t, hdr.Header.ID, res.LastSeq)
	return res.LastSeq
}

// waitPersisted waits until the projection, at generation gen or later,
// holds session id as no longer live: an import releases its write lease
// when it returns, and the projection learns that from the lease bucket
// after it applied the records, so a page asked for at once could still
// show the session live (and without its synthesized closers).
func (s *stack) waitPersisted(t testing.TB, id string, gen uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := s.ui.qc.StatSession(ctx, dshq.SessionStatRequest{SessionID: id}, query.WithMinGeneration(gen))
		if err == nil && !st.Session.Live || dshq.ErrorCode(err) == dshq.CodeSessionNotFound {
			return // not live; or not a session the UI reads (nothing to wait for)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session %s still live (or unreadable: %v) 30 s after its import", id, err)
		case <-tick.C:
		}
	}
}

// importLines imports a log given as JSONL lines (header first).
func (s *stack) importLines(t testing.TB, lines ...string) uint64 {
	t.Helper()
	hdr, events, err := record.ReadAll(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	return s.importLog(t, hdr, events)
}

// waitGeneration waits until the projection has applied gen.
func (s *stack) waitGeneration(t testing.TB, gen uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := json.Marshal(map[string]any{"minGeneration": gen, "timeoutMs": 30000})
	if _, err := s.ui.qc.Raw(ctx, "sessions.list", req); err != nil {
		t.Fatalf("generation %d not reached: %v", gen, err)
	}
}

// get fetches path from the UI and returns the status and body.
func (s *stack) get(t testing.TB, path string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 30 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b), res.Header
}

// page fetches path and fails unless it answers 200.
func (s *stack) page(t testing.TB, path string) string {
	t.Helper()
	code, body, _ := s.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	checkMarkup(t, path, body)
	return body
}

// mustContain fails unless body contains every want.
func mustContain(t testing.TB, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}

func mustNotContain(t testing.TB, what, body string, nots ...string) {
	t.Helper()
	for _, n := range nots {
		if strings.Contains(body, n) {
			t.Errorf("%s: must not contain %q", what, n)
		}
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
