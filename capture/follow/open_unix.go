//go:build unix

package follow

import (
	"os"
	"syscall"
)

// openNoBlock opens path for reading without blocking: a FIFO (or a
// device) named like a session file opens at once instead of waiting for a
// writer, and openRegular then refuses it.
func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
