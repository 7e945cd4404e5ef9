//go:build linux

package projection

import (
	"os"
	"strings"
)

// bootID names the running boot of the kernel (a fresh random id each
// boot), "" when it cannot be read.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
