package tools_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolstest"
)

// longCallerLog is a session of turns complete turns (five events each) and
// one open turn whose step/start is the current step.
func longCallerLog(id string, turns int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"type":"session","version":2,"id":%q,"createdAt":1788000000000,"cwd":"/home/u/proj","isSeeded":false,"delegationDepth":0}`+"\n", id)
	seq := 0
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format+"\n", append([]any{seq, 1788000000000 + int64(seq)}, args...)...)
		seq++
	}
	for turn := 1; turn <= turns+1; turn++ {
		line(`{"type":"turn/start","seq":%d,"time":%d,"data":{"turn":%d}}`, turn)
		line(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"u%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"turn %d: tune the retry budget"}]},"surfaceOp":"append"}`, turn, turn)
		line(`{"type":"step/start","seq":%d,"time":%d,"data":{"turn":%d,"step":1}}`, turn)
		if turn == turns+1 {
			break
		}
		line(`{"type":"step/end","seq":%d,"time":%d,"data":{"turn":%d,"step":1}}`, turn)
		line(`{"type":"turn/end","seq":%d,"time":%d,"data":{"turn":%d,"reason":{"kind":"completed"}}}`, turn)
	}
	return []byte(b.String())
}

// The caller's current step is read with one sessions.stat request, however
// long the caller's log: no events.list scan.
func TestCurrentStepLookupOnALongLog(t *testing.T) {
	const turns = 500 // 2503 events, which a scan would read in full
	p := toolstest.StartPipeline(t, []toolstest.Log{{JSONL: longCallerLog("s-long", turns), Live: true}})
	tl := newTools(t, tools.FromQueryClient(p.Client))
	sub, err := p.Conn.SubscribeSync("dsh.query.v1.>")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := p.Conn.Flush(); err != nil {
		t.Fatal(err)
	}

	r := call(t, tl, "s-long", tools.NameSessionEventSearch, `{"query":"retry budget","seq_from":2490}`)
	if err := p.Conn.Flush(); err != nil {
		t.Fatal(err)
	}
	asked := map[string]int{}
	for {
		m, err := sub.NextMsg(time.Millisecond)
		if err != nil {
			break
		}
		asked[strings.TrimPrefix(m.Subject, "dsh.query.v1.")]++
	}

	t.Run("one sessions.stat request and no events.list", func(t *testing.T) {
		if asked["sessions.stat"] != 1 || asked["events.list"] != 0 {
			t.Fatalf("requests %v; want one sessions.stat and no events.list", asked)
		}
	})
	t.Run("matches before the current step are found and the current step is excluded", func(t *testing.T) {
		// Turn 499's message is seq 2491; turn 501's (seq 2501) is in the
		// current step (its step/start is seq 2502, so 2501 is before it);
		// nothing from seq 2502 on may appear.
		if r.IsError || !strings.Contains(r.Text, "seq 2491 |") || !strings.Contains(r.Text, "seq 2501 |") || strings.Contains(r.Text, "seq 2502") {
			t.Fatalf("result %+v", r)
		}
	})
}
