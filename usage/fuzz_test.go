package usage_test

import (
	"encoding/json"
	"testing"

	"github.com/dshq/dshq/usage"
)

// FuzzEvent feeds arbitrary event records to the extraction of every
// harness: it never panics, never counts negative tokens (a bad record's
// are clamped), and its state stays storable.
func FuzzEvent(f *testing.F) {
	line := func(s string) string {
		b, _ := json.Marshal(s)
		return `{"type":"claude-code/assistant","seq":0,"time":1,"data":{"capture":{"line":1,"text":` + string(b) + `}}}`
	}
	f.Add("claude-code", line(`{"type":"assistant","timestamp":"2026-03-01T09:00:00Z","requestId":"r","message":{"id":"m","model":"x","usage":{"input_tokens":1,"output_tokens":2}}}`))
	f.Add("codex", line(`{"timestamp":"2026-03-01T09:00:00Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":5,"cached_input_tokens":9,"output_tokens":1}}}}`))
	f.Add("codex", line(`{"type":"turn_context","payload":{"model":"gpt-5"}}`))
	f.Add("", `{"type":"assistant/message","seq":0,"time":1,"data":{"message":{"source":{"model":"m"}},"usage":{"inputTokens":1,"outputTokens":2}}}`)
	f.Add("claude-code", `{"type":"x","data":{"capture":{"line":1,"text":"{","parts":2}}}`)
	f.Add("claude-code", `{"type":"capture/line-part","data":{"capture":{"line":1,"part":2,"text":"}"}}}`)
	f.Add("claude-code", `{"data":{"capture":{"base64":"!!"}}}`)
	f.Add("", `{"type":"assistant/message","data":{"usage":{"inputTokens":-5,"outputTokens":2}}}`)
	f.Fuzz(func(t *testing.T, harness, raw string) {
		st := &usage.State{}
		for range 2 {
			for _, e := range st.Event(harness, []byte(raw), 1) {
				if e.Input < 0 || e.Output < 0 || e.CacheCreation < 0 || e.CacheRead < 0 || e.CacheCreation1h < 0 || e.CacheCreation1h > e.CacheCreation {
					t.Fatalf("negative tokens %+v from %q", e, raw)
				}
				if e.Model == "" {
					t.Fatalf("an entry without model from %q", raw)
				}
			}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			var back usage.State
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("state %s does not read back: %v", b, err)
			}
		}
	})
}
