package tools_test

import (
	"testing"

	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolstest"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// newPipeline starts the real stack (embedded NATS, projector, query
// service) with the given corpus sessions.
func newPipeline(t testing.TB, ids []string) *toolstest.Pipeline {
	t.Helper()
	logs := make([]toolstest.Log, len(ids))
	for i, id := range ids {
		logs[i] = toolstest.Log{JSONL: corpusFile(t, id), Live: liveSessions[id]}
	}
	return toolstest.StartPipeline(t, logs)
}

// backends are the services the authorization suites run against.
// open loads corpus sessions; openLogs loads ad-hoc logs.
var backends = []struct {
	name     string
	open     func(t testing.TB, ids []string) tools.Service
	openLogs func(t testing.TB, logs []toolstest.Log) tools.Service
}{
	{
		"in-memory service",
		func(t testing.TB, ids []string) tools.Service { return newFake(t, ids) },
		func(t testing.TB, logs []toolstest.Log) tools.Service {
			f := toolstest.New()
			for _, l := range logs {
				if err := f.AddJSONL(l.JSONL, l.Live); err != nil {
					t.Fatal(err)
				}
			}
			return f
		},
	},
	{
		"real pipeline",
		func(t testing.TB, ids []string) tools.Service {
			return tools.FromQueryClient(newPipeline(t, ids).Client)
		},
		func(t testing.TB, logs []toolstest.Log) tools.Service {
			return tools.FromQueryClient(toolstest.StartPipeline(t, logs).Client)
		},
	},
}
