package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown flag is refused", []string{"-nope"}, "flag provided but not defined"},
		{"a positional argument is refused", []string{"extra"}, "unexpected arguments"},
		{"a non-numeric size is refused", []string{"-sessions", "many"}, "invalid value"},
		{"a zero-session corpus is refused before anything starts", []string{"-sessions", "-1", "-quiet"}, "sessions and turns must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut)
			if err == nil || !strings.Contains(err.Error()+errOut.String(), tc.want) {
				t.Errorf("run(%q) = %v (stderr %q), want an error mentioning %q", tc.args, err, errOut.String(), tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", out.String())
			}
		})
	}
}
