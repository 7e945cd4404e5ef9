package tools_test

import (
	"testing"

	"github.com/dshq/dshq/internal/testenv"
	"github.com/dshq/dshq/tools/toolstest"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// newPipeline starts the real stack (embedded NATS, projector, query
// service) with the given corpus sessions.
func newPipeline(t testing.TB, ids []string) *toolstest.Pipeline {
	t.Helper()
	return toolstest.StartPipeline(t, corpusLogs(t, ids))
}
