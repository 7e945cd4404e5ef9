// Package pprofsrv serves Go's net/http/pprof profiles on an address of its
// own, for the --pprof flag of the commands that run dshq's parts: profile
// a running process (go tool pprof http://HOST:PORT/debug/pprof/profile)
// without exposing the profiles on the metrics or UI listeners.
package pprofsrv

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Serve serves the profiles on addr until stop is called; stop waits for
// the server's goroutine.
func Serve(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() { _ = srv.Close(); <-done }, nil
}
