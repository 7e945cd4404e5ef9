package main

import (
	"net"
	"os/exec"
	"strings"
	"testing"
)

func TestServeOnAPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	r := runCLI(t, map[string]string{}, "", "serve", "--home", t.TempDir(), "--listen", addr)
	want := "dshq: start embedded nats: cannot listen on " + addr + ": address already in use (another dshq serve or NATS server listens there; --listen HOST:PORT picks another address)\n"
	if r.code != 1 || !strings.HasSuffix(r.stderr, want) {
		t.Fatalf("exit %d, stderr %q; want it to end with %q", r.code, r.stderr, want)
	}
}

func TestMakeRunPassesArgs(t *testing.T) {
	make, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make is not installed: %v", err)
	}
	out, err := exec.Command(make, "-n", "-C", "../..", "run", `ARGS=--listen 127.0.0.1:4333 --home /tmp/dsh --metrics 127.0.0.1:9464`).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	if want := "./bin/dshq serve --listen 127.0.0.1:4333 --home /tmp/dsh --metrics 127.0.0.1:9464\n"; !strings.Contains(string(out), want) {
		t.Errorf("make -n run does not pass ARGS to serve (want %q):\n%s", want, out)
	}
}
