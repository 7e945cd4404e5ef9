package pprofsrv

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestServe_ServesProfilesUntilStopped(t *testing.T) {
	if _, err := Serve("not-an-address"); err == nil || !strings.Contains(err.Error(), "--pprof") {
		t.Fatalf("a bad address: err = %v, want a --pprof error", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop, err := Serve(addr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: status %d, body %.80q", resp.StatusCode, body)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Fatal("still serving after stop")
	}
}
