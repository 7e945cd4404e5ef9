package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/e2e/internal/simfacts"
	"github.com/dshq/dshq/query"
)

// TestCrashedHarnessReadsBalancedUntilResumed kills a harness process
// (SIGKILL) in the middle of a turn, with a tool call unanswered. While its
// write lease holds, reads return the log as written; once the lease lapses,
// the session reads as the balanced view (a synthetic tool result citing the
// call, step/end, turn/end interrupted — never written). A harness that then
// resumes the session writes exactly that view into the log.
func TestCrashedHarnessReadsBalancedUntilResumed(t *testing.T) {
	t.Parallel() // mostly waiting (a lease to lapse, processes to start)
	ctx := testCtx(t, 3*time.Minute)
	serve, ready := startServe(t, "dshq serve (embedded)", []string{"serve", "--home", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"})
	url, _ := ready["nats"].(string)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	q := query.NewClient(nc)

	facts := filepath.Join(t.TempDir(), "crash.json")
	sim := startProc(t, "harnesssim (crash)", bins.harnesssim, []string{"--nats-url", url, "--index", "5", "--facts", facts, "--crash"}, nil)
	sim.waitLine(t, startTimeout, "the open turn", func(l string) bool { return l == "open" })
	c := loadCorpus(t, []string{facts})
	s := c.role(0, simfacts.RoleCrash)
	waitCaughtUp(t, q, streamLastSeq(t, nc))

	read := func(t *testing.T) []dshq.Event {
		t.Helper()
		r, err := q.ReadSession(ctx, dshq.SessionReadRequest{SessionID: s.ID, Limit: dshq.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		return r.Events
	}
	live := func() (bool, error) {
		page, err := q.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: []dshq.Filter{{Kind: dshq.FilterID, Values: []*string{&s.ID}}}})
		if err != nil || len(page.Items) != 1 {
			return false, err
		}
		return page.Items[0].Live, nil
	}

	t.Run("while the harness holds the lease the log reads as written", func(t *testing.T) {
		if l, err := live(); err != nil || !l {
			t.Fatalf("live %v, %v", l, err)
		}
		if got := read(t); !slices.EqualFunc(got, s.Events, func(e dshq.Event, raw json.RawMessage) bool { return string(e.Raw) == string(raw) }) {
			t.Fatalf("read %d events, want the %d written", len(got), len(s.Events))
		}
	})

	sim.kill(t)
	waitFor(t, time.Minute, "the crashed harness's lease to lapse", func() (bool, error) {
		l, err := live()
		return !l && err == nil, err
	})

	var balanced []dshq.Event
	t.Run("after the lease lapses the log reads balanced by synthetic closers", func(t *testing.T) {
		balanced = read(t)
		n := len(s.Events)
		if len(balanced) != n+3 {
			t.Fatalf("%d events, want %d written + 3 closers", len(balanced), n)
		}
		for i, raw := range s.Events {
			if string(balanced[i].Raw) != string(raw) {
				t.Fatalf("seq %d changed: %s", i, balanced[i].Raw)
			}
		}
		closers := balanced[n:]
		var types []string
		for _, e := range closers {
			types = append(types, e.Type)
		}
		if !slices.Equal(types, []string{dshq.TypeToolResult, "step/end", "turn/end"}) {
			t.Fatalf("closers %v", types)
		}
		if want := `[` + jsonInt(s.ToolCall.CallSeq) + `]`; string(closers[0].SourceEventSeqs) != want {
			t.Errorf("synthetic tool result cites %s, want %s", closers[0].SourceEventSeqs, want)
		}
		var end struct {
			Reason struct {
				Kind string `json:"kind"`
			} `json:"reason"`
		}
		if err := json.Unmarshal(closers[2].Data, &end); err != nil || end.Reason.Kind != "interrupted" {
			t.Errorf("turn/end %s", closers[2].Data)
		}
	})

	t.Run("a harness that resumes the session writes exactly the balanced view", func(t *testing.T) {
		if balanced == nil {
			t.Skip("no balanced view")
		}
		store, err := bus.NewStore(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		h, err := store.Open(ctx, s.ID, bus.Write)
		if err != nil {
			t.Fatal(err)
		}
		seq, err := bus.Resume(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
		waitCaughtUp(t, q, seq)
		waitFor(t, time.Minute, "the resumed session's lease to be released", func() (bool, error) {
			l, err := live()
			return !l && err == nil, err
		})
		got := read(t)
		if !slices.EqualFunc(got, balanced, func(a, b dshq.Event) bool { return string(a.Raw) == string(b.Raw) }) {
			t.Fatalf("after resume:\n%s\nbalanced view:\n%s", rawLines(got), rawLines(balanced))
		}
	})
	serve.stop(t, 30*time.Second)
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func rawLines(evs []dshq.Event) string {
	var out []byte
	for _, e := range evs {
		out = append(append(out, e.Raw...), '\n')
	}
	return string(out)
}
