package capture_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/claudecode"
	"github.com/dshq/dshq/capture/codex"
	"github.com/dshq/dshq/record"
)

// convertSmall converts a small Codex rollout with a long line split over
// several events (the event bound is capture.MinMaxEventBytes).
func convertSmall(t *testing.T) ([]byte, []dshq.Event) {
	t.Helper()
	long := strings.Repeat("ledger line ", 1200)
	data := []byte(`{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s","cwd":"/w"}}` + "\n" +
		`{"timestamp":"2026-01-01T00:00:01Z","type":"event_msg","payload":{"type":"user_message","message":"` + long + `"}}` + "\r\n" +
		`{"timestamp":"2026-01-01T00:00:02Z","type":"event_msg","payload":{"type":"agent_message","message":"done"}}`)
	ups, err := capture.Convert(codex.New(capture.Config{Path: "rollout-s.jsonl", MaxEventBytes: capture.MinMaxEventBytes}), data)
	if err != nil {
		t.Fatal(err)
	}
	logs, err := capture.Collect(ups)
	if err != nil {
		t.Fatal(err)
	}
	return data, logs[0].Events
}

func TestSourceWritesTheFileBack(t *testing.T) {
	data, events := convertSmall(t)
	parts := 0
	for _, e := range events {
		if e.Type == capture.TypeLinePart {
			parts++
		}
	}
	if parts == 0 {
		t.Fatal("the long line was not split")
	}
	got, err := capture.Source(events)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Source = %q, %v", got, err)
	}
	lines, err := capture.SourceLines(events)
	if err != nil || len(lines) != 3 || lines[1].EOL != "\r\n" || lines[2].EOL != "" {
		t.Fatalf("SourceLines = %+v, %v", lines, err)
	}
}

func TestSourceRefusesLogsItCannotRebuild(t *testing.T) {
	_, events := convertSmall(t)
	without := func(keep func(i int, e dshq.Event) bool) []dshq.Event {
		var out []dshq.Event
		for i, e := range events {
			if keep(i, e) {
				out = append(out, e)
			}
		}
		return out
	}
	firstPart := -1
	for i, e := range events {
		if e.Type == capture.TypeLinePart && firstPart < 0 {
			firstPart = i
		}
	}
	native, err := record.ParseEvent([]byte(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		events []dshq.Event
		msg    string
	}{
		{"a native log", []dshq.Event{native}, "no capture member"},
		{"a log missing a piece of a line", without(func(i int, _ dshq.Event) bool { return i != firstPart }), "out of order"},
		{"a log missing its last piece", without(func(i int, e dshq.Event) bool { return i <= firstPart || e.Type != capture.TypeLinePart }), "pieces"},
		{"a log missing the holder of line 1", events[1:], "expected line 1"},
		{"an empty log", nil, "holds no source line"},
	}
	for _, tt := range tests {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			_, err := capture.Source(tt.events)
			var se *capture.SourceError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Source = %v, want a *SourceError saying %q", err, tt.msg)
			}
		})
	}
}

func TestAChildSessionNamesTheSessionHoldingItsLines(t *testing.T) {
	data := []byte(`{"type":"user","uuid":"a","sessionId":"p","cwd":"/w","timestamp":"2026-01-01T00:00:00Z","message":{"content":"go"}}` + "\n" +
		`{"type":"user","uuid":"b","isSidechain":true,"agentId":"k","sessionId":"p","timestamp":"2026-01-01T00:00:01Z","message":{"content":"sub"}}` + "\n")
	ups, err := capture.Convert(claudecode.New(capture.Config{Path: "p.jsonl"}), data)
	if err != nil {
		t.Fatal(err)
	}
	logs, _ := capture.Collect(ups)
	if len(logs) != 2 {
		t.Fatalf("%d logs", len(logs))
	}
	if _, err := capture.Source(logs[1].Events); err == nil || !strings.Contains(err.Error(), `held by session "cc-p"`) {
		t.Fatalf("Source(child) = %v", err)
	}
}

func TestCollectRefusesUpdatesThatDoNotFit(t *testing.T) {
	h := &dshq.HeaderRecord{Header: dshq.Header{ID: "s"}}
	ev := func(seq int64) dshq.Event { return dshq.Event{Seq: seq, Raw: json.RawMessage(`{}`)} }
	for _, tt := range []struct {
		name string
		ups  []capture.Update
		msg  string
	}{
		{"events before their header", []capture.Update{{SessionID: "s", Events: []dshq.Event{ev(0)}}}, "before its header"},
		{"a second header", []capture.Update{{SessionID: "s", Header: h}, {SessionID: "s", Header: h}}, "second header"},
		{"a seq gap", []capture.Update{{SessionID: "s", Header: h, Events: []dshq.Event{ev(1)}}}, "expected 0"},
	} {
		t.Run("it refuses "+tt.name, func(t *testing.T) {
			if _, err := capture.Collect(tt.ups); err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Collect = %v, want %q", err, tt.msg)
			}
		})
	}
}
