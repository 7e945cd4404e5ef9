//go:build !unix

package follow

import "os"

// tryLock: no flock here, so no writer identity (LockWriter).
func tryLock(*os.File) (ok, supported bool, err error) { return false, false, nil }
