package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/dshq/dshq/internal/testenv"
)

func TestServeOnAPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	r := runCLI(t, map[string]string{}, "", "serve", "--home", t.TempDir(), "--listen", addr, "--http", "off")
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

func TestServeLogsItsShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	var logs testenv.Buffer
	home := t.TempDir()
	done := make(chan int, 1)
	go func() {
		code := runContext(ctx, []string{"serve", "--json", "--home", home, "--listen", "127.0.0.1:0", "--relaxed-sync", "--http", "off"},
			func(string) string { return "" }, strings.NewReader(""), w, &logs)
		w.Close() // ends the copy below
		done <- code
	}()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // the ready document
		t.Fatalf("serve never got ready: %v\n%s", err, logs.String())
	}
	cancel()
	go io.Copy(io.Discard, out)
	if code := <-done; code != 0 {
		t.Fatalf("exit %d:\n%s", code, logs.String())
	}
	l := logs.String()
	ready, shutting, stopped := strings.Index(l, `"msg":"dshq ready"`), strings.Index(l, `"msg":"dshq shutting down"`), strings.Index(l, `"msg":"dshq stopped"`)
	if ready < 0 || shutting < ready || stopped < shutting {
		t.Errorf("want ready, shutting down, stopped in that order:\n%s", l)
	}
}
