package tools_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolstest"
)

// benchLogs returns the example corpus plus n synthetic sessions in the
// caller's workspace (and n/4 in another), each with a few turns of English
// and Chinese text mentioning the searched phrase.
func benchLogs(b *testing.B, n int) []toolstest.Log {
	var logs []toolstest.Log
	for _, id := range fullCorpus {
		logs = append(logs, toolstest.Log{JSONL: corpusFile(b, id), Live: liveSessions[id]})
	}
	for i := 0; i < n+n/4; i++ {
		cwd := "/home/u/proj"
		if i >= n {
			cwd = "/home/u/other"
		}
		log := fmt.Sprintf(`{"type":"session","version":2,"id":"bench-%04d","createdAt":%d,"cwd":%q,"isSeeded":false,"delegationDepth":0}`+"\n", i, 1788000000000+int64(i)*1000, cwd)
		seq := 0
		for turn := 1; turn <= 5; turn++ {
			log += fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":%d,"data":{"turn":%d}}`+"\n", seq, 1788000000000+int64(seq), turn)
			seq++
			log += fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"u%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"turn %d of session %d: tune the retry budget and 重试预算 for service %d"}]},"surfaceOp":"append"}`+"\n", seq, 1788000000000+int64(seq), seq, turn, i, i%17)
			seq++
			log += fmt.Sprintf(`{"type":"step/start","seq":%d,"time":%d,"data":{"turn":%d,"step":1}}`+"\n", seq, 1788000000000+int64(seq), turn)
			seq++
			log += fmt.Sprintf(`{"type":"todo/write","seq":%d,"time":%d,"data":{"todos":[{"content":"check the retry budget of shard %d","status":"pending"}]}}`+"\n", seq, 1788000000000+int64(seq), i%7)
			seq++
			log += fmt.Sprintf(`{"type":"step/end","seq":%d,"time":%d,"data":{"turn":%d,"step":1}}`+"\n", seq, 1788000000000+int64(seq), turn)
			seq++
			log += fmt.Sprintf(`{"type":"turn/end","seq":%d,"time":%d,"data":{"turn":%d,"reason":{"kind":"completed"}}}`+"\n", seq, 1788000000000+int64(seq), turn)
			seq++
		}
		logs = append(logs, toolstest.Log{JSONL: []byte(log)})
	}
	return logs
}

var benchCalls = []struct{ tool, args string }{
	{tools.NameSessionSearch, `{"query":"retry budget"}`},
	{tools.NameSessionEventSearch, `{"session_id":"bench-0001","query":"retry budget"}`},
	{tools.NameSessionTrace, `{"session_id":"s-7f3c"}`},
	{tools.NameSessionEventTrace, `{"session_id":"s-7f3c","seq":1}`},
	{tools.NameSessionEventRead, `{"session_id":"s-7f3c","seq":7,"before":5,"after":5}`},
}

func benchTools(b *testing.B, tl *tools.Tools) {
	for _, c := range benchCalls {
		b.Run(c.tool, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				r, err := tl.Call(ctx, tools.AsSession("s-caller"), c.tool, []byte(c.args))
				if err != nil || r.IsError {
					b.Fatalf("%v %+v", err, r)
				}
			}
		})
	}
}

// BenchmarkToolsPipeline measures each tool end to end over the real stack:
// query client over NATS, query service, projection shard, bbolt and Bleve.
// The session search collects every page of 250 matching sessions (cap 100).
func BenchmarkToolsPipeline(b *testing.B) {
	p := toolstest.StartPipeline(b, benchLogs(b, 200))
	benchTools(b, newTools(b, tools.FromQueryClient(p.Client)))
}
