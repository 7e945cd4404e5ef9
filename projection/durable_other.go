//go:build !linux

package projection

// bootID is unknown where the kernel does not name its boot: the store then
// syncs every commit (see durable.go).
func bootID() string { return "" }
