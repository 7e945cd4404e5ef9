package main

import (
	"os"

	"github.com/spf13/pflag"
)

// addMachineFlag adds --machine: the name the headers of the Claude Code
// and Codex sessions a command creates give the machine they were captured
// on (docs/protocol.md §2), by default this host's name.
func addMachineFlag(f *pflag.FlagSet, dst *string) {
	host, _ := os.Hostname()
	f.StringVar(dst, "machine", host, "the machine the sessions are captured on, recorded in their headers (default: the host name; \"\" records none)")
}
