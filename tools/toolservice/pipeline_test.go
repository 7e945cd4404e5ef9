package toolservice_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
	"github.com/dshq/dshq/tools/toolstest"
)

// On the real pipeline, a harness that passes the generation of its last
// append through Dsh-Min-Generation reads its own writes.
func TestMinGenerationHeader(t *testing.T) {
	p := toolstest.StartPipeline(t, nil)
	tl, err := tools.New(tools.FromQueryClient(p.Client))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := toolservice.Serve(context.Background(), p.Conn, tl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	for _, id := range []string{"h-1", "h-2", "h-3"} {
		gen := p.Publish(t, []byte(`{"type":"session","version":2,"id":"`+id+`","createdAt":5,"cwd":"/w","isSeeded":false}
{"type":"turn/start","seq":0,"time":6,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":7,"data":{"turn":1,"step":1}}
`))
		r, err := toolservice.NewClient(p.Conn, id).AtGeneration(gen).Call(context.Background(), tools.NameSessionTrace, json.RawMessage(`{}`))
		if err != nil || r.IsError || !strings.HasPrefix(r.Text, "Session "+id+" — untitled\n") {
			t.Fatalf("%s: err %v, reply %+v", id, err, r)
		}
	}
	t.Run("a malformed generation header is an invalid request", func(t *testing.T) {
		msg := nats.NewMsg(dshq.ToolsSubjectPrefix + "." + tools.NameSessionTrace)
		msg.Header.Set(toolservice.CallerHeader, "h-1")
		msg.Header.Set(toolservice.MinGenerationHeader, "-3")
		msg.Data = []byte(`{}`)
		reply, err := p.Conn.RequestMsg(msg, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"text":"Error: Dsh-Min-Generation must be a non-negative integer","isError":true,"error":{"code":"SESSION_QUERY_INVALID_REQUEST"}}`
		if string(reply.Data) != want {
			t.Fatalf("got %s", reply.Data)
		}
	})
}
