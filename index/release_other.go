//go:build !linux

package index

// ReleaseMapped is a no-op where the pages of the segment files' maps are
// not released (see release_linux.go).
func (x *Index) ReleaseMapped() error { return nil }
