package record

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that nothing here (the zstd decoder and encoder included)
// leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
