//go:build unix

package capture_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used: a
// rate measured against it does not depend on what else the machine runs.
func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
