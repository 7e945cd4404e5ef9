package daemonflags

import (
	"bytes"
	"flag"
	"io"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) (*Flags, error) {
	t.Helper()
	var f Flags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Register(fs, "replicas of what this command creates")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return &f, f.Check()
}

func TestFlags(t *testing.T) {
	t.Run("the defaults run", func(t *testing.T) {
		f, err := parse(t)
		if err != nil || f.Replicas != 1 || f.LogLevel != "info" || f.Metrics != "" {
			t.Fatalf("%+v, %v", f, err)
		}
	})
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no replicas are refused", []string{"--replicas", "0"}, "--replicas 0"},
		{"more replicas than JetStream keeps are refused", []string{"--replicas", "6"}, "--replicas 6"},
		{"an unknown log level is refused", []string{"--log-level", "loud"}, "--log-level"},
		{"the metrics flag has one name", []string{"--metrics-addr", ":1"}, "metrics-addr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := parse(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v: %v, want an error naming %s", c.args, err, c.want)
			}
		})
	}
	t.Run("the logger writes JSON at the level asked", func(t *testing.T) {
		f, err := parse(t, "--log-level", "warn")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		log, stop, err := f.Start(&b)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		log.Info("hidden")
		log.Warn("shown")
		if out := b.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"msg":"shown"`) {
			t.Fatalf("log %q", out)
		}
	})
}
