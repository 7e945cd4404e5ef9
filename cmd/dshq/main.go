// Command dshq is the dshq CLI: serve (all-in-one), import, export, search,
// trace, read, tail, rebuild, stats, env, mcp, ui (the web UI). Every command
// has --help with an example; errors are one clear line on stderr and a
// non-zero exit.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI and returns the process exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, os.Getenv, stdin, stdout, stderr)
}

// runContext executes the CLI until ctx ends (SIGINT in main) with getenv as
// its environment, and returns the exit code.
func runContext(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := newRootCmd(getenv, stdin, stdout, stderr)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, "dshq:", ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "dshq:", oneLine(err.Error()))
		return 1
	}
	return 0
}

// exitError carries a specific exit code.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// oneLine folds a multi-line error into one line.
func oneLine(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}
