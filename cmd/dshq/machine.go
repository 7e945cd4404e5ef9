package main

import (
	"github.com/spf13/pflag"
)

// addMachineFlag adds --machine: the name the headers of the Claude Code
// and Codex sessions a command creates give the machine they were captured
// on (docs/protocol.md#2-the-session-log-stream), and that its write leases name their holder by;
// def is globals.machine ($DSH_MACHINE, else the host name).
func addMachineFlag(f *pflag.FlagSet, dst *string, def string) {
	f.StringVar(dst, "machine", def, "the machine the sessions are captured on, recorded in their headers and named by its write leases (default: $DSH_MACHINE, else the host name; \"\" records none)")
}
