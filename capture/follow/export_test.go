package follow

// SetReadHook sets the hook called each time a watched file's new bytes up
// to size were read and their complete lines published; set it before the
// watcher starts, and restore it once the watcher stopped.
func SetReadHook(f func(path string, size int64)) (restore func()) {
	old := readHook
	readHook = f
	return func() { readHook = old }
}
