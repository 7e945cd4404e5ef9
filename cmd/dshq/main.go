// Command dshq is the dshq CLI: serve (all-in-one), import, export, search,
// trace, read, tail, rebuild, stats, env, mcp, ui (the web UI). Every command
// has --help with an example; errors are one clear line on stderr and a
// non-zero exit.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
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
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	code, exit := errorCode(err), 1
	msg := oneLine(err.Error())
	var ee *exitError
	if errors.As(err, &ee) {
		exit, msg = ee.code, ee.msg
	}
	if jsonMode(cmd, args) {
		writeJSONError(stderr, code, msg)
	} else if msg != "" {
		fmt.Fprintln(stderr, "dshq:", msg)
	}
	return exit
}

// The codes of errors the CLI itself reports (--json prints them); a
// service's error keeps its own code (SESSION_QUERY_…).
const (
	// CodeUsage: a bad command line (flag, argument or flag value).
	CodeUsage dshq.Code = "DSHQ_USAGE"
	// CodeUnavailable: no dshq answered at --nats-url.
	CodeUnavailable dshq.Code = "DSHQ_UNAVAILABLE"
	// CodeRefused: import refused some files (the summary says which).
	CodeRefused dshq.Code = "DSHQ_IMPORT_REFUSED"
	// CodeNoSource: export --source of a session that holds no source
	// file (not converted from a harness file, or an inline child).
	CodeNoSource dshq.Code = "DSHQ_NO_SOURCE"
	// CodeFailed: any other failure.
	CodeFailed dshq.Code = "DSHQ_FAILED"
)

// errorCode is err's code: a service's, the CLI's, or CodeFailed.
func errorCode(err error) dshq.Code {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	if c := dshq.ErrorCode(err); c != "" {
		return c
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.errCode != "" {
		return ee.errCode
	}
	return CodeFailed
}

// jsonMode reports whether --json was given, also when the command line
// failed to parse before the flag was read.
func jsonMode(root *cobra.Command, args []string) bool {
	if on, err := root.PersistentFlags().GetBool("json"); err == nil && on {
		return true
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// writeJSONError writes {"error":{"code","message"}} on one line.
func writeJSONError(w io.Writer, code dshq.Code, msg string) {
	b, _ := json.Marshal(dshq.ErrorReply{Error: dshq.ErrorBody{Code: code, Message: msg}})
	fmt.Fprintf(w, "%s\n", b)
}

// exitError carries a specific exit code, and the error code --json
// prints.
type exitError struct {
	code    int
	msg     string
	errCode dshq.Code
}

func (e *exitError) Error() string { return e.msg }

// codedError is an error with the code --json prints.
type codedError struct {
	code dshq.Code
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// usageErrorf is a bad command line (CodeUsage).
func usageErrorf(format string, args ...any) error {
	return &codedError{code: CodeUsage, err: fmt.Errorf(format, args...)}
}

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
