package toolservice_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
	"github.com/dshq/dshq/tools/toolstest"
)

// maxAcceptedEvent is the largest event record the harness SDK stores on a
// bus of the default 1 MiB payload: the payload less the 1 KiB it keeps
// for the record's headers (bus.Handle.Append).
const maxAcceptedEvent = 1<<20 - 1024

// bigEvent returns a tool/result record of exactly size bytes whose output
// is text full of the characters JSON's HTML escaping used to inflate.
func bigEvent(seq int, size int) []byte {
	head := fmt.Sprintf(`{"type":"tool/result","seq":%d,"time":%d,"data":{"id":"m-t%d","role":"tool","callId":"c%d","content":[{"type":"text","text":"`, seq, 1000+seq, seq, seq)
	tail := `"}]},"surfaceOp":"append"}`
	fill := size - len(head) - len(tail)
	text := strings.Repeat("<a&b>", fill/5+1)[:fill]
	return []byte(head + text + tail)
}

// TestTheLargestAcceptedEventIsReadInFull: an event as large as the bus
// accepts (1,047,552 bytes) is read through events.read — carried once,
// byte for byte, without HTML escapes — and through session_event_read,
// whose answer spills and reads back whole.
func TestTheLargestAcceptedEventIsReadInFull(t *testing.T) {
	const id = "big-1"
	log := []byte(`{"type":"session","version":2,"id":"` + id + `","createdAt":5,"cwd":"/w","isSeeded":false}` + "\n" +
		`{"type":"turn/start","seq":0,"time":6,"data":{"turn":1}}` + "\n")
	events := map[int][]byte{1: bigEvent(1, 300<<10), 2: bigEvent(2, 530<<10), 3: bigEvent(3, maxAcceptedEvent)}
	for seq := 1; seq <= 3; seq++ {
		log = append(append(log, events[seq]...), '\n')
	}
	log = append(log, `{"type":"step/start","seq":4,"time":9,"data":{"turn":1,"step":1}}`+"\n"...)
	if n := len(events[3]); n != 1047552 {
		t.Fatalf("the largest event is %d bytes", n)
	}
	p := toolstest.StartPipeline(t, []toolstest.Log{{JSONL: log}})
	ctx := context.Background()

	for _, tt := range []struct {
		seq       int
		twice     bool
		neighbors bool
	}{
		{1, true, true},   // fits twice: target as before, and neighbours
		{2, false, true},  // 530 KB (it used to fail REPLY_TOO_LARGE): once, with its neighbour
		{3, false, false}, // the largest: once, alone
	} {
		t.Run(fmt.Sprintf("events.read of a %d-byte event", len(events[tt.seq])), func(t *testing.T) {
			w, err := p.Client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: id, Seq: int64(tt.seq), Before: 1, After: 1})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(w.Target.Raw, events[tt.seq]) {
				t.Fatalf("target is %d bytes, not the %d written", len(w.Target.Raw), len(events[tt.seq]))
			}
			if w.TargetOmitted == tt.twice {
				t.Fatalf("targetOmitted %v; want %v", w.TargetOmitted, !tt.twice)
			}
			if got := w.EndSeq - w.StartSeq; (got > 0) != tt.neighbors {
				t.Fatalf("window %d..%d", w.StartSeq, w.EndSeq)
			}
			raw, err := p.Client.Raw(ctx, wire.EndpointEventsRead, []byte(fmt.Sprintf(`{"sessionId":%q,"seq":%d}`, id, tt.seq)))
			if err != nil {
				t.Fatal(err)
			}
			if n := bytes.Count(raw, events[tt.seq][:200]); n != map[bool]int{true: 2, false: 1}[tt.twice] {
				t.Fatalf("the reply carries the event %d times", n)
			}
			if bytes.Contains(raw, []byte(`\u003c`)) || len(raw) > int(p.Conn.MaxPayload()) {
				t.Fatalf("the reply is %d bytes and escapes HTML: %t", len(raw), bytes.Contains(raw, []byte(`\u003c`)))
			}
		})
	}

	tl, err := tools.New(tools.FromQueryClient(p.Client))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := toolservice.Serve(ctx, p.Conn, tl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	t.Run("session_event_read of the largest event spills, and reads back whole", func(t *testing.T) {
		c := toolservice.NewClient(p.Conn, id)
		preview, err := c.Call(ctx, tools.NameSessionEventRead, json.RawMessage(`{"seq":3}`))
		if err != nil || preview.IsError || preview.Spill == nil {
			t.Fatalf("reply %.300q, %v", preview.Text, err)
		}
		full, err := c.ReadSpill(ctx, preview.Spill.ID)
		if err != nil {
			t.Fatal(err)
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, events[3], "", "  "); err != nil {
			t.Fatal(err)
		}
		if len(full) != preview.Spill.Bytes || !strings.Contains(full, "Target event seq 3:\n```json\n"+pretty.String()+"\n```") {
			t.Fatalf("the spilled text (%d bytes) does not hold the event", len(full))
		}
	})
}
