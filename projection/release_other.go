//go:build !linux

package projection

// releaseMapped is a no-op where the pages of the store's map are not
// released (see release_linux.go).
func (s *store) releaseMapped() error { return nil }
