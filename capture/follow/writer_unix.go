//go:build unix

package follow

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive lock on f without waiting: ok false when
// another open file description holds it.
func tryLock(f *os.File) (ok, supported bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return true, true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, true, nil
	case errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.ENOLCK):
		return false, false, nil
	}
	return false, true, err
}
