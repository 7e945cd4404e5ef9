// Command dshq is the dshq CLI: serve (all-in-one), import, export, search,
// trace, read, tail, rebuild, stats, mcp, env.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dshq:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: dshq <command> [flags]; run 'dshq help'")
	}
	return fmt.Errorf("unknown command %q", args[0])
}
