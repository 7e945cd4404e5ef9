//go:build !unix

package capture_test

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
