//go:build !unix

package follow

import "os"

// openNoBlock opens path for reading (openRegular checks first that it is
// a regular file: there is no FIFO to block on here).
func openNoBlock(path string) (*os.File, error) {
	if fi, err := os.Lstat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, &NotRegularError{Path: path, Mode: fi.Mode()}
	}
	return os.Open(path)
}
