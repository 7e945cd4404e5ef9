package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/testnats"
	"github.com/dshq/dshq/record"
)

func TestMain(m *testing.M) { testnats.VerifyNoLeaks(m) }

// newStore returns a Store on a fresh in-process connection to e.
func newStore(t testing.TB, e *testnats.Server, opts ...Option) *Store {
	t.Helper()
	s, err := NewStore(context.Background(), e.Conn(t), opts...)
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// header returns a valid version 2 header for id.
func header(id string) dshq.Header {
	return dshq.Header{Version: dshq.FormatVersion2, ID: id, CreatedAt: 1_700_000_000_000, Cwd: dshq.Str("/work/project")}
}

// ev builds an event record of type typ at seq with the given data (any
// JSON-marshalable value).
func ev(t testing.TB, seq int64, typ string, data any) dshq.Event {
	t.Helper()
	d, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return rawEvent(t, fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s}`, typ, seq, 1_700_000_000_000+seq, d))
}

// cmds returns n command/run events starting at seq from.
func cmds(t testing.TB, from int64, n int) []dshq.Event {
	out := make([]dshq.Event, n)
	for i := range out {
		seq := from + int64(i)
		out[i] = ev(t, seq, "command/run", map[string]any{"command": fmt.Sprintf("echo %d", seq)})
	}
	return out
}

func mustClose(t testing.TB, h *Handle) {
	t.Helper()
	if err := h.Close(context.Background()); err != nil {
		t.Errorf("close %s: %v", h.ID(), err)
	}
}

// rawOf returns the raw records of events, for comparisons.
func rawOf(evs []dshq.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = string(e.Raw)
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not a wait for a condition
	}
}

// rawEvent parses one raw event record written in a test.
func rawEvent(t testing.TB, raw string) dshq.Event {
	t.Helper()
	e, err := record.ParseEvent([]byte(raw))
	if err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	return e
}

func subjectToken(id string) (string, error) { return record.SubjectToken(id) }
