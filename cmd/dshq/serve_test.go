package main

import (
	"net"
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
