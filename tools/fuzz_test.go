package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tools/toolstest"
)

// FuzzParseTimestamp: parsing never panics, and an accepted timestamp with
// seconds is the instant Go's RFC 3339 parser finds.
func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"2026-08-29T10:40:00.123Z", "1970-01-01T00:00Z", "2024-02-29T23:59:59.9999999-23:59",
		"0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999+00:00", "2026-02-30T00:00:00Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseTimestamp(s)
		if !ok || timestampRE.FindStringSubmatch(s)[6] == "" {
			return // refused, or without seconds (which RFC 3339 requires)
		}
		ref, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("accepted %q that time.Parse refuses: %v", s, err)
		}
		if ref.UnixMilli() != got.ms {
			t.Fatalf("%q: ms %d, time.Parse %d", s, got.ms, ref.UnixMilli())
		}
	})
}

// FuzzCall: no argument object makes a tool panic; every failure is a typed,
// sanitized error.
func FuzzCall(f *testing.F) {
	var logs []toolstest.Log
	for _, log := range []string{
		`{"type":"session","version":2,"id":"me","createdAt":1,"cwd":"/w","isSeeded":false}
{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}
{"type":"user/message","seq":1,"time":2,"data":{"id":"m","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"hello fuzz"}]},"surfaceOp":"append"}
{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}`,
		`{"type":"session","version":2,"id":"x","createdAt":2,"cwd":"/w","parentSession":"me","isSeeded":false}
{"type":"user/message","seq":0,"time":5,"data":{"id":"n","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"hello fuzz again"}]},"surfaceOp":"append"}`,
	} {
		logs = append(logs, toolstest.Log{JSONL: []byte(log), Live: true})
	}
	tl, err := New(FromQueryClient(toolstest.StartPipeline(f, logs).Client))
	if err != nil {
		f.Fatal(err)
	}
	for i, s := range specs {
		f.Add(uint8(i), `{"query":"hello","session_id":"x","seq":1,"before":1,"after":1}`)
		f.Add(uint8(i), `{"query":"hello","created_at_from":"1970-01-01T00:00:00.0011Z","parent_session_ids":["me","me"],"include_root_sessions":true}`)
		f.Add(uint8(i), `{"query":"\u0000","seq_from":1e400,"seq_to":-0.0,"event_surfaces":["current"],"`+s.params[0].name+`":null}`)
	}
	f.Fuzz(func(t *testing.T, which uint8, args string) {
		name := specs[int(which)%len(specs)].name
		r, err := tl.Call(context.Background(), AsSession("me"), name, json.RawMessage(args))
		if err != nil {
			t.Fatalf("Call returned %v without cancellation", err)
		}
		if r.IsError {
			if !strings.HasPrefix(r.Text, "Error: ") || r.Code == "" {
				t.Fatalf("untyped failure %+v", r)
			}
			if r.Code == dshq.CodeToolFailed && r.Text != "Error: "+msgGeneric {
				t.Fatalf("generic failure with a specific text %+v", r)
			}
		} else if r.Text == "" {
			t.Fatal("empty success")
		}
	})
}
